"""This year's field failures (shared/research/2026-11-landscape.md §1.3, issue 27), one check each.

Each check reads what the upstream thread's failure depends on and names the thread in its title:

- ``deepep-v2.nccl-downgraded``: the NCCL the process will load is older than the one DeepEP was
  built against — pip's torch pins an older ``nvidia-nccl-cu13`` exactly and pip silently downgrades
  it (DeepEP #710: ``undefined symbol: ncclGetLsaDevicePointer``; PR #712 adds the same guard at run
  time with ``ncclGetVersion``). Forward compatibility (build newer, run older) is never supported.
- ``nvshmem.layout-mismatch``: NVSHMEM changed the internal layout of its RC-connected QPs in 3.5.19
  (NVSHMEM 3.5.21 release notes, "Known Issues"); DeepEP's V1/legacy kernels built for one layout class
  time out, hang or fault with the other (DeepEP #553, #707, #764; fixes #564, PR #696). torch 2.15
  brings NVSHMEM 3.7 into pip stacks (vLLM PR #58159).
- ``deepep-v2.gin-mlx5-old``: NCCL Gin's GDAKI backend needs libmlx5's ``MLX5_1.25`` (dmabuf)
  symbols; MLNX_OFED 24.10's libmlx5 lacks them and ElasticBuffer asserts ``ginType !=
  NCCL_GIN_TYPE_NONE`` (DeepEP #628).
- ``deepep-v2.jit-cccl-missing``: CUDA 13 keeps CCCL (``cuda/std/tuple``) under ``include/cccl``
  (conda: ``targets/<arch>/include/cccl``); without it the build and the JIT fail (DeepEP #568, #476).
- ``nvshmem.headers-missing``: the NVSHMEM root a build is pointed at has the library but no
  ``include/nvshmem.h`` — another package's headerless bundled copy (srt-slurm PR #242: FlashInfer's).
- ``nvshmem.var-unread``: an ``NVSHMEM_*`` variable that neither ``libnvshmem_host`` nor any transport
  plugin (``nvshmem_transport_*.so``) of the NVSHMEM that loads contains: it does nothing. The plugins
  are searched too — ``NVSHMEM_IB_GID_INDEX`` lives in ``nvshmem_transport_ib*.so`` (sglang #38769's
  reporter grepped only the host library and wrongly concluded 3.4.5 lacked it).
- ``deepep-v2.nccl-comm-reuse``: with ``EP_REUSE_NCCL_COMM`` on (unset = on since DeepEP #637),
  ``deep_ep/utils/comm.py`` hands PyTorch's ``backend._comm_ptr()`` straight to ElasticBuffer; PyTorch
  creates that communicator lazily, so before the first collective (and without
  ``init_process_group(device_id=...)``) it is null and ElasticBuffer segfaults in ``ncclTeamWorld``
  (DeepEP #726). Whether the program ran a collective first is only known at run time: a warning.
- ``deepep-v2.build-in-capture``: ElasticBuffer's constructor creates NCCL device communicators
  (``ncclDevCommCreate``), illegal inside CUDA-graph capture; a revision whose ``buffers/elastic.py`` does
  not test for capture fails with ``GIN: DevComm setup failed on all available backends`` when a
  program first builds the buffer on its first dispatch inside ``torch.cuda.graph()`` (sglang PR #39078).
  Only the program's order decides it, and every V2 env built from 2.1.0 has such a constructor: an
  ``info`` finding (printed with its fix, not counted by ``--strict``), so a clean V2 env stays clean.
- ``host.ah-rails``: B300 with ConnectX-8 (``hca_type`` MT4131): rails without a RoCE v2 IPv4 GID reject
  address handles, NVSHMEM's IBGDA fails with ``ibgda.cpp: Unable to create ah`` → ``create DCT share
  err`` (NVIDIA/nvshmem #33; SemiAnalysisAI/InferenceX PR #2525 restricts NVSHMEM_HCA_LIST).
"""
from __future__ import annotations

import json
import os
import re
from typing import Optional

