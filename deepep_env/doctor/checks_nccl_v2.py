"""The NCCL checks of the ``deepep-v2`` family: which NCCL DeepEP 2.x will use, and which one the
process maps first (ids declared in checks_deepep_v2.IDS; see its docstring for the upstream code).

Emulates, without starting Python: deep_ep/utils/find_pkgs.py find_nccl_root() (EP_NCCL_ROOT_DIR,
then the EP_NCCL_ROOT_DIR deep_ep/envs.py bakes, then NCCL_DIR, then the nvidia-nccl wheel — a
``nvidia_nccl*.dist-info`` beside ``nvidia/nccl``), and what maps a libnccl before ``deep_ep._C``
does: LD_PRELOAD, then pip PyTorch's preloader (torch/__init__.py _preload_cuda_deps: the first
sys.path entry holding ``nvidia/nccl/lib/libnccl.so.*[0-9]`` or ``nvidia/cu1X/lib/…``).
"""
from __future__ import annotations

import os
import re
from typing import Optional

from deepep_env.doctor.checks_nvshmem import same_file
from deepep_env.doctor.context import DoctorContext
from deepep_env.doctor.model import Evidence
from deepep_env.doctor.pythonpath import python_search_path
from deepep_env.doctor.check import Emitter
from deepep_env.versions import version_cmp, version_lt

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


def check_nccl_for_v2(ctx: DoctorContext, emit: Emitter, pkg_dir: str, record: dict) -> None:
    root, why = nccl_root(ctx, pkg_dir)
    libs = sorted(ctx.paths.glob(f"{root}/lib/libnccl.so*")) if root else []
    if not libs or not ctx.paths.is_file(f"{root}/include/nccl_device.h"):
        what = "no lib/libnccl.so*" if not libs else "no include/nccl_device.h (the JIT compiles against it)"
        emit("deepep-v2.nccl-root-missing", "error",
             f"DeepEP 2.x's NCCL root {root or '(none found)'} has {what}: `import deep_ep` or its first kernel fails",
             [why], "install the env again (its nccl package) or point EP_NCCL_ROOT_DIR at an NCCL >= 2.30.4 install")
        return
    linked = libs[0]   # what check_nccl_so() compares against: sorted(glob(<root>/lib/libnccl.so*))[0]
    have = nccl_version(ctx, root, linked)
    built = str((record.get("nccl") or {}).get("version") or "")
    ver_ev = Evidence(value=f"NCCL {have or 'unknown'}", file=f"{root}/include/nccl.h")
    if have and version_lt(have, NCCL_FLOOR):
        emit("deepep-v2.nccl-too-old", "error", f"DeepEP 2.x needs NCCL >= {NCCL_FLOOR} (Gin device API), {root} has {have}",
             [why, ver_ev], "install an env with NCCL >= 2.30.4 (nccl.provider = 'source' builds one)")
    elif have and built and version_lt(have, EXACT_BELOW) and version_cmp(have, ".".join(built.split(".")[:3])) != 0:
        emit("deepep-v2.nccl-build-mismatch", "error",
             f"DeepEP was built against NCCL {built}, {root} has {have}: below 2.31 they must be the same "
             "(csrc/kernels/backend/nccl.cu asserts it when the first ElasticBuffer is made)",
             [why, ver_ev, Evidence(value=f"nccl {built}", file=f"{pkg_dir}/_deepep_env_build.json")],
             "rebuild DeepEP against this NCCL, or use the NCCL it was built against")
    _one_nccl(ctx, emit, linked, have)


def _one_nccl(ctx: DoctorContext, emit: Emitter, linked: str, have: Optional[str]) -> None:
    first = mapped_first(ctx)
    distinct: list[tuple[str, Evidence]] = []
    for path, ev in first:
        if not any(same_file(ctx, path, p) for p, _ in distinct):
            distinct.append((path, ev))
    ctx.info["nccl_v2"] = {"linked": linked, "mapped_first": [p for p, _ in first]}
    if len(distinct) > 1:
        emit("deepep-v2.nccl-duplicate", "error",
             "two NCCL libraries will be mapped (" + ", ".join(p for p, _ in distinct) + "): `import deep_ep` aborts with "
             "'Duplicate NCCL runtime' (deep_ep/__init__.py check_nccl_so)",
             [ev for _, ev in distinct], "keep one: LD_PRELOAD the env's lib/libnccl.so.2 and put the env's site-packages "
             "first on PYTHONPATH (what `deepep-env run` does)")
    elif distinct and not same_file(ctx, distinct[0][0], linked):
        emit("deepep-v2.nccl-duplicate", "error",
             f"the process maps {distinct[0][0]} before deep_ep._C, not {linked}, the NCCL DeepEP links: `import deep_ep` "
             "aborts ('Duplicate NCCL runtime' or 'Invalid NCCL versions', deep_ep/__init__.py check_nccl_so)",
             [distinct[0][1], Evidence(value="the NCCL DeepEP linked", file=linked)],
             "run through `deepep-env run ENV` (its site-packages first on PYTHONPATH, LD_PRELOAD of the env's NCCL)")
    else:
        ctx.confirmed.append(f"deepep-v2.nccl: one NCCL {have or ''} in the process, {linked}, the one DeepEP linked")
