"""Resolved spec → the build graph: which packages deepep-env builds, from which recipe, with which
inputs, and each one's build id (docs/build-id.md). Pure: reads recipe files, builds nothing.

The spec decides *which* nodes there are (NVSHMEM from source or not, GDRCopy, NCCL, DeepEP V1 or
V2) and their inputs; the edges between them and the build order are the recipes'
(:mod:`deepep_env.builder.recipegraph`: what each recipe requires of the others' outputs), never written
here.

The builder (:mod:`deepep_env.builder`) executes a :class:`BuildPlan`; ``spec show`` and ``plan`` print it.
Every field of :class:`BuildNode` is either identity (enters the pre-image) or metadata (``meta``).
"""
from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from deepep_env.base.errors import UserError
from deepep_env.base.hashing import build_id, build_id_preimage, recipe_sha256, short_id
from deepep_env.formats.build_inputs import HostInputs, host_inputs_from_record, resolutions_from_record
from deepep_env.formats.lock_platforms import platform_for
from deepep_env.base.project import Project
from deepep_env.base.readfile import present
from deepep_env.sources import hostprint
from deepep_env.builder import buildroot, tools
from deepep_env.builder.recipegraph import Edges, build_order, check_recipe_links, read_recipe, recipe_edges
from deepep_env.envspec.catalog import SourcePin
from deepep_env.envspec.resolved import RPatch, ResolvedSpec
from deepep_env.envspec.wheels import require_wheel
from deepep_env.envspec.wheel_pins import wheel_sources
from deepep_env.builder.toolpkg import TOOL, VERSION, tool_source


@dataclass(frozen=True)
class BuildNode:
    package: str                      # == recipe folder name under recipes/
    recipe_dir: Path                  # metadata (its *content* is identity)
    version: str                      # conda version of the outputs
    variant: dict[str, Any]           # identity: values the recipe reads
    sources: dict[str, SourcePin]     # identity by tree_sha256 only
    patches: tuple[RPatch, ...]       # identity by sha256 only, in order
    externals: dict[str, Any]         # identity: host-provided components and their versions
    deps: tuple[str, ...]             # packages of this graph it builds against (its recipe's build edges)
    # Packages of this graph its run requirements name by version range only (never by build): in
    # the build channel for its recipe test, but not inputs of its bytes, so not of its id.
    run_deps: tuple[str, ...] = ()
    # identity: the virtual packages the build is solved and rendered with (name → version, or the
    # microarchitecture for __archspec), never the build machine's (build_virtual_packages).
    virtual_packages: dict[str, str] = field(default_factory=dict)
    recipe_hash: str = ""
    # identity: what the build/host environments resolved to outside the graph (builder/resolution.py)
    resolved: dict[str, Any] = field(default_factory=dict)
    preimage: Optional[dict[str, Any]] = None
    id: Optional[str] = None          # None while a source or patch is not pinned by content
    unpinned: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)  # paths of externals etc.; never identity

    @property
    def build_string(self) -> str:
        """Carries the id into the package's file name, so a lock shows which id it installs."""
        return f"h{short_id(self.id, 10)}_0" if self.id else "unpinned"


@dataclass(frozen=True)
class BuildPlan:
    env: str
    nodes: tuple[BuildNode, ...]      # dependency order

    def node(self, package: str) -> BuildNode:
        for n in self.nodes:
            if n.package == package:
                return n
        raise KeyError(package)

    def roots(self) -> tuple[BuildNode, ...]:
        """The nodes no other node builds against, and those marked ``in_env`` (a package of the env no run
        requirement names: a wheel PyTorch): what an environment asks for by name (the others come in as
        their dependencies, or not at all: a wheel CUDA's toolkit)."""
        depended = {d for n in self.nodes for d in n.deps}
        return tuple(n for n in self.nodes if n.package not in depended or n.meta.get("in_env"))


