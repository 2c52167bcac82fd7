"""Family ``libraries``: what the dynamic loader and libibverbs will find, and paths that lead nowhere.

Seed 002 (GKE A4): ``/usr/local/nvidia/lib64`` held libibverbs 1.14.56 (provider ABI rdmav57) next
to the system's 1.14.50 (rdmav34) → ``couldn't load driver 'libmlx5-rdmav57.so'``,
``IBVERBS_PRIVATE_34 not found``, NCCL "Failed to initialize any NET plugin"; and
``NVSHMEM_HOME``/``GDRCOPY_HOME`` named ``/opt/deepep/…`` paths that did not exist in the pod.
rdma-core's load_driver() (libibverbs/dynamic_driver.c) appends ``-rdmav<N>.so`` to an absolute
``RDMAV_DRIVERS`` entry and looks a bare name up in its provider directory.
"""
from __future__ import annotations

import os
import re
from typing import Optional

from deepep_env.doctor.context import DoctorContext
from deepep_env.doctor.model import Evidence
from deepep_env.doctor.check import Emitter, check

IDS = (
    "lib.ibverbs-conflict",
    "lib.ibverbs-multiple-installed",
    "lib.provider-mix",
    "lib.rdmav-drivers",
    "env.preload-missing",
    "env.home-missing",
)

_VERSIONED = re.compile(r"^libibverbs\.so\.1\.(\d+(?:\.\d+)*)$")
_PROVIDER = re.compile(r"^lib([a-z0-9_]+)-rdmav(\d+)\.so$")
# Variables naming an install location of this stack: checked to exist (seed 002). Cache
# locations (TORCH_HOME, HF_HOME) are created on demand and are not checked.
PATH_VAR = re.compile(r"^(CUDA|NVSHMEM|GDRCOPY|GDR|NCCL|CUDNN|MPI|OMPI|UCX|DEEP_?EP|DOCA|MLNX|OFED|RDMA|NVIDIA|CUTLASS)"
                      r"(_[A-Z0-9]+)*_(HOME|ROOT|PATH|DIR|PREFIX)$")


def ibverbs_copy(ctx: DoctorContext, d: str) -> Optional[tuple[str, str, Optional[str]]]:
    """(file, identity, version) of the libibverbs a directory provides, or None."""
    names = ctx.paths.listdir(d)
    versioned = sorted((n for n in names if _VERSIONED.match(n)), key=lambda n: [int(x) for x in _VERSIONED.match(n).group(1).split(".")])
    if "libibverbs.so.1" in names:
        f = f"{d}/libibverbs.so.1"
        target = ctx.paths.readlink_name(f) or "libibverbs.so.1"
    elif versioned:
        f = f"{d}/{versioned[-1]}"
        target = versioned[-1]
    else:
        return None
    m = _VERSIONED.match(target)
    version = "1." + m.group(1) if m else None
    if version is not None:
        return f, f"version {version}", version
    # No version in the name (a plain file): identify it by content.
    local = ctx.paths.open_local(f)
    ident = "unreadable"
    if local:
        try:
            from deepep_env.hashing import file_sha256

            ident = file_sha256(local)
        except OSError:
            pass
    return f, ident, None


def providers_in(ctx: DoctorContext, d: str) -> list[tuple[str, str, int]]:
    out = []
    for n in ctx.paths.listdir(d):
        m = _PROVIDER.match(n)
        if m:
            out.append((f"{d}/{n}", m.group(1), int(m.group(2))))
    return out


def loader_dirs(ctx: DoctorContext) -> list[tuple[str, str]]:
    dirs = ctx.lib_search_dirs()
    if ctx.prefix:
        # Libraries in the prefix carry RPATH $ORIGIN: a libibverbs there is reachable too.
        pl = os.path.join(ctx.prefix, "lib")
        dirs = [d for d in dirs if d[1] == "LD_LIBRARY_PATH"] + [(pl, "the env prefix (RPATH $ORIGIN)")] + [
            d for d in dirs if d[1] != "LD_LIBRARY_PATH"]
    # One directory reached by two names (/lib → usr/lib on merged-/usr systems) is one copy.
    out, seen = [], set()
    for d, why in dirs:
        r = ctx.paths.realpath(d) if ctx.paths.exists(d) else None
        if r is None or r in seen:
            continue
        seen.add(r)
        out.append((d, why))
    return out


