"""What the NCCL checks of the ``deepep-v2`` family read: which NCCL DeepEP 2.x will use, and which
one the process maps first (the checks are in checks_deepep_v2; see its docstring for the upstream code).

Emulates, without starting Python: deep_ep/utils/find_pkgs.py find_nccl_root() (EP_NCCL_ROOT_DIR,
then the EP_NCCL_ROOT_DIR deep_ep/envs.py bakes, then NCCL_DIR, then the nvidia-nccl wheel — a
``nvidia_nccl*.dist-info`` beside ``nvidia/nccl``), and what maps a libnccl before ``deep_ep._C``
does: LD_PRELOAD, then pip PyTorch's preloader (torch/__init__.py _preload_cuda_deps: the first
sys.path entry holding ``nvidia/nccl/lib/libnccl.so.*[0-9]`` or ``nvidia/cu1X/lib/…``).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Optional

from deepep_env.doctor.checks_nvshmem import same_file
from deepep_env.doctor.context import DoctorContext
from deepep_env.doctor.model import Evidence
from deepep_env.doctor.pythonpath import python_search_path
from deepep_env.base.versions import version_cmp, version_lt

NCCL_FLOOR = "2.30.4"        # DeepEP README "Requirements" at dd758ca
EXACT_BELOW = "2.31"         # csrc/kernels/backend/nccl.cu:100-105
TORCH_NCCL_DIRS = ("nvidia/nccl/lib", "nvidia/cu12/lib", "nvidia/cu13/lib", "nccl/lib")
_LIB = re.compile(r"/libnccl\.so\.[0-9.]*[0-9]$")


def nccl_root(ctx: DoctorContext, pkg_dir: str) -> tuple[Optional[str], Evidence]:
    if ctx.env.get("EP_NCCL_ROOT_DIR"):
        return ctx.env.get("EP_NCCL_ROOT_DIR"), ctx.env.evidence("EP_NCCL_ROOT_DIR")
    m = re.search(r"persistent_envs\['EP_NCCL_ROOT_DIR'\] = '([^']*)'", ctx.paths.read_text(f"{pkg_dir}/envs.py") or "")
    if m:
        return m.group(1), Evidence(value=f"EP_NCCL_ROOT_DIR={m.group(1)} (baked by setup.py)", file=f"{pkg_dir}/envs.py")
    if ctx.env.get("NCCL_DIR"):
        return ctx.env.get("NCCL_DIR"), ctx.env.evidence("NCCL_DIR")
    for e in python_search_path(ctx):
        if ctx.paths.glob(f"{e.dir}/nvidia_nccl*.dist-info") and ctx.paths.glob(f"{e.dir}/nvidia/nccl/lib/libnccl.so*"):
            return f"{e.dir}/nvidia/nccl", Evidence(value=f"the nvidia-nccl wheel ({e.why})", file=f"{e.dir}/nvidia/nccl")
    return None, Evidence(value="no EP_NCCL_ROOT_DIR, NCCL_DIR, deep_ep/envs.py entry or nvidia-nccl wheel",
                          file="deep_ep/utils/find_pkgs.py")


def nccl_version(ctx: DoctorContext, root: str, lib: Optional[str]) -> Optional[str]:
    m = re.search(r"#define\s+NCCL_VERSION_CODE\s+(\d+)", ctx.paths.read_text(f"{root}/include/nccl.h") or "")
    if m:
        code = int(m.group(1))
        return f"{code // 10000}.{(code % 10000) // 100}.{code % 100}"
    name = ctx.paths.readlink_name(lib) if lib else None
    m = re.match(r"^libnccl\.so\.(\d+\.\d+\.\d+)", name or "")
    return m.group(1) if m else None


def mapped_first(ctx: DoctorContext) -> list[tuple[str, Evidence]]:
    """Every libnccl mapped before deep_ep._C asks for one: LD_PRELOAD's, then pip torch's preload."""
    out: list[tuple[str, Evidence]] = []
    for entry in ctx.env.split("LD_PRELOAD", ": \t"):
        if os.path.basename(entry).startswith("libnccl") and ctx.paths.exists(entry):
            out.append((ctx.paths.absolute(entry), ctx.env.evidence("LD_PRELOAD")))
    entries = python_search_path(ctx)
    if not any(ctx.paths.is_file(f"{e.dir}/torch/__init__.py") for e in entries):
        return out
    for e in entries:
        for rel in TORCH_NCCL_DIRS:
            hits = [h for h in ctx.paths.glob(f"{e.dir.rstrip('/')}/{rel}/libnccl.so.*") if _LIB.search(h)]
            if hits:
                out.append((hits[0], Evidence(value=f"dlopened by `import torch` (_preload_cuda_deps: first on sys.path, {e.why})",
                                              file=hits[0])))
                return out
    return out


@dataclass(frozen=True)
class NcclInstall:
    """The NCCL DeepEP 2.x will use (deep_ep/utils/find_pkgs.py find_nccl_root) and what it holds."""

    root: Optional[str]
    why: Evidence  # where the root comes from
    libs: list[str]  # sorted <root>/lib/libnccl.so*
    device_header: bool  # <root>/include/nccl_device.h (the JIT compiles against it)
    version: Optional[str]  # read when the install is complete

    @property
    def complete(self) -> bool:
        return bool(self.libs) and self.device_header

    @property
    def linked(self) -> str:
        return self.libs[0]  # what check_nccl_so() compares against: sorted(glob(<root>/lib/libnccl.so*))[0]

    def too_old(self) -> bool:
        return self.version is not None and bool(self.version) and version_lt(self.version, NCCL_FLOOR)

    def differs_from_build(self, built: str) -> bool:
        """Below 2.31 the NCCL DeepEP compiled against must be the one loaded (nccl.cu)."""
        have = self.version
        return have is not None and bool(have and built) and version_lt(have, EXACT_BELOW) and version_cmp(have, ".".join(built.split(".")[:3])) != 0


def nccl_install(ctx: DoctorContext, pkg_dir: str) -> NcclInstall:
    """The NCCL the DeepEP 2.x package at ``pkg_dir`` will use, once per context."""
    return ctx.cached("deepep-v2.nccl", lambda: _nccl_install(ctx, pkg_dir))


def _nccl_install(ctx: DoctorContext, pkg_dir: str) -> NcclInstall:
    root, why = nccl_root(ctx, pkg_dir)
    libs = sorted(ctx.paths.glob(f"{root}/lib/libnccl.so*")) if root else []
    device_header = bool(libs) and ctx.paths.is_file(f"{root}/include/nccl_device.h")
    version = nccl_version(ctx, root, libs[0]) if root and device_header else None
    return NcclInstall(root, why, libs, device_header, version)


def distinct_mapped_first(ctx: DoctorContext) -> tuple[list[str], list[tuple[str, Evidence]]]:
    """Every libnccl mapped before deep_ep._C (see :func:`mapped_first`), and those that are different files."""
    first = mapped_first(ctx)
    distinct: list[tuple[str, Evidence]] = []
    for path, ev in first:
        if not any(same_file(ctx, path, p) for p, _ in distinct):
            distinct.append((path, ev))
    return [p for p, _ in first], distinct