def _externals(r: ResolvedSpec, names: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Identity and metadata of the components a node builds against that it does not build.

    Host-provided (a Spack external): the provider and version enter the id, the path is metadata.
    Conda-provided: the exact request the recipe makes (``conda_requests``) and the channels it is
    solved from enter the id (docs/build-id.md §3)."""
    ident: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    requests = conda_requests(r)
    channels = [c for c in r.channels if c != "local"]
    for comp in ("cuda", "python", "pytorch"):
        if comp in names and comp in requests:
            ident[comp] = {"provider": "conda", "requests": requests[comp], "channels": channels}
    if "cuda" in names and r.cuda.provider == "host":
        ident["cuda"] = {"provider": "host", "version": r.cuda.version}
        meta["cuda_prefix"] = r.cuda.prefix or "/usr/local/cuda"
        # Images that pair CUDA with a specific host compiler say so in CUDAHOSTCXX (the GPU machine
        # here: /opt/gcc/bin/g++); rattler-build's strict env isolation would otherwise drop it.
        meta["cuda_host_cxx"] = os.environ.get("CUDAHOSTCXX", "")
    if "cuda" in names and r.cuda.provider == "wheel":
        # the toolkit is the graph's cuda node (a dependency: its id enters this one's); what the build
        # still reads from the machine (the host compiler, torch's CUDA library headers) is fingerprinted
        ident["cuda"] = {"provider": "wheel", "version": r.cuda.version}
        meta["cuda_from"] = "wheel"
        meta["cuda_host_cxx"] = os.environ.get("CUDAHOSTCXX", "")
    if "python" in names and r.python.provider == "host":
        ident["python"] = {"provider": "host", "version": r.python.version}
        meta["python_executable"] = r.python.executable or f"python{r.python.version}"
    if "pytorch" in names and r.pytorch.provider in ("host", "pip"):
        ident["pytorch"] = {"provider": r.pytorch.provider, "version": r.pytorch.version, "cuda": r.pytorch.cuda}
    if "pytorch" in names and r.pytorch.provider == "wheel":
        # the graph's pytorch node (deepep-pytorch, a dependency: its id enters this one's), put first on the
        # host interpreter's path for the build (builder/python_home.py); nothing of it is read from the machine
        ident["pytorch"] = {"provider": "wheel", "version": r.pytorch.version, "cuda": r.pytorch.cuda}
        meta["torch_from"] = "wheel"
    # DeepEP V2 builds against NCCL (and may build against pip's NVSHMEM) without us building them.
    for comp in ("nccl", "nvshmem"):
        c = getattr(r, comp)
        if comp in names and c.provider in ("host", "pip"):
            ident[comp] = {"provider": c.provider, "version": c.version}
        elif comp in names and c.provider == "conda":
            ident[comp] = {"provider": "conda", "version": c.version, "channels": channels}
    if "rdma_core" in names and r.cuda.provider in ("host", "wheel"):
        # rdma-core headers and libmlx5 link stub: a host prerequisite (DOCA-OFED/rdma-core), located by
        # DEEPEP_ENV_RDMA_CORE where it is not under /usr (the GPU machine gets Debian's, extracted).
        # With conda CUDA the recipes take conda-forge's rdma-core into the host env instead.
        meta["rdma_core_prefix"] = os.environ.get("DEEPEP_ENV_RDMA_CORE", "/usr")
        ident["rdma_core"] = {"provider": "host"}
    return ident, meta




def live_host(env: str, package: str, component: str, meta: Mapping[str, Any]) -> dict[str, str]:
    """This machine's facts: what a build here reads (``build``, ``lock``, an install's rebuild)."""
    return hostprint.fingerprint(component, meta)


# External providers a build reads from this machine: fingerprinted (a wheel CUDA: the host compiler
# and torch's CUDA library headers; the toolkit itself is a graph node)
HOST_READ = ("host", "pip", "wheel")


def _fingerprinted(node: BuildNode, env: str, host: HostInputs) -> BuildNode:
    """Each host external of ``node`` with its fingerprint: another host, another id (docs/build-id.md §2)."""
    ext = {c: ({**i, "fingerprint": host(env, node.package, c, node.meta)} if i.get("provider") in HOST_READ else i)
           for c, i in node.externals.items()}
    return dataclasses.replace(node, externals=ext)


# conda-forge's compiler variant keys (rattler-build's compiler()/stdlib() read them). Values of the
# versions come from the spec's [toolchain] table; the names are conda-forge's.
COMPILER_NAMES = {"c_compiler": "gcc", "cxx_compiler": "gxx", "cuda_compiler": "cuda-nvcc", "c_stdlib": "sysroot"}


def conda_requests(r: ResolvedSpec) -> dict[str, list[str]]:
    """What the recipes ask conda for, per conda-provided component (host requirements; the build
    requirements are the compilers). The same strings are rendered into the recipes."""
    out: dict[str, list[str]] = {}
    if r.cuda.provider == "conda":
        # (the compilers enter through the variant: c_compiler_version, cuda_compiler_version, …)
        out["cuda"] = [f"cuda-version {r.cuda.version}.*", "cuda-cudart-dev", "rdma-core"]
    if r.python.provider == "conda":
        out["python"] = [f"python {r.python.version}.*"]
    if r.pytorch.provider == "conda":
        out["pytorch"] = [f"pytorch =={r.pytorch.version} {r.pytorch.build_glob}"]
    return out


def _conda_variant(r: ResolvedSpec, *, python: bool) -> dict[str, Any]:
    """Variant values only conda-provided builds read (empty for an all-host node)."""
    v: dict[str, Any] = {}
    if r.cuda.provider == "conda":
        v.update(COMPILER_NAMES)
        v.update({"c_compiler_version": r.toolchain.gcc, "cxx_compiler_version": r.toolchain.gcc,
                  "cuda_compiler_version": r.cuda.version, "c_stdlib_version": r.toolchain.sysroot})
    if python and r.pytorch.provider == "conda":
        v["pytorch_build"] = r.pytorch.build_glob
    return v


def finish_node(node: BuildNode, dep_ids: dict[str, Optional[str]]) -> BuildNode:
    # The pinned inputs; the id needs all of them (the rest is listed in ``unpinned``).
    sources = {n: pin.tree_sha256 for n, pin in node.sources.items() if pin.tree_sha256 is not None}
    patches = [p.pin.sha256 for p in node.patches if p.pin.sha256]
    dependencies = {d: i for d in node.deps if (i := dep_ids.get(d)) is not None}
    unpinned = [f"source {n}" for n in node.sources if n not in sources]
    unpinned += [f"patch {p.name}" for p in node.patches if not p.pin.sha256]
    unpinned += [f"dependency {d}" for d in node.deps if d not in dependencies]
    check_recipe_links(node.recipe_dir)
    rhash = recipe_sha256(node.recipe_dir)
    if unpinned:
        return BuildNode(**{**node.__dict__, "recipe_hash": rhash, "unpinned": tuple(unpinned)})
    pre = build_id_preimage(
        package=node.package,
        recipe=rhash,
        sources=sources,
        patches=patches,
        variant=node.variant,
        dependencies=dependencies,
        externals=node.externals,
        virtual_packages=node.virtual_packages,
        resolved=node.resolved,
        build_root=buildroot.moved(),
        build_tools=tools.moved(),
    )
    return BuildNode(**{**node.__dict__, "recipe_hash": rhash, "preimage": pre, "id": build_id(pre)})


def finish_nodes(nodes: Sequence[BuildNode]) -> list[BuildNode]:
    """Ids for ``nodes`` given in build order (each after its dependencies): the Merkle DAG."""
    done: list[BuildNode] = []
    ids: dict[str, Optional[str]] = {}
    for n in nodes:
        fin = finish_node(n, ids)
        ids[n.package] = fin.id
        done.append(fin)
    return done


def build_virtual_packages(subdir: str = "linux-64", cuda: Optional[str] = None) -> dict[str, str]:
    """What a build on ``subdir`` is told the machine has: the lock's platform (the spec's CUDA,
    pixi's glibc/linux/archspec defaults), never the build machine's. rattler-build otherwise
    detects them and writes them into the package's rendered recipe (found on GPU machines: the
    same id built on two kernels gave two packages), and solves build environments against them."""
    out = {}
    for v in platform_for(subdir, cuda).virtual_packages:
        if v.name in ("__linux", "__glibc", "__cuda"):
            out[v.name] = v.version
        elif v.name == "__archspec":
            out[v.name] = v.build
    return out


def tool_node(project: Project) -> Optional[BuildNode]:
    """deepep-env's own package (recipes/deepep-env), when the project has its recipe: the CLI and
    the overlay as conda activation, in every environment (deepep_env/builder/toolpkg.py)."""
    d = project.recipes / TOOL
    if not (d / "recipe.yaml").is_file():
        return None
    src, digest = tool_source()
    return BuildNode(package=TOOL, recipe_dir=d, version=VERSION, variant={"version": VERSION},
                     sources={TOOL: SourcePin(tree_sha256=digest)}, patches=(), externals={}, deps=(),
                     meta={"local_source": str(src), "tool": True}, virtual_packages=build_virtual_packages())


def nccl_conda_version(version: str, pin: Optional[SourcePin]) -> str:
    """conda-forge's name for an NVIDIA NCCL release: tag ``v2.30.7-1`` -> ``2.30.7.1`` (so a package
    built against conda-forge's nccl accepts ours, and the other way round); else the version itself."""
    m = re.match(r"^v([0-9]+(?:\.[0-9]+)*)-([0-9]+)$", (pin.tag if pin else None) or "")
    return f"{m.group(1)}.{m.group(2)}" if m and m.group(1) == version else version