from deepep_env.doctor.check import Emitter, check
from deepep_env.doctor.checks_deepep import build_record
from deepep_env.doctor.checks_deepep_v2 import built_nccl, jit_cuda_home, toolkit_version, v2_nccl, v2_package
from deepep_env.doctor.checks_host import ports_in_use, rdma_checked
from deepep_env.doctor.checks_nccl_v2 import distinct_mapped_first, nccl_version
from deepep_env.doctor.checks_nvshmem import nvshmem_host
from deepep_env.doctor.context import DoctorContext
from deepep_env.doctor.model import Evidence
from deepep_env.doctor.runtime_probe import nccl_get_version
from deepep_env.overlay import known_vars
from deepep_env.base.versions import version_lt

LAYOUT_CHANGE = "3.5.19"   # NVSHMEM 3.5.21 release notes: RC-QP layout changed starting in 3.5.19
MLX5_GIN_SYMBOLS = "MLX5_1.25"  # libmlx5 symbol version with the dmabuf entry points NCCL Gin's GDAKI uses
CX8_HCA_TYPES = ("MT4131",)  # ConnectX-8 (PCI 15b3:1023)
NVSHMEM_ROOT_VARS = ("NVSHMEM_HOME", "NVSHMEM_DIR", "EP_NVSHMEM_ROOT_DIR", "NVSHMEM_PREFIX")
SCAN_LIMIT = 96 << 20      # bytes of a library searched for variable names


def _version3(v: str) -> str:
    return ".".join(v.split(".")[:3])


# -- the NCCL the process will load vs the one DeepEP was built against (#710) ---------------------------
def nccl_version_of(ctx: DoctorContext, lib: str) -> tuple[Optional[str], str]:
    """A libnccl's version: on this machine its own answer (``ncclGetVersion``, in a child process), else
    its file name (libnccl.so.2.28.9), a pip wheel's dist-info beside it, or the nccl.h of its install;
    (None, "") when none says."""
    if ctx.paths.live and os.path.isfile(lib):
        v = nccl_get_version(lib)
        if v:
            return v, "ncclGetVersion"
    name = ctx.paths.readlink_name(lib) or ""
    m = re.match(r"^libnccl\.so\.(\d+\.\d+\.\d+)", name)
    if m:
        return m.group(1), f"file name {name}"
    libdir = os.path.dirname(lib)
    site = os.path.dirname(os.path.dirname(os.path.dirname(libdir)))  # <site>/nvidia/nccl/lib
    for d in ctx.paths.glob(f"{site}/nvidia_nccl*.dist-info"):
        m = re.match(r"^nvidia_nccl_cu\d+-(\d+\.\d+\.\d+)", os.path.basename(d))
        if m:
            return m.group(1), f"pip wheel {os.path.basename(d)}"
    v = nccl_version(ctx, os.path.dirname(libdir), None)
    return (v, f"{os.path.dirname(libdir)}/include/nccl.h") if v else (None, "")


