"""Resolved spec → the build graph: which packages deepep-env builds, from which recipe, with which
inputs, and each one's build id (docs/build-id.md). Pure: reads recipe files, builds nothing.

The builder (:mod:`deepep_env.builder`) executes a :class:`BuildPlan`; ``spec show`` and ``plan`` print it.
Every field of :class:`BuildNode` is either identity (enters the pre-image) or metadata (``meta``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from deepep_env.errors import UserError
from deepep_env.hashing import build_id, build_id_preimage, recipe_sha256, short_id
from deepep_env.project import Project
from deepep_env.spec.catalog import SourcePin
from deepep_env.spec.resolved import RPatch, ResolvedSpec


@dataclass(frozen=True)
class BuildNode:
    package: str                      # == recipe folder name under recipes/
    recipe_dir: Path                  # metadata (its *content* is identity)
    version: str                      # conda version of the outputs
    variant: dict[str, Any]           # identity: values the recipe reads
    sources: dict[str, SourcePin]     # identity by tree_sha256 only
    patches: tuple[RPatch, ...]       # identity by sha256 only, in order
    externals: dict[str, Any]         # identity: host-provided components and their versions
    deps: tuple[str, ...]             # packages of this graph it builds against
    recipe_hash: str = ""
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


def _externals(r: ResolvedSpec, names: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    ident: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    if "cuda" in names and r.cuda.provider == "host":
        ident["cuda"] = {"provider": "host", "version": r.cuda.version}
        meta["cuda_prefix"] = r.cuda.prefix or "/usr/local/cuda"
        # Images that pair CUDA with a specific host compiler say so in CUDAHOSTCXX (the GPU machine
        # here: /opt/gcc/bin/g++); rattler-build's strict env isolation would otherwise drop it.
        meta["cuda_host_cxx"] = os.environ.get("CUDAHOSTCXX", "")
    if "python" in names and r.python.provider == "host":
        ident["python"] = {"provider": "host", "version": r.python.version}
        meta["python_executable"] = r.python.executable or f"python{r.python.version}"
    if "pytorch" in names and r.pytorch.provider in ("host", "pip"):
        ident["pytorch"] = {"provider": r.pytorch.provider, "version": r.pytorch.version, "cuda": r.pytorch.cuda}
    if "rdma_core" in names:
        # rdma-core headers and libmlx5 link stub: a host prerequisite (DOCA-OFED/rdma-core), located by
        # DEEPEP_ENV_RDMA_CORE where it is not under /usr (the GPU machine gets Debian's, extracted).
        meta["rdma_core_prefix"] = os.environ.get("DEEPEP_ENV_RDMA_CORE", "/usr")
    return ident, meta


def finish_node(node: BuildNode, dep_ids: dict[str, Optional[str]]) -> BuildNode:
    unpinned = [f"source {n}" for n, pin in node.sources.items() if not pin.pinned]
    unpinned += [f"patch {p.name}" for p in node.patches if not p.pin.sha256]
    unpinned += [f"dependency {d}" for d in node.deps if dep_ids.get(d) is None]
    rhash = recipe_sha256(node.recipe_dir)
    if unpinned:
        return BuildNode(**{**node.__dict__, "recipe_hash": rhash, "unpinned": tuple(unpinned)})
    pre = build_id_preimage(
        package=node.package,
        recipe=rhash,
        sources={n: pin.tree_sha256 for n, pin in node.sources.items()},
        patches=[p.pin.sha256 for p in node.patches],
        variant=node.variant,
        dependencies={d: dep_ids[d] for d in node.deps},
        externals=node.externals,
    )
    return BuildNode(**{**node.__dict__, "recipe_hash": rhash, "preimage": pre, "id": build_id(pre)})


def plan(r: ResolvedSpec, project: Project) -> BuildPlan:
    nodes: list[BuildNode] = []

    def recipe(name: str) -> Path:
        d = project.recipes / name
        if not (d / "recipe.yaml").is_file():
            raise UserError("missing recipe", file=d / "recipe.yaml", accepted=f"a rattler-build v1 recipe for {name}")
        return d

    if r.gdrcopy is not None and r.nvshmem.gdrcopy:
        ext, meta = _externals(r, ("cuda",))
        nodes.append(BuildNode(
            package="gdrcopy", recipe_dir=recipe("gdrcopy"), version=r.gdrcopy.version,
            variant={"version": r.gdrcopy.version, "cuda_version": r.cuda.version},
            sources={"gdrcopy": r.gdrcopy.source}, patches=(), externals=ext, deps=(), meta=meta,
        ))
    if r.nvshmem.provider == "source":
        assert r.nvshmem.source is not None
        ext, meta = _externals(r, ("cuda", "rdma_core"))
        meta["gdrcopy_prefix"] = ""  # our gdrcopy package lands in the host prefix ($PREFIX) when enabled
        nodes.append(BuildNode(
            package="nvshmem", recipe_dir=recipe("nvshmem"), version=r.nvshmem.version,
            variant={
                "version": r.nvshmem.version,
                "cuda_version": r.cuda.version,
                "cuda_architectures": r.cuda.sm_list,
                "ibgda": r.nvshmem.ibgda,
                "gdrcopy": r.nvshmem.gdrcopy,
            },
            sources={"nvshmem": r.nvshmem.source}, patches=tuple(r.nvshmem.patches), externals=ext,
            deps=("gdrcopy",) if r.nvshmem.gdrcopy and r.gdrcopy is not None else (), meta=meta,
        ))
    ext, meta = _externals(r, ("cuda", "python", "pytorch", "rdma_core"))
    nodes.append(BuildNode(
        package="deep-ep", recipe_dir=recipe("deep-ep"), version=r.deepep.version,
        variant={
            "version": r.deepep.version,
            "revision": r.deepep.revision,
            "torch_cuda_arch_list": r.deepep.torch_cuda_arch_list,
            "aggressive_ptx": r.deepep.aggressive_ptx,
            "require": sorted(r.deepep.require),
            "python_version": r.python.version,
            "pytorch_version": r.pytorch.version,
            "pytorch_cuda": r.pytorch.cuda,
            "cuda_version": r.cuda.version,
            "nvshmem_provider": r.nvshmem.provider,
            "nvshmem_version": r.nvshmem.version,
        },
        sources={"deep-ep": r.deepep.source}, patches=tuple(r.deepep.patches), externals=ext,
        deps=("nvshmem",) if r.nvshmem.provider == "source" else (), meta=meta,
    ))
    done: list[BuildNode] = []
    ids: dict[str, Optional[str]] = {}
    for n in nodes:  # already in dependency order
        fin = finish_node(n, ids)
        ids[n.package] = fin.id
        done.append(fin)
    return BuildPlan(env=r.name, nodes=tuple(done))