def _recipe(project: Project, name: str) -> Path:
    d = project.recipes / name
    if not present(d / "recipe.yaml"):  # present but not a file: the reader names what it is
        raise UserError("missing recipe", file=d / "recipe.yaml", accepted=f"a rattler-build v1 recipe for {name}")
    return d


def _gdrcopy_node(r: ResolvedSpec, project: Project) -> BuildNode:
    assert r.gdrcopy is not None
    ext, meta = _externals(r, ("cuda",))
    return BuildNode(
        package="gdrcopy", recipe_dir=_recipe(project, "gdrcopy"), version=r.gdrcopy.version,
        variant={"version": r.gdrcopy.version, "cuda_version": r.cuda.version},
        sources={"gdrcopy": r.gdrcopy.source}, patches=(), externals=ext, deps=(), meta=meta,
    )


def _nvshmem_node(r: ResolvedSpec, project: Project) -> BuildNode:
    assert r.nvshmem.source is not None
    ext, meta = _externals(r, ("cuda", "rdma_core"))
    meta["gdrcopy_prefix"] = ""  # our gdrcopy package lands in the host prefix ($PREFIX) when enabled
    return BuildNode(
        package="nvshmem", recipe_dir=_recipe(project, "nvshmem"), version=r.nvshmem.version,
        variant={
            "version": r.nvshmem.version,
            "cuda_version": r.cuda.version,
            "cuda_architectures": r.cuda.sm_list,
            "ibgda": r.nvshmem.ibgda,
            "gdrcopy": r.nvshmem.gdrcopy,
            **_conda_variant(r, python=False),
        },
        sources={"nvshmem": r.nvshmem.source}, patches=tuple(r.nvshmem.patches), externals=ext, deps=(), meta=meta,
    )