@check("deepep-v2", "deepep-v2.nccl-downgraded", current_env_too=True)
def nccl_not_downgraded(ctx: DoctorContext, emit: Emitter) -> None:
    """The NCCL the process loads is not older than the one DeepEP 2.x was built against (DeepEP #710, PR #712)."""
    nccl = v2_nccl(ctx)
    built = built_nccl(ctx)
    if nccl is None or not built:
        return
    # Every libnccl the process maps (LD_PRELOAD's, pip torch's), else the one DeepEP links: the oldest counts —
    # with two mapped, whichever came first serves DeepEP's symbols.
    _, distinct = distinct_mapped_first(ctx)
    candidates = [p for p, _ in distinct] or ([nccl.linked] if nccl.libs else [])
    seen: list[tuple[str, str, str]] = []
    for path in candidates:
        v, how_ = (nccl.version, f"{nccl.root}/include/nccl.h") if nccl.libs and path == nccl.linked and nccl.version \
            else nccl_version_of(ctx, path)
        if v:
            seen.append((path, v, how_))
        else:
            ctx.notes.append(f"version of {path} not readable: NCCL downgrade not checked for it")
    if not seen:
        return
    loads, have, how = min(seen, key=lambda t: [int(x) for x in _version3(t[1]).split(".") if x.isdigit()])
    if version_lt(_version3(have), _version3(built)):
        emit("deepep-v2.nccl-downgraded", "error",
             f"the process loads NCCL {have} ({loads}), older than NCCL {built} DeepEP was built against: pip's "
             "torch pins an older nvidia-nccl exactly and silently downgrades it; `import deep_ep` dies with "
             "`undefined symbol: ncclGetLsaDevicePointer` (deepseek-ai/DeepEP #710; PR #712 adds this check)",
             [Evidence(value=f"NCCL {have} ({how})", file=loads),
              Evidence(value=f"built against NCCL {built}", file=f"{v2_package(ctx)}/_deepep_env_build.json")],
             f"pip install --no-deps --force-reinstall nvidia-nccl-cu13=={built} after torch (or `deepep-env run`, "
             "which loads the env's NCCL); never run an NCCL older than the build's")
    else:
        ctx.confirmed.append(f"deepep-v2.nccl-version: loads NCCL {have}, built against {built} (run >= build)")


# -- NVSHMEM layout class vs the DeepEP build (#707, #764, PR #696) ----------------------------------------
def nvshmem_version_of(ctx: DoctorContext, lib: str) -> tuple[Optional[str], str]:
    """A libnvshmem_host's version: its file name, a pip wheel's dist-info (``<site>/nvidia/nvshmem/lib``),
    or the conda record of the prefix holding it (``<prefix>/lib`` → ``conda-meta/*nvshmem*.json``)."""
    name = ctx.paths.readlink_name(lib) or ""
    m = re.match(r"^libnvshmem_host\.so\.(\d+\.\d+\.\d+)", name)
    if m:
        return m.group(1), f"file name {name}"
    libdir = os.path.dirname(lib)
    site = os.path.dirname(os.path.dirname(os.path.dirname(libdir)))
    for d in ctx.paths.glob(f"{site}/nvidia_nvshmem*.dist-info"):
        m = re.match(r"^nvidia_nvshmem_cu\d+-(\d+\.\d+\.\d+)", os.path.basename(d))
        if m:
            return m.group(1), f"pip wheel {os.path.basename(d)}"
    for rec in ctx.paths.glob(f"{os.path.dirname(libdir)}/conda-meta/*nvshmem*.json"):
        try:
            data = json.loads(ctx.paths.read_text(rec, 1 << 22) or "")
        except ValueError:
            continue
        v = data.get("version") if isinstance(data, dict) else None
        if isinstance(v, str) and re.match(r"^\d+\.\d+\.\d+", v) and any(
                str(f).endswith(os.path.basename(lib)) for f in (data.get("files") or [os.path.basename(lib)])):
            return _version3(v), f"conda package {os.path.basename(rec)}"
    return None, ""


def layout_class(version: str) -> str:
    return "3.5.19+ RC-QP layout" if not version_lt(_version3(version), LAYOUT_CHANGE) else "pre-3.5.19 RC-QP layout"