def _system_provider_dirs(ctx: DoctorContext) -> list[str]:
    return [f"{d}/libibverbs" for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")
            if ctx.paths.is_dir(f"{d}/libibverbs")]


SYSTEM_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")


def _own_mlx5_abis(ctx: DoctorContext, d: str) -> set[int]:
    """Provider ABIs shipped beside a non-system libibverbs (``<d>/libibverbs/libmlx5-rdmav<N>.so``):
    the ABI that copy asks for. A system copy's own dir is the shared provider dir: unknown."""
    if d in SYSTEM_LIB_DIRS or not ctx.paths.is_dir(f"{d}/libibverbs"):
        return set()
    return {abi for _, name, abi in providers_in(ctx, f"{d}/libibverbs") if name == "mlx5"}


def seed002_fix_applied(ctx: DoctorContext, copy_dirs: list[str], system_abis: set[int]) -> bool:
    """Seed 002's fix: every non-system libibverbs (GKE's /usr/local/nvidia/lib64, rdmav57) has its
    mlx5 provider ABI in the system provider directory, where libibverbs looks by default — so
    whichever copy a process loads (only one per process: one soname), it finds its own driver and
    no RDMAV_DRIVERS is needed. Two copies are then no fault. A copy whose ABI cannot be told (no
    provider beside it) is not proven fixed."""
    others = [d for d in copy_dirs if d not in SYSTEM_LIB_DIRS]
    if not others:
        return False
    for d in others:
        want = _own_mlx5_abis(ctx, d)
        if not want or not (want & system_abis):
            return False
    return True


