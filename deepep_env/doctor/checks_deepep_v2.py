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
  ``src/gin/gin_host.cc``: "GIN is disabled"); a host where NCCL can have no Gin at all (the overlay
  rule ``no-gin-transport`` reads it the same way, :func:`deepep_env.overlay.rules_v2.gin_transport`).
"""
from __future__ import annotations

import json
import os
import re
from typing import Optional

from deepep_env.doctor.check import Emitter, check
from deepep_env.doctor.checks_deepep import build_record, engine_of, installed_deep_ep
from deepep_env.doctor.checks_nccl_v2 import NCCL_FLOOR, NcclInstall, distinct_mapped_first, nccl_install
from deepep_env.doctor.checks_nvshmem import same_file
from deepep_env.doctor.context import DoctorContext
from deepep_env.doctor.model import Evidence
from deepep_env.overlay.rules_v2 import GIN_ASSERTION, gin_transport
from deepep_env.base.versions import version_lt

FAMILY = "deepep-v2"
NVCC_FLOOR = "12.3"          # csrc/jit/compiler.hpp get_nvcc_version()


# -- what the checks read -------------------------------------------------------------------------------
def v2_package(ctx: DoctorContext) -> Optional[str]:
    """The deep_ep package Python imports when its engine turns this family on (base/engines.py
    Engine.doctor_families: DeepEP 2.x); else None (the family says nothing)."""
    found = installed_deep_ep(ctx)
    if found is None or found.kind != "package" or FAMILY not in engine_of(ctx, found.dir).doctor_families:
        return None
    return found.dir


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


def jit_cuda_home(ctx: DoctorContext) -> tuple[Optional[str], Evidence]:
    """:func:`cuda_home`, once per context."""
    return ctx.cached("deepep-v2.cuda-home", lambda: cuda_home(ctx))


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


def jit_cache_dir(ctx: DoctorContext) -> tuple[str, Evidence]:
    """csrc/jit/compiler.hpp: $EP_JIT_CACHE_DIR, else $HOME/.deep_ep (``.deep_ep`` without HOME)."""
    if ctx.env.get("EP_JIT_CACHE_DIR"):
        return ctx.env.get("EP_JIT_CACHE_DIR") or "", ctx.env.evidence("EP_JIT_CACHE_DIR")
    home = ctx.env.get("HOME")
    return (os.path.join(home, ".deep_ep") if home else ".deep_ep"), ctx.env.evidence("HOME")


def _in_prefix(ctx: DoctorContext, path: str) -> bool:
    return bool(ctx.prefix) and (os.path.realpath(path) + "/").startswith(os.path.realpath(ctx.prefix or "") + "/")


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


def v2_nccl(ctx: DoctorContext) -> Optional[NcclInstall]:
    """The NCCL the imported DeepEP 2.x will use; None when it is not DeepEP 2.x."""
    pkg_dir = v2_package(ctx)
    return nccl_install(ctx, pkg_dir) if pkg_dir else None


def built_nccl(ctx: DoctorContext) -> str:
    """The NCCL version DeepEP was built against (its build record), or ""."""
    return str(((build_record(ctx)[0] or {}).get("nccl") or {}).get("version") or "")


def downgraded(nccl: NcclInstall, built: str) -> bool:
    """The NCCL root's version is older than the one DeepEP was built against."""
    return bool(nccl.version and built) and version_lt(".".join((nccl.version or "").split(".")[:3]), ".".join(built.split(".")[:3]))


# -- the checks, in the order their findings were first emitted -------------------------------------------
def _jit_tool_present(ctx: DoctorContext, emit: Emitter, tool: str, path: Optional[str], fid: str) -> None:
    state = ctx.paths.missing(path) if path else True
    if state is None:
        ctx.notes.append(f"{tool} at {path}: not verifiable under --root; not checked")
    elif state:
        emit(fid, "error",
             f"DeepEP 2.x compiles its kernels when they are first used and needs {tool} at "
             f"{path or '<CUDA_HOME>/bin/' + tool}: the first dispatch fails (csrc/jit/compiler.hpp)",
             [jit_cuda_home(ctx)[1], Evidence(value="absent", file=path or "CUDA_HOME")],
             f"install the CUDA toolkit's {tool} (conda: cuda-nvcc, cuda-cuobjdump) and point CUDA_HOME at it")