@check("nvshmem", "nvshmem.layout-mismatch", current_env_too=True)
def nvshmem_layout_matches_build(ctx: DoctorContext, emit: Emitter) -> None:
    """The NVSHMEM that loads has the RC-QP layout class DeepEP's kernels were built for (3.5.19 changed it)."""
    lib = nvshmem_host(ctx)
    if lib is None or lib.loads is None:
        return
    record = build_record(ctx)[0] or {}
    built = str((record.get("nvshmem") or {}).get("version") or "")
    built_how = "the build record"
    if not built and lib.built:
        got, built_how = nvshmem_version_of(ctx, lib.built)
        built = got or ""
    have, how = nvshmem_version_of(ctx, lib.loads)
    if not built or not have:
        if built or have:
            ctx.notes.append("NVSHMEM layout class not checked: the version of "
                             + ("the loaded library" if built else "the library DeepEP was built against") + " is not readable")
        return
    if layout_class(have) != layout_class(built):
        emit("nvshmem.layout-mismatch", "error",
             f"the process loads NVSHMEM {have} ({layout_class(have)}), DeepEP's legacy kernels were built for NVSHMEM {built} "
             f"({layout_class(built)}): internode dispatch times out, hangs in notify_dispatch or faults (NVSHMEM 3.5.21 "
             "release notes; deepseek-ai/DeepEP #707, #764, PR #696)",
             [Evidence(value=f"NVSHMEM {have} ({how})", file=lib.loads),
              Evidence(value=f"built for NVSHMEM {built} ({built_how})", file=lib.built or lib.ext)],
             f"load an NVSHMEM of the build's class (LD_PRELOAD={lib.built or '<the env NVSHMEM>'}, what `deepep-env run` "
             "sets), or rebuild DeepEP with the layout fix (PR #696 / feature nvshmem-3.5-layout) for this NVSHMEM")
    else:
        ctx.confirmed.append(f"nvshmem.layout: loads NVSHMEM {have}, DeepEP built for {built} ({layout_class(have)})")


# -- Gin capability: libmlx5 symbol versions, OFED (#628) ----------------------------------------------------
def _mlx5_nics(ctx: DoctorContext) -> list[str]:
    return [n.hca for n in ctx.usable_nics() if n.hca.startswith("mlx5") or (n.hca_type or "").startswith("MT")]


def libmlx5_gin_state(ctx: DoctorContext) -> tuple[Optional[bool], Optional[str], str]:
    """(has MLX5_1.25, the libmlx5 read, how): the first libmlx5.so.1 on the loader's path."""
    for d, _why in ctx.lib_search_dirs():
        path = f"{d}/libmlx5.so.1"
        if not ctx.paths.exists(path):
            continue
        name = ctx.paths.readlink_name(path) or ""
        data = ctx.paths.read_bytes(path, SCAN_LIMIT) or b""
        if data.startswith(b"\x7fELF") and len(data) > 4096:
            return (MLX5_GIN_SYMBOLS.encode() + b"\0") in data, path, f"symbol versions of {name or path}"
        m = re.match(r"^libmlx5\.so\.1\.(\d+)\.", name)
        if m:
            return int(m.group(1)) >= 25, path, f"{name}: libmlx5 ABI 1.{m.group(1)}"
        return None, path, ""
    return None, None, ""


@check("deepep-v2", "deepep-v2.gin-mlx5-old")
def gin_mlx5_capable(ctx: DoctorContext, emit: Emitter) -> None:
    """libmlx5 exports MLX5_1.25 (OFED >= 25.x) for NCCL Gin's GDAKI backend (DeepEP #628)."""
    if v2_package(ctx) is None or not _mlx5_nics(ctx) or not ctx.rdma_relevant():
        return
    has, path, how = libmlx5_gin_state(ctx)
    ofed = ctx.host.facts.ofed
    mlnx = ofed.packages.get("mlnx-ofed-kernel-dkms") or ofed.mlx5_core_version or ""
    m = re.match(r"^(\d+)\.(\d+)", mlnx)
    old_ofed = m is not None and (int(m.group(1)), int(m.group(2))) < (25, 0) and not ofed.doca_ofed
    if has is True:
        ctx.confirmed.append(f"deepep-v2.gin-mlx5: {path} exports {MLX5_GIN_SYMBOLS} ({how})")
        return
    if has is False or (has is None and old_ofed):
        ev = []
        if path:
            ev.append(Evidence(value=how or "libmlx5 present", file=path))
        if m:
            ev.append(Evidence(value=f"MLNX_OFED {mlnx}", file="/var/lib/dpkg/status" if ofed.packages.get("mlnx-ofed-kernel-dkms") else "/sys/module/mlx5_core/version"))
        emit("deepep-v2.gin-mlx5-old", "error",
             f"libmlx5 lacks the {MLX5_GIN_SYMBOLS} (dmabuf) symbols NCCL Gin's GDAKI backend needs (MLNX_OFED 24.10 "
             "and older): NCCL finds no Gin backend and ElasticBuffer asserts `ginType != NCCL_GIN_TYPE_NONE` "
             "(deepseek-ai/DeepEP #628)", ev,
             "upgrade the host to DOCA-OFED/MLNX_OFED 25.x (rdma-core with libmlx5 1.25); for single-node runs "
             "EP_DISABLE_GIN=1")


