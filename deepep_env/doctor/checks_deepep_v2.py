"""Family ``deepep-v2``: what DeepEP 2.x (EPv2) reads at run time, checked before it runs.

Only when the ``deep_ep`` Python imports is DeepEP 2.x (``deep_ep/buffers/elastic.py``). Each check
mirrors the upstream code that would fail (deepseek-ai/DeepEP at dd758ca):

- JIT toolchain: ``deep_ep/__init__.py`` find_cuda_home() ($CUDA_HOME, $CUDA_PATH, ``which nvcc``,
  /usr/local/cuda); ``csrc/jit/compiler.hpp`` runs ``<cuda_home>/bin/nvcc`` (or $EP_JIT_NVCC_COMPILER)
  and asserts it is >= 12.3; ``csrc/jit/kernel_runtime.hpp`` runs ``<cuda_home>/bin/cuobjdump``.
- JIT cache: ``compiler.hpp`` writes ``$EP_JIT_CACHE_DIR``, default ``$HOME/.deep_ep`` (``.deep_ep``
  in the working directory when HOME is unset). It must be writable and outside the env.
- NCCL: ``deep_ep/utils/find_pkgs.py`` find_nccl_root() ($EP_NCCL_ROOT_DIR, $NCCL_DIR, then the
  nvidia-nccl wheel; deep_ep/envs.py bakes EP_NCCL_ROOT_DIR at build), ``deep_ep/__init__.py``
  check_nccl_so() (one libnccl mapped, byte-identical to ``<root>/lib/libnccl.so*``), the JIT's
  ``-I <root>/include``, and ``csrc/kernels/backend/nccl.cu`` (compile-time == run-time version
  below 2.31). pip PyTorch maps the first ``<sys.path>/nvidia/nccl/lib/libnccl.so.*`` it finds
  (torch/__init__.py _preload_cuda_deps) unless LD_PRELOAD already mapped one.
- Knobs: ``EP_SUPPRESS_NCCL_CHECK`` (skips check_nccl_so), ``EP_DISABLE_GIN`` / ``NCCL_GIN_ENABLE=0``
  (``nccl.cu``: ElasticBuffer on more than one rank needs NCCL Gin unless EP_DISABLE_GIN; NCCL's
  ``src/gin/gin_host.cc``: "GIN is disabled").
"""
from __future__ import annotations

import json
import os
import re
from typing import Optional

from deepep_env.doctor.checks_deepep import is_v2, locate_deep_ep, read_build_record
from deepep_env.doctor.checks_nccl_v2 import check_nccl_for_v2
from deepep_env.doctor.context import DoctorContext
from deepep_env.doctor.model import Evidence
from deepep_env.doctor.check import Emitter, check
from deepep_env.versions import version_lt

IDS = (
    "deepep-v2.jit-nvcc-missing",
    "deepep-v2.jit-cuobjdump-missing",
    "deepep-v2.jit-nvcc-too-old",
    "deepep-v2.jit-cache-unwritable",
    "deepep-v2.jit-cache-in-prefix",
    "deepep-v2.jit-cache-relative",
    "deepep-v2.nccl-root-missing",
    "deepep-v2.nccl-too-old",
    "deepep-v2.nccl-build-mismatch",
    "deepep-v2.nccl-duplicate",
    "deepep-v2.nccl-check-suppressed",
    "deepep-v2.gin-disabled",
    "deepep-v2.gin-off-internode",
)
NVCC_FLOOR = "12.3"          # csrc/jit/compiler.hpp get_nvcc_version()


def cuda_home(ctx: DoctorContext) -> tuple[Optional[str], Evidence]:
    """Where DeepEP 2.x's JIT takes nvcc and cuobjdump from (deep_ep/__init__.py find_cuda_home)."""
    for name in ("CUDA_HOME", "CUDA_PATH"):
        if ctx.env.get(name):
            return ctx.env.get(name), ctx.env.evidence(name)
    for d in ctx.env.split("PATH"):
        if ctx.paths.is_file(f"{d.rstrip('/')}/nvcc"):
            home = os.path.dirname(os.path.normpath(ctx.paths.absolute(d)))
            return home, Evidence(value=f"`which nvcc` -> {d}/nvcc", var="PATH", source=ctx.env.origin("PATH"))
    if ctx.paths.is_dir("/usr/local/cuda"):
        return "/usr/local/cuda", Evidence(value="the default /usr/local/cuda", file="/usr/local/cuda")
    return None, ctx.env.evidence("CUDA_HOME")