@check("deepep-v2", "deepep-v2.jit-nvcc-missing")
def jit_nvcc_present(ctx: DoctorContext, emit: Emitter) -> None:
    """The JIT's nvcc exists: $EP_JIT_NVCC_COMPILER or <cuda_home>/bin/nvcc (csrc/jit/compiler.hpp)."""
    if v2_package(ctx) is None:
        return
    home = jit_cuda_home(ctx)[0]
    _jit_tool_present(ctx, emit, "nvcc", ctx.env.get("EP_JIT_NVCC_COMPILER") or (f"{home}/bin/nvcc" if home else None),
                      "deepep-v2.jit-nvcc-missing")


@check("deepep-v2", "deepep-v2.jit-cuobjdump-missing")
def jit_cuobjdump_present(ctx: DoctorContext, emit: Emitter) -> None:
    """<cuda_home>/bin/cuobjdump exists (csrc/jit/kernel_runtime.hpp lists each cubin's symbols with it)."""
    if v2_package(ctx) is None:
        return
    home = jit_cuda_home(ctx)[0]
    _jit_tool_present(ctx, emit, "cuobjdump", f"{home}/bin/cuobjdump" if home else None, "deepep-v2.jit-cuobjdump-missing")


@check("deepep-v2", "deepep-v2.jit-nvcc-too-old")
def jit_nvcc_new_enough(ctx: DoctorContext, emit: Emitter) -> None:
    """The JIT's toolkit is CUDA >= 12.3 (csrc/jit/compiler.hpp asserts it)."""
    if v2_package(ctx) is None:
        return
    home, why = jit_cuda_home(ctx)
    ver = toolkit_version(ctx, home) if home else None
    if ver and version_lt(ver, NVCC_FLOOR):
        emit("deepep-v2.jit-nvcc-too-old", "error",
             f"the JIT's toolkit at {home} is CUDA {ver}; DeepEP 2.x asserts nvcc >= {NVCC_FLOOR} (csrc/jit/compiler.hpp)",
             [why, Evidence(value=ver, file=f"{home}/version.json")], "point CUDA_HOME at a CUDA >= 12.3 toolkit")
    elif home and not ctx.paths.missing(f"{home}/bin/nvcc"):
        ctx.confirmed.append(f"deepep-v2.jit: nvcc and cuobjdump in {home} (CUDA {ver or 'version not read'})")


@check("deepep-v2", "deepep-v2.jit-cache-relative")
def jit_cache_absolute(ctx: DoctorContext, emit: Emitter) -> None:
    """The JIT cache is an absolute folder, not ``.deep_ep`` in every working directory (HOME unset)."""
    path, why = jit_cache_dir(ctx)
    if v2_package(ctx) is None or os.path.isabs(path):
        return
    emit("deepep-v2.jit-cache-relative", "warning",
         f"DeepEP 2.x's JIT cache is the relative path {path!r}: kernels are compiled again in every working "
         "directory, and written into it (csrc/jit/compiler.hpp: $EP_JIT_CACHE_DIR, else $HOME/.deep_ep)",
         [why, ctx.env.evidence("EP_JIT_CACHE_DIR")], "set HOME, or EP_JIT_CACHE_DIR to an absolute folder")


@check("deepep-v2", "deepep-v2.jit-cache-in-prefix")
def jit_cache_outside_env(ctx: DoctorContext, emit: Emitter) -> None:
    """The JIT cache is outside the env, whose files install verifies and replaces."""
    path, why = jit_cache_dir(ctx)
    if v2_package(ctx) is None or not os.path.isabs(path) or not _in_prefix(ctx, path):
        return
    emit("deepep-v2.jit-cache-in-prefix", "error",
         f"DeepEP 2.x's JIT cache {path} is inside the env {ctx.prefix}: the env's files must stay what the lock "
         "installed (install verifies and replaces them)",
         [why], "set EP_JIT_CACHE_DIR outside the env (deepep-env's overlay uses ~/.cache/deepep-env/jit/…)")