# -- the JIT's CUDA 13 CCCL headers (#568) -------------------------------------------------------------------
@check("deepep-v2", "deepep-v2.jit-cccl-missing")
def jit_cccl_present(ctx: DoctorContext, emit: Emitter) -> None:
    """A CUDA >= 13 toolkit has its CCCL headers (include/cccl/cuda/std/tuple) where DeepEP looks (DeepEP #568)."""
    if v2_package(ctx) is None:
        return
    home, why = jit_cuda_home(ctx)
    ver = toolkit_version(ctx, home) if home else None
    if not home or not ver or version_lt(ver, "13.0") or ctx.paths.missing(f"{home}/bin/nvcc") is not False:
        return
    cands = [f"{home}/include/cccl", *ctx.paths.glob(f"{home}/targets/*/include/cccl")]
    if any(ctx.paths.is_file(f"{c}/cuda/std/tuple") for c in cands):
        return
    emit("deepep-v2.jit-cccl-missing", "error",
         f"CUDA {ver} at {home} has no CCCL headers (include/cccl/cuda/std/tuple): DeepEP's build and JIT fail with "
         "`cuda/std/tuple: No such file` (deepseek-ai/DeepEP #568; setup.py hard-codes /usr/local/cuda/include/cccl)",
         [why, Evidence(value="absent", file=f"{home}/include/cccl/cuda/std/tuple")],
         "install the toolkit's CCCL (conda: cuda-cccl; it lands in targets/<arch>/include/cccl) and keep CUDA_HOME on it")


# -- a headerless NVSHMEM picked for a build (srt-slurm #242) -------------------------------------------------
@check("nvshmem", "nvshmem.headers-missing", current_env_too=True)
def nvshmem_root_has_headers(ctx: DoctorContext, emit: Emitter) -> None:
    """The NVSHMEM root the environment names has include/nvshmem.h, not only the library (srt-slurm PR #242)."""
    for var in NVSHMEM_ROOT_VARS:
        root = (ctx.env.get(var) or "").rstrip("/")
        if not root or not ctx.paths.covered(root) or not ctx.paths.is_dir(root):
            continue
        has_lib = bool(ctx.paths.glob(f"{root}/lib/libnvshmem_host.so*") or ctx.paths.glob(f"{root}/lib64/libnvshmem_host.so*"))
        if has_lib and not ctx.paths.is_file(f"{root}/include/nvshmem.h"):
            bundled = " (another package's bundled copy)" if re.search(r"flashinfer|site-packages|dist-packages", root) else ""
            emit("nvshmem.headers-missing", "error",
                 f"{var}={root} is an NVSHMEM without headers{bundled}: a DeepEP build against it fails with "
                 "`nvshmem.h: No such file` (ishandhanani/srt-slurm PR #242: `find` picked FlashInfer's bundled NVSHMEM)",
                 [ctx.env.evidence(var), Evidence(value="absent", file=f"{root}/include/nvshmem.h")],
                 f"point {var} at a full NVSHMEM (the env's prefix, or the nvidia-nvshmem wheel's nvidia/nvshmem) "
                 "or unset it")


# -- NVSHMEM variables against the strings of the host library and its transport plugins ---------------------
def nvshmem_libraries(ctx: DoctorContext) -> list[str]:
    """libnvshmem_host and every transport/bootstrap plugin beside the NVSHMEM that loads."""
    lib = nvshmem_host(ctx)
    if lib is None or lib.loads is None:
        return []
    d = os.path.dirname(lib.loads)
    return [lib.loads] + sorted(set(ctx.paths.glob(f"{d}/nvshmem_transport_*.so*") + ctx.paths.glob(f"{d}/nvshmem_bootstrap_*.so*")))