def _nvshmem_wheel_node(r: ResolvedSpec, project: Project) -> BuildNode:
    """NVIDIA's NVSHMEM wheel (pinned by sha256, recipes/nvshmem-wheel/sources.toml) repacked into the
    package DeepEP's recipes build against (deepep-nvshmem): a binary repack, so no CUDA or compilers
    enter; the source is a tree holding the one wheel file (spec/wheels.py wheel_source)."""
    assert r.nvshmem.source is not None
    subdir = r.subdirs[0] if r.subdirs else "linux-64"
    pin = require_wheel(project.recipes, r.nvshmem.version, r.cuda.version, subdir)
    return BuildNode(
        package="nvshmem", recipe_dir=_recipe(project, "nvshmem-wheel"), version=r.nvshmem.version,
        variant={"version": r.nvshmem.version, "cuda_major": r.cuda.version.split(".")[0], "wheel": pin.filename},
        sources={"nvshmem": r.nvshmem.source}, patches=(), externals={}, deps=(),
        meta={"file_sources": {"nvshmem": pin.filename}, "file_sizes": {"nvshmem": pin.size},
              "catalog_recipe": "nvshmem-wheel"},
    )


def _cuda_wheel_node(r: ResolvedSpec, project: Project) -> BuildNode:
    """NVIDIA's CUDA toolkit wheels (each pinned by sha256, recipes/cuda-wheel/sources.toml) repacked into
    deepep-cuda-toolkit: a build input of every node that reads CUDA (builder/cuda_home.py unpacks it
    beside their builds), never a package of the env. Its libcuda link stub is compiled here, so the C
    compiler and linker are its host externals."""
    parts = r.cuda.wheels   # read and checked by resolve (envspec/cuda_wheels.py)
    version = parts["nvcc"].version
    return BuildNode(
        package="cuda", recipe_dir=_recipe(project, "cuda-wheel"), version=version,
        variant={"version": version, "cuda_version": r.cuda.version},
        sources=wheel_sources(parts), patches=(), externals={"c_compiler": {"provider": "host"}}, deps=(),
        meta={**_wheel_files(parts), "catalog_recipe": "cuda-wheel"},
    )