@check("deepep-v2", "deepep-v2.jit-cache-unwritable")
def jit_cache_writable(ctx: DoctorContext, emit: Emitter) -> None:
    """The JIT cache folder can be written or created (csrc/jit/compiler.hpp writes it at the first compile)."""
    path, why = jit_cache_dir(ctx)
    if v2_package(ctx) is None or not os.path.isabs(path) or _in_prefix(ctx, path):
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


@check("deepep-v2", "deepep-v2.nccl-root-missing")
def nccl_root_complete(ctx: DoctorContext, emit: Emitter) -> None:
    """find_nccl_root() finds an NCCL with lib/libnccl.so* and include/nccl_device.h (deep_ep/utils/find_pkgs.py)."""
    nccl = v2_nccl(ctx)
    if nccl is None or nccl.complete:
        return
    what = "no lib/libnccl.so*" if not nccl.libs else "no include/nccl_device.h (the JIT compiles against it)"
    emit("deepep-v2.nccl-root-missing", "error",
         f"DeepEP 2.x's NCCL root {nccl.root or '(none found)'} has {what}: `import deep_ep` or its first kernel fails",
         [nccl.why], "install the env again (its nccl package) or point EP_NCCL_ROOT_DIR at an NCCL >= 2.30.4 install")


def _version_evidence(nccl: NcclInstall) -> Evidence:
    return Evidence(value=f"NCCL {nccl.version or 'unknown'}", file=f"{nccl.root}/include/nccl.h")


@check("deepep-v2", "deepep-v2.nccl-too-old")
def nccl_new_enough(ctx: DoctorContext, emit: Emitter) -> None:
    """DeepEP 2.x's NCCL is >= 2.30.4, for the Gin device API (DeepEP README "Requirements")."""
    nccl = v2_nccl(ctx)
    if nccl is None or not nccl.complete or not nccl.too_old() or downgraded(nccl, built_nccl(ctx)):
        return  # a downgrade from the build's NCCL is deepep-v2.nccl-downgraded's (checks_field)
    emit("deepep-v2.nccl-too-old", "error", f"DeepEP 2.x needs NCCL >= {NCCL_FLOOR} (Gin device API), {nccl.root} has {nccl.version}",
         [nccl.why, _version_evidence(nccl)], "install an env with NCCL >= 2.30.4 (nccl.provider = 'source' builds one)")


@check("deepep-v2", "deepep-v2.nccl-build-mismatch")
def nccl_matches_build(ctx: DoctorContext, emit: Emitter) -> None:
    """Below NCCL 2.31 the NCCL loaded is the one DeepEP compiled against (csrc/kernels/backend/nccl.cu)."""
    nccl = v2_nccl(ctx)
    built = built_nccl(ctx)
    if nccl is None or not nccl.complete or nccl.too_old() or not nccl.differs_from_build(built) or downgraded(nccl, built):
        return
    emit("deepep-v2.nccl-build-mismatch", "error",
         f"DeepEP was built against NCCL {built}, {nccl.root} has {nccl.version}: below 2.31 they must be the same "
         "(csrc/kernels/backend/nccl.cu asserts it when the first ElasticBuffer is made)",
         [nccl.why, _version_evidence(nccl), Evidence(value=f"nccl {built}", file=f"{v2_package(ctx)}/_deepep_env_build.json")],
         "rebuild DeepEP against this NCCL, or use the NCCL it was built against")