@check("nvshmem", "nvshmem.var-unread")
def nvshmem_vars_read(ctx: DoctorContext, emit: Emitter) -> None:
    """Each NVSHMEM_* variable set is a string of libnvshmem_host or of a transport plugin (sglang #38769)."""
    # Build options (read by NVSHMEM's CMake, not at run time) and install roots are not run-time variables.
    names = sorted(k for k in ctx.env.values if k.startswith("NVSHMEM_") and not known_vars.build_time_only(k)
                   and k not in NVSHMEM_ROOT_VARS)
    libs = nvshmem_libraries(ctx)
    if not names or not libs:
        return
    blobs = {p: ctx.paths.read_bytes(p, SCAN_LIMIT) or b"" for p in libs}
    if b"NVSHMEM_" not in blobs[libs[0]]:
        ctx.notes.append(f"{libs[0]} has no NVSHMEM_* strings (a stub?): variable names not checked against it")
        return
    plugins = libs[1:]
    for name in names:
        short = name[len("NVSHMEM_"):].encode()
        # NVSHMEM keeps most names without the prefix (env_defs.h: "IB_GID_INDEX"), each a NUL-terminated string.
        where = [p for p, b in blobs.items() if (name.encode() + b"\0") in b or (b"\0" + short + b"\0") in b]
        if where:
            if len(libs) > 1 and where[0] != libs[0]:
                ctx.confirmed.append(f"nvshmem.var: {name} is read by {os.path.basename(where[0])} (a transport plugin)")
            continue
        emit("nvshmem.var-unread", "warning",
             f"{name} is in none of this NVSHMEM's libraries (libnvshmem_host and {len(plugins)} transport/bootstrap "
             "plugin(s) searched): it does nothing here (the variables live in the plugins too: sglang #38769)",
             [ctx.env.evidence(name)] + [Evidence(value="searched", file=p) for p in libs[:6]],
             f"check the name against this NVSHMEM's `nvshmem-info -a`, or unset {name}")


# -- PyTorch's communicator reused before it exists (#726) ------------------------------------------------------
REUSE_UNGUARDED = re.compile(r"EP_REUSE_NCCL_COMM['\"]\s*,\s*['\"]?1(?s:.*)NCCLCommHandle\(\s*backend\._comm_ptr\(\)")


@check("deepep-v2", "deepep-v2.nccl-comm-reuse", current_env_too=True)
def nccl_comm_reuse_safe(ctx: DoctorContext, emit: Emitter) -> None:
    """EP_REUSE_NCCL_COMM=1 reuses PyTorch's communicator unchecked: null until its first collective (DeepEP #726)."""
    pkg = v2_package(ctx)
    comm = f"{pkg}/utils/comm.py"
    if pkg is None or not REUSE_UNGUARDED.search(ctx.paths.read_text(comm) or ""):
        return
    value = (ctx.env.get("EP_REUSE_NCCL_COMM") or "1").strip()
    if not re.match(r"^[+-]?0*[1-9][0-9]*$", value):  # int(...) == 0: DeepEP creates its own communicator
        ctx.confirmed.append(f"deepep-v2.nccl-comm-reuse: EP_REUSE_NCCL_COMM={value}, DeepEP creates its own communicator")
        return
    if ctx.env.origin("EP_REUSE_NCCL_COMM").startswith("overlay rule spec-env"):
        ctx.confirmed.append("deepep-v2.nccl-comm-reuse: EP_REUSE_NCCL_COMM set deliberately by the env spec's [env]")
        return
    emit("deepep-v2.nccl-comm-reuse", "warning",
         "ElasticBuffer reuses PyTorch's NCCL communicator (EP_REUSE_NCCL_COMM on, the default since DeepEP #637) "
         "without checking it: PyTorch creates it lazily, so if no collective ran on the EP group first and "
         "init_process_group had no device_id, it is null and the constructor segfaults in ncclTeamWorld "
         "(deepseek-ai/DeepEP #726; whether the program does so is only seen at run time)",
         [ctx.env.evidence("EP_REUSE_NCCL_COMM"),
          Evidence(value="passes backend._comm_ptr() on unchecked", file=comm)],
         "init_process_group(..., device_id=torch.device('cuda', local_rank)) or run one collective on the EP "
         "group before ElasticBuffer; or EP_REUSE_NCCL_COMM=0 (set in the env spec's [env] to make it deliberate)")