def _wheel_files(parts: Mapping[str, Any]) -> dict[str, Any]:
    """A wheel is a single-file source: fetch keeps the download as that file (its name, its size cap)."""
    return {"file_sources": {p: w.filename for p, w in parts.items()}, "file_sizes": {p: w.size for p, w in parts.items()}}


def _pytorch_wheel_node(r: ResolvedSpec, project: Project) -> BuildNode:
    """pip's closure of torch (each wheel pinned by sha256, recipes/pytorch-wheel/sources.toml) laid out as pip
    installs it, in one package, deepep-pytorch: a package of the env (``in_env``: nothing asks for it by a
    run requirement, so the env asks for it by name) and what DeepEP builds against. Nothing is compiled."""
    parts = r.pytorch.wheels
    return BuildNode(
        package="pytorch", recipe_dir=_recipe(project, "pytorch-wheel"), version=r.pytorch.version,
        variant={"version": r.pytorch.version, "python_version": r.python.version, "cuda_version": r.pytorch.cuda},
        sources=wheel_sources(parts), patches=(), externals={}, deps=(),
        meta={**_wheel_files(parts), "catalog_recipe": "pytorch-wheel", "in_env": True},
    )


def _test_wheels_node(r: ResolvedSpec, project: Project) -> BuildNode:
    """What DeepEP's test scripts import (``[tests] wheels``: numpy; each wheel pinned by sha256 for the spec's
    Python, recipes/test-wheels/sources.toml) laid out as pip installs it, in one package, deepep-test-wheels: a
    package of the env (``in_env``) and a dependency of nothing, so no other node's id moves."""
    parts = r.test_wheels
    return BuildNode(
        package="test-wheels", recipe_dir=_recipe(project, "test-wheels"), version=r.python.version,
        variant={"version": r.python.version, "python_version": r.python.version},
        sources=wheel_sources(parts), patches=(), externals={}, deps=(),
        meta={**_wheel_files(parts), "catalog_recipe": "test-wheels", "in_env": True},
    )


def _nccl_node(r: ResolvedSpec, project: Project) -> BuildNode:
    """NCCL from NVIDIA's source for the spec's architectures only, packaged as conda-forge's ``nccl``."""
    assert r.nccl.source is not None
    ext, meta = _externals(r, ("cuda",))
    version = nccl_conda_version(r.nccl.version, r.nccl.source)
    return BuildNode(
        package="nccl", recipe_dir=_recipe(project, "nccl"), version=version,
        variant={
            "version": version,   # the recipe's package version (a variant key wins over the node's)
            "revision": r.nccl.source.rev or "",
            "cuda_version": r.cuda.version,
            "cuda_architectures": r.cuda.sm_list,
            **_conda_variant(r, python=False),
        },
        sources={"nccl": r.nccl.source}, patches=(), externals=ext, deps=(), meta=meta,
    )


def _deepep_node(r: ResolvedSpec, project: Project) -> BuildNode:
    eng = r.deepep.engine_record
    # Each engine has a recipe of its own (base/engines.py): recipes/deep-ep stays byte-identical, so
    # every V1 build id (and the committed locks) stays what it was. Every engine makes the package deep-ep.
    # An engine over NCCL Gin reads NCCL (and, through it, NVSHMEM's host fingerprint) at build time.
    names = ("cuda", "python", "pytorch", "rdma_core") + (("nccl", "nvshmem") if eng.nccl_gin else ())
    ext, meta = _externals(r, names)
    variant: dict[str, Any] = {
        "version": r.deepep.version,
        "revision": r.deepep.revision,
        "torch_cuda_arch_list": r.deepep.torch_cuda_arch_list,
        "aggressive_ptx": r.deepep.aggressive_ptx,
        "require": sorted(r.deepep.require),
        "python_version": r.python.version,
        "pytorch_version": r.pytorch.version,
        "pytorch_cuda": r.pytorch.cuda,
        "cuda_version": r.cuda.version,
        # recipes/deep-ep-v2 knows "source" (our deepep-nvshmem in $PREFIX) and "pip": the repacked
        # wheel is that same package, so V2 is told "source"; V1 takes deepep-nvshmem either way.
        "nvshmem_provider": eng.recipe_providers.get(r.nvshmem.provider, r.nvshmem.provider),
        "nvshmem_version": r.nvshmem.version,
        **_conda_variant(r, python=True),
    }
    if eng.nccl_gin:
        variant.update({"nccl_provider": r.nccl.provider, "nccl_version": r.nccl.version})
    return BuildNode(
        package="deep-ep", recipe_dir=_recipe(project, eng.recipe), version=r.deepep.version,
        variant=variant, sources={"deep-ep": r.deepep.source}, patches=tuple(r.deepep.patches), externals=ext,
        deps=(), meta=meta,
    )