# current_env_too: the overlay repairs RDMAV_DRIVERS/LD_LIBRARY_PATH for `deepep-env run`; a
# spawned child or hand launcher keeps the job YAML's values (seed 002) — reported as info.
@check("libraries", *IDS, current_env_too=True)
def check_libraries(ctx: DoctorContext, emit: Emitter) -> None:
    """One libibverbs and one provider ABI reachable; RDMAV_DRIVERS, LD_PRELOAD, *_HOME lead somewhere (seed 002)."""
    paths = ctx.paths
    lp_ev = ctx.env.evidence("LD_LIBRARY_PATH")

    # -- libibverbs copies ------------------------------------------------------------------------
    copies: dict[str, list[tuple[str, str]]] = {}
    order: list[tuple[str, str, str]] = []
    for d, why in loader_dirs(ctx):
        c = ibverbs_copy(ctx, d)
        if c is None:
            continue
        f, ident, _ = c
        copies.setdefault(ident, []).append((f, why))
        order.append((d, f, why))
    provider_dirs: list[str] = []
    for d, _, _ in order:
        if paths.is_dir(f"{d}/libibverbs") and f"{d}/libibverbs" not in provider_dirs:
            provider_dirs.append(f"{d}/libibverbs")
    for pd in _system_provider_dirs(ctx):
        if pd not in provider_dirs:
            provider_dirs.append(pd)
    providers = [p for d in provider_dirs for p in providers_in(ctx, d)]
    mlx5_abis = sorted({abi for _, name, abi in providers if name == "mlx5"})
    ctx.info["libibverbs"] = [{"file": f, "why": why} for _, f, why in order]
    conflict = len(copies) > 1
    system_abis = {abi for pd in _system_provider_dirs(ctx) for _, name, abi in providers_in(ctx, pd) if name == "mlx5"}
    if conflict and seed002_fix_applied(ctx, [d for d, _, _ in order], system_abis):
        ctx.notes.append("libibverbs: " + ", ".join(f"{f} ({i})" for i, fs in copies.items() for f, _ in fs[:1])
                         + " are reachable, and each finds its mlx5 provider ABI in the system provider directory "
                         f"(rdmav{', rdmav'.join(map(str, sorted(system_abis)))}): seed 002's fix is in place")
        conflict = False
        resolved = True
    else:
        resolved = False
    # A copy only in the env prefix (conda-forge rdma-core) brings its own providers and, loaded
    # first through RPATH, is reused by soname: a hazard worth a warning, not seed 002's error.
    host_only = {i for i, fs in copies.items() if any(why != "the env prefix (RPATH $ORIGIN)" for _, why in fs)}
    severity = "error" if len(host_only) > 1 else "warning"
    if conflict:
        evs = [Evidence(value=f"{ident} ({why})", file=f) for ident, fs in copies.items() for f, why in fs[:2]]
        evs += [Evidence(value=f"provider ABI rdmav{abi}", file=f) for f, name, abi in providers if name == "mlx5"][:6]
        first_dir = order[0][0]
        emit(
            "lib.ibverbs-conflict",
            severity,
            f"{len(copies)} different libibverbs are reachable ("
            + ", ".join(f"{fs[0][0]}: {ident}" for ident, fs in copies.items())
            + f"); {order[0][1]} loads first, and its provider ABI must match the provider it finds "
            "(seed 002: couldn't load driver 'libmlx5-rdmav57.so', IBVERBS_PRIVATE_34 not found)",
            evs + [lp_ev],
            f"keep one libibverbs reachable: take {first_dir} out of LD_LIBRARY_PATH if the system's copy is the one "
            "to use; if that copy must stay (GKE's /usr/local/nvidia), give it its own provider "
            "(copy its libmlx5.so.1.* to <system>/libibverbs/libmlx5-rdmav<N>.so, seed 002) and run every process "
            "with the same environment",
        )
    else:
        installed: dict[str, list[str]] = {}
        installed_dirs: list[str] = []
        from deepep_env.platform.probes import LIBRARY_DIRS

        seen_dirs: set[str] = set()
        for d in list(LIBRARY_DIRS) + [d for d, _ in loader_dirs(ctx)]:
            r = paths.realpath(d) if paths.is_dir(d) else None
            if r is None or r in seen_dirs:
                continue
            seen_dirs.add(r)
            c = ibverbs_copy(ctx, d)
            if c is not None:
                installed.setdefault(c[1], []).append(c[0])
                installed_dirs.append(d)
        if len(installed) > 1 and not resolved:
            resolved = seed002_fix_applied(ctx, installed_dirs, system_abis)
        # Both ABIs in the system provider dir is the fix itself when each belongs to an installed
        # copy (one is the system copy's own): libibverbs opens only lib<drv>-rdmav<its ABI>.so.
        shipped = {a for d in installed_dirs for a in _own_mlx5_abis(ctx, d)}
        mix_is_fix = resolved and len(set(mlx5_abis) - shipped) <= 1
        # A hazard of the installed files, not of an environment: never an "outside deepep-env
        # only" info (the overlay fixes nothing about it; the effective run says what applies).
        if len(installed) > 1 and not resolved and not (ctx.overlay_applied and ctx.env.label == "current"):
            emit(
                "lib.ibverbs-multiple-installed",
                "warning",
                f"{len(installed)} libibverbs versions are installed ("
                + ", ".join(f"{v}: {fs[0]}" for v, fs in installed.items())
                + "); only one is on the library path now, but a process that adds the other's directory to "
                "LD_LIBRARY_PATH (as GKE pods do with /usr/local/nvidia/lib64) loads a mix (seed 002)",
                [Evidence(value=v, file=fs[0]) for v, fs in installed.items()] + [lp_ev],
                "remove the copy you do not use, or keep its directory off LD_LIBRARY_PATH everywhere",
            )
        if len(mlx5_abis) > 1 and not mix_is_fix:
            emit(
                "lib.provider-mix",
                "warning",
                "mlx5 providers of " + " and ".join(f"rdmav{a}" for a in mlx5_abis)
                + " are both reachable: libibverbs loads only the one of its own ABI and warns about the other",
                [Evidence(value=f"provider ABI rdmav{abi}", file=f) for f, name, abi in providers if name == "mlx5"][:6],
                "keep only the provider that matches the libibverbs in use",
            )

    # -- RDMAV_DRIVERS ------------------------------------------------------------------------------
    rd = ctx.env.split("RDMAV_DRIVERS", ":;")
    bad = []
    for entry in rd:
        if entry.startswith("/"):
            hits = [h for h in paths.glob(f"{entry}-rdmav*.so") if paths.exists(h)]
            if not hits and (paths.missing(entry) is None and not paths.exists(entry)):
                ctx.notes.append(f"RDMAV_DRIVERS entry {entry}: not verifiable under the root; not checked")
                continue
            if not hits:
                why = ("a directory: rdma-core appends -rdmav<N>.so to an absolute entry, so name the provider "
                       f"(e.g. {entry.rstrip('/')}/libmlx5)") if paths.is_dir(entry) else (
                    "a file: rdma-core appends -rdmav<N>.so, drop that suffix" if paths.is_file(entry) else "nothing there")
                bad.append(f"{entry} ({why})")
        else:
            if not any(name == entry for _, name, _ in providers):
                bad.append(f"{entry} (no lib{entry}-rdmav*.so in {', '.join(provider_dirs) or 'any provider directory'})")
    if bad:
        emit(
            "lib.rdmav-drivers",
            "error",
            "RDMAV_DRIVERS points nowhere: " + "; ".join(bad[:6]),
            [ctx.env.evidence("RDMAV_DRIVERS")],
            "set RDMAV_DRIVERS to <dir>/libibverbs/libmlx5 next to the libibverbs that loads first, or unset it "
            "(seed 002: spawned children may not inherit it anyway)" + ctx.overlay_hint("RDMAV_DRIVERS"),
        )

    # -- LD_PRELOAD -----------------------------------------------------------------------------------
    missing = []
    for entry in ctx.env.split("LD_PRELOAD", ": \t"):
        if "/" in entry:
            state = paths.missing(paths.absolute(entry))
            if state is None:
                ctx.notes.append(f"LD_PRELOAD entry {entry}: not verifiable under the root; not checked")
            elif state:
                missing.append(entry)
        else:
            dirs = [d for d, _ in ctx.lib_search_dirs()]
            if paths.captures_software and not any(paths.exists(f"{d}/{entry}") for d in dirs):
                missing.append(f"{entry} (not in any library directory)")
    if missing:
        emit(
            "env.preload-missing",
            "error",
            "LD_PRELOAD names files that do not exist: " + ", ".join(missing[:6])
            + " (ld.so prints an error in every process and preloads nothing, so the intended library is not the one that loads)",
            [ctx.env.evidence("LD_PRELOAD")],
            "point LD_PRELOAD at the library that exists (the env's NVSHMEM: <prefix>/lib/libnvshmem_host.so.3) or drop the entry"
            + ctx.overlay_hint("LD_PRELOAD"),
        )

    # -- *_HOME and friends -------------------------------------------------------------------------------
    for name in sorted(ctx.env.values):
        if not PATH_VAR.match(name):
            continue
        value = (ctx.env.get(name) or "").strip()
        if not value or ":" in value or not value.startswith("/"):
            continue
        state = paths.missing(value)
        if state is None:
            ctx.notes.append(f"{name}={value}: not verifiable under --root (not captured there, or a path of this machine); not checked")
            continue
        if state:
            emit(
                "env.home-missing",
                "error",
                f"{name}={value} does not exist (seed 002: NVSHMEM_HOME/GDRCOPY_HOME named /opt/deepep paths absent in the pod)",
                [ctx.env.evidence(name)],
                f"point {name} at the real install (on GKE the libraries live under /usr/local/nvidia) or unset it",
            )