def toolkit_version(ctx: DoctorContext, home: str) -> Optional[str]:
    """The toolkit's version: version.json's cuda_nvcc/cuda entry, else CUDA_VERSION in cuda.h."""
    text = ctx.paths.read_text(f"{home}/version.json", 1 << 16)
    try:
        data = json.loads(text) if text else {}
        for key in ("cuda_nvcc", "cuda"):
            v = (data.get(key) or {}).get("version") if isinstance(data, dict) else None
            if isinstance(v, str) and re.match(r"^\d+\.\d+", v):
                return ".".join(v.split(".")[:2])
    except ValueError:
        pass
    for h in (f"{home}/include/cuda.h", f"{home}/targets/x86_64-linux/include/cuda.h"):
        m = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", ctx.paths.read_text(h, 1 << 20) or "")
        if m:
            n = int(m.group(1))
            return f"{n // 1000}.{(n % 1000) // 10}"
    return None


def _jit_toolchain(ctx: DoctorContext, emit: Emitter) -> None:
    home, why = cuda_home(ctx)
    nvcc = ctx.env.get("EP_JIT_NVCC_COMPILER") or (f"{home}/bin/nvcc" if home else None)
    tools = (("nvcc", nvcc, "deepep-v2.jit-nvcc-missing"),
             ("cuobjdump", f"{home}/bin/cuobjdump" if home else None, "deepep-v2.jit-cuobjdump-missing"))
    for tool, path, fid in tools:
        state = ctx.paths.missing(path) if path else True
        if state is None:
            ctx.notes.append(f"{tool} at {path}: not verifiable under --root; not checked")
        elif state:
            emit(fid, "error",
                 f"DeepEP 2.x compiles its kernels when they are first used and needs {tool} at "
                 f"{path or '<CUDA_HOME>/bin/' + tool}: the first dispatch fails (csrc/jit/compiler.hpp)",
                 [why, Evidence(value="absent", file=path or "CUDA_HOME")],
                 f"install the CUDA toolkit's {tool} (conda: cuda-nvcc, cuda-cuobjdump) and point CUDA_HOME at it")
    ver = toolkit_version(ctx, home) if home else None
    if ver and version_lt(ver, NVCC_FLOOR):
        emit("deepep-v2.jit-nvcc-too-old", "error",
             f"the JIT's toolkit at {home} is CUDA {ver}; DeepEP 2.x asserts nvcc >= {NVCC_FLOOR} (csrc/jit/compiler.hpp)",
             [why, Evidence(value=ver, file=f"{home}/version.json")], "point CUDA_HOME at a CUDA >= 12.3 toolkit")
    elif home and not ctx.paths.missing(f"{home}/bin/nvcc"):
        ctx.confirmed.append(f"deepep-v2.jit: nvcc and cuobjdump in {home} (CUDA {ver or 'version not read'})")


def jit_cache_dir(ctx: DoctorContext) -> tuple[Optional[str], Evidence]:
    if ctx.env.get("EP_JIT_CACHE_DIR"):
        return ctx.env.get("EP_JIT_CACHE_DIR"), ctx.env.evidence("EP_JIT_CACHE_DIR")
    home = ctx.env.get("HOME")
    return (os.path.join(home, ".deep_ep") if home else ".deep_ep"), ctx.env.evidence("HOME")


def _writable(ctx: DoctorContext, path: str) -> tuple[Optional[bool], str]:
    """Whether ``path`` is a writable folder or can be created (its nearest existing ancestor is one),
    as the checked host sees it; None when that cannot be told from here."""
    p = os.path.normpath(path)
    while p != "/" and not ctx.paths.exists(p):
        p = os.path.dirname(p)
    local = ctx.paths.open_local(p)
    if local is None:
        return None, p
    return ctx.paths.is_dir(p) and os.access(local, os.W_OK | os.X_OK), p