# -- ElasticBuffer first built inside CUDA-graph capture (sglang PR #39078) ----------------------------------
@check("deepep-v2", "deepep-v2.build-in-capture")
def buffer_built_before_capture(ctx: DoctorContext, emit: Emitter) -> None:
    """ElasticBuffer's constructor cannot run inside CUDA-graph capture and this revision does not test for it."""
    pkg = v2_package(ctx)
    elastic = f"{pkg}/buffers/elastic.py"
    text = (ctx.paths.read_text(elastic) or "") if pkg else ""
    # At dd758ca the constructor sets up the communicator (get_nccl_comm_handle) and _C.ElasticBuffer, whose
    # ncclDevCommCreate (csrc/kernels/backend/nccl.cu) cannot be captured; no capture test anywhere.
    if "get_nccl_comm_handle(" not in text or re.search(r"is_current_stream_capturing|StreamIsCapturing", text):
        return
    emit("deepep-v2.build-in-capture", "info",
         "this DeepEP's ElasticBuffer constructor creates NCCL device communicators (ncclDevCommCreate) and does "
         "not detect CUDA-graph capture: built for the first time inside torch.cuda.graph() (a lazy buffer on the "
         "first dispatch) it fails with `NCCL exception ... (GIN: DevComm setup failed on all available "
         "backends)`, not a Gin problem (sgl-project/sglang PR #39078; only the program's order decides it)",
         [Evidence(value="ElasticBuffer.__init__ without a capture check", file=elastic)],
         "build the ElasticBuffer before CUDA-graph capture (at model init, or a warm-up dispatch outside the "
         "graph); do not tune Gin for this error")


# -- B300/CX-8 GPU-fabric rails: "Unable to create ah" (nvshmem #33, InferenceX PR #2525) ------------------
@check("rdma-config", "host.ah-rails", current_env_too=True)
def cx8_rails_accept_ah(ctx: DoctorContext, emit: Emitter) -> None:
    """On ConnectX-8, every RoCE rail NVSHMEM uses has a RoCE v2 IPv4 GID (else "Unable to create ah")."""
    if not rdma_checked(ctx) or (ctx.env.get("NVSHMEM_USE_NCCL") or "").strip() == "1":
        return
    used = [(n, p) for n, p in ports_in_use(ctx) if (n.hca_type or "") in CX8_HCA_TYPES and p.is_ethernet]
    bad = [(n, p) for n, p in used if not any(g.is_roce_v2 and g.ipv4 for g in p.gids)]
    good = [(n, p) for n, p in used if (n, p) not in bad]
    if not bad:
        return
    hca_list = ",".join(f"{n.hca}:{p.number}" for n, p in good)
    emit("host.ah-rails", "error",
         "ConnectX-8 rails without a routable RoCE v2 GID are in use (" + ", ".join(f"{n.hca}:{p.number}" for n, p in bad[:8])
         + "): NVSHMEM's IBGDA fails with `ibgda.cpp: Unable to create ah` / `create DCT share err` "
         "(NVIDIA/nvshmem #33; SemiAnalysisAI/InferenceX PR #2525)",
         [ctx.env.evidence("NVSHMEM_HCA_LIST")] + [
             Evidence(value=", ".join(f"{g.index}={g.type}" + ("/IPv4" if g.ipv4 else "") for g in p.gids) or "no GIDs",
                      file=f"/sys/class/infiniband/{n.hca}/ports/{p.number}/gid_attrs/types") for n, p in bad[:4]],
         (f"NVSHMEM_HCA_LIST={hca_list} (the rails that accept address handles)" if hca_list else
          "give the rails IPv4 addresses") + ", or NVSHMEM built with NVSHMEM_USE_NCCL=1 (nvshmem #33)")
