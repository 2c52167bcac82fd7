"""DeepEP's engines (V1, V2/EPv2) as data: the one place a module asks "which engine, and what does it need?"

Every stage used to decide by testing the string ``engine == "v2"`` (spec rules, the build plan,
the lock's requirements, pixi tasks, overlay rules, doctor checks). Each of those now reads a field
of the :class:`Engine` record here, so a new engine is a new entry in :data:`ENGINES` (and its recipe
under ``recipes/``), not an edit in twelve modules (issue 41.2; docs/architecture.md "How to add an
engine").

It sits in ``base`` because the spec (layer 3) and the overlay (layer 8, imported by `activate`)
both read it: data only, stdlib only, no import of the rest of the package.

Identity: the fields that change what is built (``recipe``, ``nccl_gin``, ``recipe_providers``) enter
a build id only through what the build plan puts in the node (the recipe folder's hash, the variant,
the externals), exactly as the string tests did; the record itself is not hashed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

# DeepEP's own test scripts run as pixi tasks: name → (script under share/deep-ep/tests, description).
TestTasks = Mapping[str, tuple[str, str]]


@dataclass(frozen=True)
class Engine:
    """One DeepEP engine: what selects it, what it builds with, what it needs and what it turns on."""

    name: str
    """The catalog's ``engine`` (recipes/deep-ep/sources.toml) and the build record's ``engine``
    (``deep_ep/_deepep_env_build.json``, written by the recipe)."""
    title: str
    """How messages name it."""
    versions: str
    """The conda versions of the deep-ep package its revisions build (a range: the catalog is checked)."""
    recipe: str
    """``recipes/<recipe>``: the recipe that builds the ``deep-ep`` package for it."""
    marker: Optional[str]
    """A file of the installed ``deep_ep`` package only this engine has (doctor tells engines apart by
    it, never by importing); None: the engine assumed when no other engine's marker is there."""
    extension: str
    """Glob of the compiled extension; ``{pkg}`` is the deep_ep package folder, ``{site}`` its parent."""
    nccl_gin: bool = False
    """Built and run over NCCL's Gin device API: the NCCL component enters its build (externals,
    variant), the NCCL spec rules apply, and NCCL/Gin overlay rules and doctor checks act."""
    jit: bool = False
    """JIT-compiles kernels at run time: a conda CUDA env also gets cuda-nvcc and cuda-cuobjdump."""
    nvshmem_providers: tuple[str, ...] = ("source", "wheel")
    """The NVSHMEM providers its recipe builds against."""
    recipe_providers: Mapping[str, str] = field(default_factory=dict)
    """NVSHMEM provider → the name its recipe knows it by (V2's recipe calls the repacked wheel "source")."""
    floors: Mapping[str, str] = field(default_factory=dict)
    """``nccl``/``pytorch``/``cuda`` ranges it needs when a revision's catalog entry records none."""
    features: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """Features its recipe's verify_install.py knows: feature → (file in the package, name defined there)."""
    device_hca_mapping: bool = False
    """Reads ``DEEP_EP_DEVICE_TO_HCA_MAPPING`` (PR #466's ``Buffer._setup_device_hca_mapping``)."""
    test_tasks: TestTasks = field(default_factory=dict)
    """Its own tests, as pixi tasks beside the legacy three every engine has."""
    spec_rules: tuple[str, ...] = ()
    """Ids of envspec rules (envspec/rules.py) that judge only specs of this engine."""
    doctor_families: tuple[str, ...] = ()
    """Doctor check families (doctor/run.py FAMILY_ORDER) that speak only when Python imports this engine."""
    overlay_rules: tuple[str, ...] = ()
    """Overlay rules that act only on a prefix whose build record names this engine."""


ENGINES: dict[str, Engine] = {
    "v1": Engine(
        name="v1", title="DeepEP 1.x (V1)", versions=">=1,<2", recipe="deep-ep",
        marker=None, extension="{site}/deep_ep_cpp*.so",
        nvshmem_providers=("source", "wheel"),
        # DeepEP PR #466 (head 8a07e7e): Buffer._setup_device_hca_mapping reads
        # DEEP_EP_DEVICE_TO_HCA_MAPPING. Without it every GPU used mlx5_0 (seed 000 §4 problem 1).
        features={"pr-466": ("buffer.py", "_setup_device_hca_mapping")},
        device_hca_mapping=True,
        spec_rules=("deepep-v1-nvshmem-layout",),
    ),
    "v2": Engine(
        # DeepEP 2.x (b306af0 on): EPv2, NCCL Gin + JIT kernels. recipes/deep-ep-v2 is its own recipe so
        # recipes/deep-ep stays byte-identical and every V1 build id stays what it was.
        name="v2", title="DeepEP 2.x (EPv2)", versions=">=2,<3", recipe="deep-ep-v2",
        marker="buffers/elastic.py", extension="{pkg}/_C*.so",   # setup.py: CUDAExtension deep_ep._C
        nccl_gin=True, jit=True,
        nvshmem_providers=("source", "wheel", "pip"),
        recipe_providers={"wheel": "source"},
        # EPv2's README "Requirements" (dd758ca)
        floors={"nccl": ">=2.30.4", "pytorch": ">=2.10", "cuda": ">=12.3"},
        features={"elastic-buffer": ("buffers/elastic.py", "ElasticBuffer")},
        test_tasks={
            "deepep-test-elastic-ep": ("elastic/test_ep.py", "DeepEP 2.x's EPv2 test (ElasticBuffer: NCCL Gin, JIT kernels)"),
            "deepep-test-elastic-agrs": ("elastic/test_agrs.py", "DeepEP 2.x's all-gather/reduce-scatter test"),
        },
        spec_rules=("deepep-v2-legacy-nvshmem-3.5.19", "pytorch-pip-nccl-pin", "deepep-v2-one-nccl",
                    "deepep-v2-nccl-provider"),
        doctor_families=("deepep-v2",),
        overlay_rules=("nccl-preload", "deepep-jit-cache", "no-gin-transport"),
    ),
}

DEFAULT_ENGINE = "v1"
"""The engine of an installed deep_ep that shows no other engine's marker."""


def get_engine(name: str) -> Engine:
    """The engine named ``name`` (KeyError names the known ones)."""
    try:
        return ENGINES[name]
    except KeyError:
        raise KeyError(f"unknown DeepEP engine {name!r} (known: {', '.join(ENGINES)})") from None


def engine_of_record(record: object) -> Optional[Engine]:
    """The engine a deep_ep build record (its parsed JSON) names, or None."""
    name = record.get("engine") if isinstance(record, dict) else None
    return ENGINES.get(name) if isinstance(name, str) else None


def engine_by_marker(has_file: Callable[[str], bool]) -> Engine:
    """The engine of an installed deep_ep package: the first whose marker file ``has_file`` finds
    (relative to the package folder), else :data:`DEFAULT_ENGINE`."""
    for e in ENGINES.values():
        if e.marker is not None and has_file(e.marker):
            return e
    return ENGINES[DEFAULT_ENGINE]


def engine_only_rules(kind: str) -> frozenset[str]:
    """Every rule id some engine claims (``kind``: ``spec_rules`` or ``overlay_rules``): such a rule
    acts only for the engines that name it; any other rule acts for all."""
    return frozenset(r for e in ENGINES.values() for r in getattr(e, kind))


def all_features() -> dict[str, tuple[str, str]]:
    """feature → (file, name) over every engine, in engine order."""
    return {f: c for e in ENGINES.values() for f, c in e.features.items()}