def _jit_cache(ctx: DoctorContext, emit: Emitter) -> None:
    path, why = jit_cache_dir(ctx)
    if not os.path.isabs(path):
        emit("deepep-v2.jit-cache-relative", "warning",
             f"DeepEP 2.x's JIT cache is the relative path {path!r}: kernels are compiled again in every working "
             "directory, and written into it (csrc/jit/compiler.hpp: $EP_JIT_CACHE_DIR, else $HOME/.deep_ep)",
             [why, ctx.env.evidence("EP_JIT_CACHE_DIR")], "set HOME, or EP_JIT_CACHE_DIR to an absolute folder")
        return
    if ctx.prefix and (os.path.realpath(path) + "/").startswith(os.path.realpath(ctx.prefix) + "/"):
        emit("deepep-v2.jit-cache-in-prefix", "error",
             f"DeepEP 2.x's JIT cache {path} is inside the env {ctx.prefix}: the env's files must stay what the lock "
             "installed (install verifies and replaces them)",
             [why], "set EP_JIT_CACHE_DIR outside the env (deepep-env's overlay uses ~/.cache/deepep-env/jit/…)")
        return
    ok, existing = _writable(ctx, path) if ctx.paths.covered(path) else (None, path)
    if ok is None:
        ctx.notes.append(f"JIT cache {path}: not verifiable under --root; not checked")
    elif not ok:
        emit("deepep-v2.jit-cache-unwritable", "error",
             f"DeepEP 2.x's JIT cache {path} cannot be written ({existing} is not a writable folder): the first "
             "kernel compile fails", [why, Evidence(value="not writable", file=existing)],
             "set EP_JIT_CACHE_DIR to a writable folder")
    else:
        ctx.confirmed.append(f"deepep-v2.jit-cache: {path} is writable ({why.var}, outside the env)")


@check("deepep-v2", *IDS)
def check_deepep_v2(ctx: DoctorContext, emit: Emitter) -> None:
    """DeepEP 2.x's run-time needs: JIT toolchain and cache, one NCCL (the one it linked), Gin knobs (DeepEP dd758ca)."""
    if ctx.prefix and ctx.meta is None:
        return
    found = locate_deep_ep(ctx)
    if found is None or found.kind != "package" or not is_v2(ctx, found.dir):
        return
    record, _ = read_build_record(ctx, found.dir)
    _jit_toolchain(ctx, emit)
    _jit_cache(ctx, emit)
    check_nccl_for_v2(ctx, emit, found.dir, record or {})
    _knobs(ctx, emit)


def _knobs(ctx: DoctorContext, emit: Emitter) -> None:
    # deep_ep/__init__.py: int(os.environ.get('EP_SUPPRESS_NCCL_CHECK', 0)) — any non-zero integer.
    if re.match(r"^\s*[+-]?0*[1-9][0-9]*\s*$", ctx.env.get("EP_SUPPRESS_NCCL_CHECK") or ""):
        emit("deepep-v2.nccl-check-suppressed", "warning",
             "EP_SUPPRESS_NCCL_CHECK turns off DeepEP's own check that one NCCL, the one it linked, is loaded "
             "(deep_ep/__init__.py check_nccl_so): a mismatch then corrupts or hangs instead of failing at import",
             [ctx.env.evidence("EP_SUPPRESS_NCCL_CHECK")], "unset EP_SUPPRESS_NCCL_CHECK and fix what it hid")
    gin_off = (ctx.env.get("EP_DISABLE_GIN") or "0").strip().lower() not in ("", "0", "false", "no", "off")
    if (ctx.env.get("NCCL_GIN_ENABLE") or "").strip() == "0" and not gin_off:
        emit("deepep-v2.gin-disabled", "error",
             "NCCL_GIN_ENABLE=0: NCCL refuses Gin (src/gin/gin_host.cc 'GIN is disabled') and DeepEP 2.x's "
             "ElasticBuffer on more than one rank needs it unless EP_DISABLE_GIN=1 (csrc/kernels/backend/nccl.cu)",
             [ctx.env.evidence("NCCL_GIN_ENABLE"), ctx.env.evidence("EP_DISABLE_GIN")],
             "unset NCCL_GIN_ENABLE (or set EP_DISABLE_GIN=1 for NVLink-only runs)")
    if gin_off and ctx.rdma_relevant():
        emit("deepep-v2.gin-off-internode", "warning",
             "EP_DISABLE_GIN is set on a host with RDMA NICs: ElasticBuffer creates no Gin contexts, so its "
             "internode (RDMA) kernels cannot run (csrc/kernels/backend/nccl.cu)",
             [ctx.env.evidence("EP_DISABLE_GIN")], "unset EP_DISABLE_GIN for multi-node runs")