def _spec_nodes(r: ResolvedSpec, project: Project) -> list[BuildNode]:
    """The packages the spec builds, in declaration order (ties of the build order), without edges."""
    nodes: list[BuildNode] = []
    tool = tool_node(project)
    if tool is not None:
        nodes.append(tool)
    if r.cuda.provider == "wheel":
        nodes.append(_cuda_wheel_node(r, project))
    if r.pytorch.provider == "wheel":
        nodes.append(_pytorch_wheel_node(r, project))
    if r.gdrcopy is not None and r.nvshmem.gdrcopy:
        nodes.append(_gdrcopy_node(r, project))
    if r.nvshmem.provider == "source":
        nodes.append(_nvshmem_node(r, project))
    elif r.nvshmem.provider == "wheel":
        nodes.append(_nvshmem_wheel_node(r, project))
    if r.nccl.provider == "source":
        nodes.append(_nccl_node(r, project))
    nodes.append(_deepep_node(r, project))
    if r.test_wheels:
        nodes.append(_test_wheels_node(r, project))
    return nodes


# The edges no recipe names: a node reading a wheel-provided component builds against the graph's node of
# it. Its recipe reads the component in host mode (``cuda_prefix``, ``python_executable``: set by the
# builder to the unpacked package, builder/cuda_home.py and python_home.py), so the requirement is the
# spec's, not the recipe's. (component, the node's package, its recipe)
WHEEL_NODES = (("cuda", "cuda", "cuda-wheel"), ("pytorch", "pytorch", "pytorch-wheel"))


def _with_wheel_edges(edges: dict[str, Edges], nodes: Mapping[str, BuildNode]) -> dict[str, Edges]:
    out = dict(edges)
    for comp, pkg, recipe in WHEEL_NODES:
        if pkg not in nodes or nodes[pkg].recipe_dir.name != recipe:
            continue
        out = {p: (Edges(e.build | {pkg}, e.run - {pkg})
                   if nodes[p].externals.get(comp, {}).get("provider") == "wheel" else e)
               for p, e in out.items()}
    return out


# (env, package) -> the resolution of its build/host environments (builder/resolution.py), or {}
Resolutions = Callable[[str, str], dict[str, Any]]


def plan(r: ResolvedSpec, project: Project, host: Optional[HostInputs] = None,
         resolved: Optional[Resolutions] = None) -> BuildPlan:
    """The build graph of ``r``. ``host`` gives each host external's fingerprint: by default the one
    the committed lock recorded (lockfiles/build-inputs.json), else this machine's; the builder
    passes :func:`live_host` (what it builds with is what this machine has). ``resolved`` gives what
    a node's build environments resolved to (by default the lock's record); the builder resolves
    them itself before it builds."""
    host = host or host_inputs_from_record(project, live_host)
    resolved = resolved or resolutions_from_record(project)
    nodes = {n.package: dataclasses.replace(_fingerprinted(n, r.name, host), resolved=resolved(r.name, n.package))
             for n in _spec_nodes(r, project)}
    # The edges are the recipes' own: a build/host requirement or an exact pin is a dependency (its id
    # enters the pre-image); a run requirement by version range only is a run dependency (DeepEP's
    # `deepep-env >=0.2,<1`: in the channel of its recipe test, not an input of its bytes).
    edges = _with_wheel_edges(recipe_edges({p: read_recipe(n.recipe_dir) for p, n in nodes.items()}), nodes)
    order = build_order(list(nodes), {p: edges[p].build | edges[p].run for p in nodes})
    vps = build_virtual_packages(r.subdirs[0], r.cuda.version)
    ordered = []
    for p in order:
        n = nodes[p]
        ordered.append(dataclasses.replace(
            n, deps=tuple(d for d in order if d in edges[p].build), run_deps=tuple(d for d in order if d in edges[p].run),
            virtual_packages=n.virtual_packages or vps))
    return BuildPlan(env=r.name, nodes=tuple(finish_nodes(ordered)))