@check("deepep-v2", "deepep-v2.nccl-duplicate")
def one_nccl_mapped(ctx: DoctorContext, emit: Emitter) -> None:
    """One libnccl is mapped, the one DeepEP links (deep_ep/__init__.py check_nccl_so; torch's _preload_cuda_deps)."""
    nccl = v2_nccl(ctx)
    if nccl is None or not nccl.complete:
        return
    first, distinct = distinct_mapped_first(ctx)
    ctx.info["nccl_v2"] = {"linked": nccl.linked, "mapped_first": first}
    if len(distinct) > 1:
        emit("deepep-v2.nccl-duplicate", "error",
             "two NCCL libraries will be mapped (" + ", ".join(p for p, _ in distinct) + "): `import deep_ep` aborts with "
             "'Duplicate NCCL runtime' (deep_ep/__init__.py check_nccl_so)",
             [ev for _, ev in distinct], "keep one: LD_PRELOAD the env's lib/libnccl.so.2 and put the env's site-packages "
             "first on PYTHONPATH (what `deepep-env run` does)")
    elif distinct and not same_file(ctx, distinct[0][0], nccl.linked):
        emit("deepep-v2.nccl-duplicate", "error",
             f"the process maps {distinct[0][0]} before deep_ep._C, not {nccl.linked}, the NCCL DeepEP links: `import deep_ep` "
             "aborts ('Duplicate NCCL runtime' or 'Invalid NCCL versions', deep_ep/__init__.py check_nccl_so)",
             [distinct[0][1], Evidence(value="the NCCL DeepEP linked", file=nccl.linked)],
             "run through `deepep-env run ENV` (its site-packages first on PYTHONPATH, LD_PRELOAD of the env's NCCL)")
    else:
        ctx.confirmed.append(f"deepep-v2.nccl: one NCCL {nccl.version or ''} in the process, {nccl.linked}, the one DeepEP linked")


@check("deepep-v2", "deepep-v2.nccl-check-suppressed")
def nccl_check_not_suppressed(ctx: DoctorContext, emit: Emitter) -> None:
    """EP_SUPPRESS_NCCL_CHECK does not turn off check_nccl_so (deep_ep/__init__.py)."""
    # deep_ep/__init__.py: int(os.environ.get('EP_SUPPRESS_NCCL_CHECK', 0)) — any non-zero integer.
    if v2_package(ctx) is None or not re.match(r"^\s*[+-]?0*[1-9][0-9]*\s*$", ctx.env.get("EP_SUPPRESS_NCCL_CHECK") or ""):
        return
    # Deliberate: the env spec's [env] sets it (sglang #40671: servers that never use EP must not die
    # on import-time checks). By accident: an image or a launcher left it in the environment.
    if ctx.env.origin("EP_SUPPRESS_NCCL_CHECK").startswith("overlay rule spec-env"):
        ctx.confirmed.append("deepep-v2.nccl-check-suppressed: EP_SUPPRESS_NCCL_CHECK set deliberately by the env spec's "
                             "[env] (doctor's deepep-v2.nccl-* checks still run)")
        return
    emit("deepep-v2.nccl-check-suppressed", "warning",
         "EP_SUPPRESS_NCCL_CHECK comes from outside the env spec: it turns off DeepEP's own check that one NCCL, the "
         "one it linked, is loaded (deep_ep/__init__.py check_nccl_so): a mismatch then corrupts or hangs instead of "
         "failing at import (set on purpose only for servers that never use EP: sglang PR #40671)",
         [ctx.env.evidence("EP_SUPPRESS_NCCL_CHECK")],
         "unset EP_SUPPRESS_NCCL_CHECK and fix what it hid; where it is wanted, set it in the env spec's [env]")


def gin_off(ctx: DoctorContext) -> bool:
    """EP_DISABLE_GIN turns Gin off: DeepEP reads it with ``sscanf("%d")`` (csrc/utils/system.hpp get_env),
    so a non-zero integer does; "0" does not, and a word ("true", "yes") leaves the int unset (undefined)."""
    return c_int(ctx.env.get("EP_DISABLE_GIN") or "") not in (None, 0)


def c_int(value: str) -> Optional[int]:
    """``value`` as glibc's ``sscanf("%d")`` reads it into an ``int``: C-locale white space, then ASCII
    digits (a fullwidth ``１`` or a leading NBSP is no number), the value wrapped to 32 bits as
    ``strtol``'s long is stored into an int on x86-64 (``4294967296`` is 0); None when no digit."""
    m = re.match(r"[ \t\n\v\f\r]*([+-]?)([0-9]+)", value)
    if m is None:
        return None
    digits = m.group(2).lstrip("0") or "0"
    n = int(digits) if len(digits) <= 20 else 1 << 64
    n = max(-(1 << 63), min(-n if m.group(1) == "-" else n, (1 << 63) - 1))   # strtol saturates at LONG_MIN/MAX
    v = n % (1 << 32)                                                        # stored into an int: the low 32 bits
    return v - (1 << 32) if v >= 1 << 31 else v


@check("deepep-v2", "deepep-v2.gin-disabled")
def gin_enabled(ctx: DoctorContext, emit: Emitter) -> None:
    """NCCL_GIN_ENABLE=0 only with EP_DISABLE_GIN=1 (NCCL src/gin/gin_host.cc; csrc/kernels/backend/nccl.cu)."""
    if v2_package(ctx) is None or (ctx.env.get("NCCL_GIN_ENABLE") or "").strip() != "0" or gin_off(ctx):
        return
    emit("deepep-v2.gin-disabled", "error",
         "NCCL_GIN_ENABLE=0: NCCL refuses Gin (src/gin/gin_host.cc 'GIN is disabled') and DeepEP 2.x's "
         "ElasticBuffer on more than one rank needs it unless EP_DISABLE_GIN=1 (csrc/kernels/backend/nccl.cu)",
         [ctx.env.evidence("NCCL_GIN_ENABLE"), ctx.env.evidence("EP_DISABLE_GIN")],
         "unset NCCL_GIN_ENABLE (or set EP_DISABLE_GIN=1 for NVLink-only runs)")


def expected_ranks(ctx: DoctorContext) -> tuple[int, str]:
    """How many ranks a run of the env is expected to use, and why: the spec's ``[verify] ranks``, else
    one per GPU of the host (DeepEP's tests spawn one process per GPU)."""
    asked = getattr(getattr(ctx.spec, "verify", None), "ranks", None)
    if isinstance(asked, int):
        return asked, f"the env spec's [verify] ranks = {asked}"
    n = len(ctx.host.facts.gpus)
    return n, f"{n} GPU(s) on the host, one rank each"


@check("deepep-v2", "deepep-v2.gin-unavailable", current_env_too=True)
def gin_transport_or_disabled(ctx: DoctorContext, emit: Emitter) -> None:
    """Where NCCL can have no Gin transport, EP_DISABLE_GIN is set for a run of more than one rank (nccl.cu:87)."""
    if v2_package(ctx) is None or gin_off(ctx):
        return
    has_gin, fact = gin_transport(ctx.host.facts)
    ranks, why = expected_ranks(ctx)
    if has_gin or ranks < 2:
        return
    emit("deepep-v2.gin-unavailable", "error",
         f"NCCL has no Gin transport on this host and EP_DISABLE_GIN is unset (or not a non-zero integer): DeepEP "
         f"2.x's ElasticBuffer on {ranks} ranks dies in every rank with `{GIN_ASSERTION}`",
         [Evidence(value=fact, file="/sys/class/infiniband"), ctx.env.evidence("EP_DISABLE_GIN"), Evidence(value=why)],
         "set EP_DISABLE_GIN=1 for runs on this node (ElasticBuffer then works over NVLink without Gin; "
         "`deepep-env run`/`task` set it here: overlay rule no-gin-transport), or run where RDMA NICs are ACTIVE")


@check("deepep-v2", "deepep-v2.gin-off-internode")
def gin_on_for_internode(ctx: DoctorContext, emit: Emitter) -> None:
    """EP_DISABLE_GIN is not set where RDMA matters: without Gin no internode kernels (csrc/kernels/backend/nccl.cu)."""
    # Where NCCL has no Gin anyway (EFA without aws-ofi-nccl), unsetting it would not bring the kernels back.
    if v2_package(ctx) is None or not gin_off(ctx) or not ctx.rdma_relevant() or not gin_transport(ctx.host.facts)[0]:
        return
    emit("deepep-v2.gin-off-internode", "warning",
         "EP_DISABLE_GIN is set on a host with RDMA NICs: ElasticBuffer creates no Gin contexts, so its "
         "internode (RDMA) kernels cannot run (csrc/kernels/backend/nccl.cu)",
         [ctx.env.evidence("EP_DISABLE_GIN")], "unset EP_DISABLE_GIN for multi-node runs")
