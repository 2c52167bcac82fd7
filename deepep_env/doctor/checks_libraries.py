"""Family ``libraries``: what the dynamic loader and libibverbs will find, and paths that lead nowhere.

Seed 002 (GKE A4): ``/usr/local/nvidia/lib64`` held libibverbs 1.14.56 (provider ABI rdmav57) next
to the system's 1.14.50 (rdmav34) → ``couldn't load driver 'libmlx5-rdmav57.so'``,
``IBVERBS_PRIVATE_34 not found``, NCCL "Failed to initialize any NET plugin"; and
``NVSHMEM_HOME``/``GDRCOPY_HOME`` named ``/opt/deepep/…`` paths that did not exist in the pod.
rdma-core's load_driver() (libibverbs/dynamic_driver.c) appends ``-rdmav<N>.so`` to an absolute
``RDMAV_DRIVERS`` entry and looks a bare name up in its provider directory. File-name rules
(which libibverbs a directory provides, a provider's ABI): :mod:`deepep_env.platform.libraries`.

Every check here also runs over the environment without the overlay (``current_env_too``): the
overlay repairs RDMAV_DRIVERS/LD_LIBRARY_PATH for `deepep-env run`; a spawned child or hand
launcher keeps the job YAML's values (seed 002) — reported as info.
"""
from __future__ import annotations

import os
import re
from typing import NamedTuple, Optional

from deepep_env.doctor.check import Emitter, check
from deepep_env.doctor.context import DoctorContext
from deepep_env.doctor.model import Evidence
from deepep_env.base.hashing import file_sha256
from deepep_env.platform.libraries import LIBRARY_DIRS, SYSTEM_LIB_DIRS, ibverbs_file, ibverbs_version, provider_abi

# Variables naming an install location of this stack: checked to exist (seed 002). Cache
# locations (TORCH_HOME, HF_HOME) are created on demand and are not checked.
PATH_VAR = re.compile(r"^(CUDA|NVSHMEM|GDRCOPY|GDR|NCCL|CUDNN|MPI|OMPI|UCX|DEEP_?EP|DOCA|MLNX|OFED|RDMA|NVIDIA|CUTLASS)"
                      r"(_[A-Z0-9]+)*_(HOME|ROOT|PATH|DIR|PREFIX)$")
PREFIX_WHY = "the env prefix (RPATH $ORIGIN)"


# -- what a directory provides -----------------------------------------------------------------------
def ibverbs_copy(ctx: DoctorContext, d: str) -> Optional[tuple[str, str, Optional[str]]]:
    """(file, identity, version) of the libibverbs a directory provides, or None."""
    found = ibverbs_file(ctx.paths.listdir(d), lambda n: ctx.paths.readlink_name(f"{d}/{n}"))
    if found is None:
        return None
    f, version = f"{d}/{found[0]}", ibverbs_version(found[1])
    if version is not None:
        return f, f"version {version}", version
    # No version in the name (a plain file): identify it by content.
    local = ctx.paths.open_local(f)
    ident = "unreadable"
    if local:
        try:
            ident = file_sha256(local)
        except OSError:
            pass
    return f, ident, None


def providers_in(ctx: DoctorContext, d: str) -> list[tuple[str, str, int]]:
    """(file, driver, ABI) of every rdma-core provider in directory ``d``."""
    return [(f"{d}/{n}", *p) for n in ctx.paths.listdir(d) if (p := provider_abi(n))]


def loader_dirs(ctx: DoctorContext) -> list[tuple[str, str]]:
    """(dir, why) the loader searches, the env prefix after LD_LIBRARY_PATH; one entry per real dir."""
    dirs = ctx.lib_search_dirs()
    if ctx.prefix:
        # Libraries in the prefix carry RPATH $ORIGIN: a libibverbs there is reachable too.
        pl = os.path.join(ctx.prefix, "lib")
        dirs = [d for d in dirs if d[1] == "LD_LIBRARY_PATH"] + [(pl, PREFIX_WHY)] + [d for d in dirs if d[1] != "LD_LIBRARY_PATH"]
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
    return [f"{d}/libibverbs" for d in SYSTEM_LIB_DIRS if ctx.paths.is_dir(f"{d}/libibverbs")]


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


# -- the loader's view, computed once per context ------------------------------------------------------
class Reachable(NamedTuple):
    """The libibverbs copies and providers a process of the checked environment can reach."""

    copies: dict[str, list[tuple[str, str]]]  # identity → [(file, why)]
    order: list[tuple[str, str, str]]  # (dir, file, why) in the loader's order
    provider_dirs: list[str]
    providers: list[tuple[str, str, int]]  # (file, driver, ABI)
    mlx5_abis: list[int]
    system_abis: set[int]
    conflict: bool  # two different copies reachable, and seed 002's fix not in place
    resolved: bool  # two copies reachable, and seed 002's fix in place


def reachable(ctx: DoctorContext) -> Reachable:
    return ctx.cached("libraries.reachable", lambda: _reachable(ctx))


def _reachable(ctx: DoctorContext) -> Reachable:
    copies: dict[str, list[tuple[str, str]]] = {}
    order: list[tuple[str, str, str]] = []
    for d, why in loader_dirs(ctx):
        c = ibverbs_copy(ctx, d)
        if c is not None:
            copies.setdefault(c[1], []).append((c[0], why))
            order.append((d, c[0], why))
    provider_dirs = list(dict.fromkeys([f"{d}/libibverbs" for d, _, _ in order if ctx.paths.is_dir(f"{d}/libibverbs")]
                                       + _system_provider_dirs(ctx)))
    providers = [p for d in provider_dirs for p in providers_in(ctx, d)]
    system_abis = {abi for pd in _system_provider_dirs(ctx) for _, name, abi in providers_in(ctx, pd) if name == "mlx5"}
    ctx.info["libibverbs"] = [{"file": f, "why": why} for _, f, why in order]
    resolved = len(copies) > 1 and seed002_fix_applied(ctx, [d for d, _, _ in order], system_abis)
    if resolved:
        ctx.notes.append("libibverbs: " + ", ".join(f"{f} ({i})" for i, fs in copies.items() for f, _ in fs[:1])
                         + " are reachable, and each finds its mlx5 provider ABI in the system provider directory "
                         f"(rdmav{', rdmav'.join(map(str, sorted(system_abis)))}): seed 002's fix is in place")
    return Reachable(copies, order, provider_dirs, providers, sorted({abi for _, n, abi in providers if n == "mlx5"}),
                     system_abis, len(copies) > 1 and not resolved, resolved)


class Installed(NamedTuple):
    """Every libibverbs installed on the host (on the loader path or not), when none conflict now."""

    versions: dict[str, list[str]]  # identity → [file]
    resolved: bool  # seed 002's fix in place for them
    mix_is_fix: bool  # two mlx5 ABIs in the system dir are that fix, not a mix


def installed(ctx: DoctorContext) -> Installed:
    return ctx.cached("libraries.installed", lambda: _installed(ctx, reachable(ctx)))


def _installed(ctx: DoctorContext, r: Reachable) -> Installed:
    versions: dict[str, list[str]] = {}
    dirs: list[str] = []
    seen: set[str] = set()
    for d in list(LIBRARY_DIRS) + [d for d, _ in loader_dirs(ctx)]:
        real = ctx.paths.realpath(d) if ctx.paths.is_dir(d) else None
        if real is None or real in seen:
            continue
        seen.add(real)
        c = ibverbs_copy(ctx, d)
        if c is not None:
            versions.setdefault(c[1], []).append(c[0])
            dirs.append(d)
    resolved = r.resolved or (len(versions) > 1 and seed002_fix_applied(ctx, dirs, r.system_abis))
    # Both ABIs in the system provider dir is the fix itself when each belongs to an installed
    # copy (one is the system copy's own): libibverbs opens only lib<drv>-rdmav<its ABI>.so.
    shipped = {a for d in dirs for a in _own_mlx5_abis(ctx, d)}
    return Installed(versions, resolved, resolved and len(set(r.mlx5_abis) - shipped) <= 1)


# -- the checks ------------------------------------------------------------------------------------------
@check("libraries", "lib.ibverbs-conflict", current_env_too=True)
def ibverbs_conflict(ctx: DoctorContext, emit: Emitter) -> None:
    """One libibverbs reachable (seed 002: two copies, two provider ABIs, one process)."""
    r = reachable(ctx)
    if not r.conflict:
        return
    # A copy only in the env prefix (conda-forge rdma-core) brings its own providers and, loaded
    # first through RPATH, is reused by soname: a hazard worth a warning, not seed 002's error.
    host_only = {i for i, fs in r.copies.items() if any(why != PREFIX_WHY for _, why in fs)}
    evs = [Evidence(value=f"{ident} ({why})", file=f) for ident, fs in r.copies.items() for f, why in fs[:2]]
    evs += [Evidence(value=f"provider ABI rdmav{abi}", file=f) for f, name, abi in r.providers if name == "mlx5"][:6]
    first_dir, first_file = r.order[0][0], r.order[0][1]
    emit(
        "lib.ibverbs-conflict",
        "error" if len(host_only) > 1 else "warning",
        f"{len(r.copies)} different libibverbs are reachable ("
        + ", ".join(f"{fs[0][0]}: {ident}" for ident, fs in r.copies.items())
        + f"); {first_file} loads first, and its provider ABI must match the provider it finds "
        "(seed 002: couldn't load driver 'libmlx5-rdmav57.so', IBVERBS_PRIVATE_34 not found)",
        evs + [ctx.env.evidence("LD_LIBRARY_PATH")],
        f"keep one libibverbs reachable: take {first_dir} out of LD_LIBRARY_PATH if the system's copy is the one "
        "to use; if that copy must stay (GKE's /usr/local/nvidia), give it its own provider "
        "(copy its libmlx5.so.1.* to <system>/libibverbs/libmlx5-rdmav<N>.so, seed 002) and run every process "
        "with the same environment",
    )


@check("libraries", "lib.ibverbs-multiple-installed", current_env_too=True)
def ibverbs_multiple_installed(ctx: DoctorContext, emit: Emitter) -> None:
    """Only one libibverbs installed, or the other's directory kept off every library path."""
    # A hazard of the installed files, not of an environment: never an "outside deepep-env only"
    # info (the overlay fixes nothing about it; the effective run says what applies).
    if reachable(ctx).conflict or (ctx.overlay_applied and ctx.env.label == "current"):
        return
    inst = installed(ctx)
    if len(inst.versions) <= 1 or inst.resolved:
        return
    emit(
        "lib.ibverbs-multiple-installed",
        "warning",
        f"{len(inst.versions)} libibverbs versions are installed ("
        + ", ".join(f"{v}: {fs[0]}" for v, fs in inst.versions.items())
        + "); only one is on the library path now, but a process that adds the other's directory to "
        "LD_LIBRARY_PATH (as GKE pods do with /usr/local/nvidia/lib64) loads a mix (seed 002)",
        [Evidence(value=v, file=fs[0]) for v, fs in inst.versions.items()] + [ctx.env.evidence("LD_LIBRARY_PATH")],
        "remove the copy you do not use, or keep its directory off LD_LIBRARY_PATH everywhere",
    )


@check("libraries", "lib.provider-mix", current_env_too=True)
def provider_mix(ctx: DoctorContext, emit: Emitter) -> None:
    """One mlx5 provider ABI reachable (libibverbs loads only its own and warns about the other)."""
    r = reachable(ctx)
    if r.conflict or len(r.mlx5_abis) <= 1 or installed(ctx).mix_is_fix:
        return
    emit(
        "lib.provider-mix",
        "warning",
        "mlx5 providers of " + " and ".join(f"rdmav{a}" for a in r.mlx5_abis)
        + " are both reachable: libibverbs loads only the one of its own ABI and warns about the other",
        [Evidence(value=f"provider ABI rdmav{abi}", file=f) for f, name, abi in r.providers if name == "mlx5"][:6],
        "keep only the provider that matches the libibverbs in use",
    )


def _bad_rdmav_entry(ctx: DoctorContext, entry: str, r: Reachable) -> Optional[str]:
    """Why an RDMAV_DRIVERS entry leads nowhere, or None (fine, or not verifiable: a note)."""
    paths = ctx.paths
    if not entry.startswith("/"):
        if any(name == entry for _, name, _ in r.providers):
            return None
        return f"{entry} (no lib{entry}-rdmav*.so in {', '.join(r.provider_dirs) or 'any provider directory'})"
    if any(paths.exists(h) for h in paths.glob(f"{entry}-rdmav*.so")):
        return None
    if paths.missing(entry) is None and not paths.exists(entry):
        ctx.notes.append(f"RDMAV_DRIVERS entry {entry}: not verifiable under the root; not checked")
        return None
    if paths.is_dir(entry):
        why = f"a directory: rdma-core appends -rdmav<N>.so to an absolute entry, so name the provider (e.g. {entry.rstrip('/')}/libmlx5)"
    else:
        why = "a file: rdma-core appends -rdmav<N>.so, drop that suffix" if paths.is_file(entry) else "nothing there"
    return f"{entry} ({why})"


@check("libraries", "lib.rdmav-drivers", current_env_too=True)
def rdmav_drivers(ctx: DoctorContext, emit: Emitter) -> None:
    """RDMAV_DRIVERS names providers that exist (rdma-core appends -rdmav<N>.so to each entry)."""
    r = reachable(ctx)
    bad = [b for e in ctx.env.split("RDMAV_DRIVERS", ":;") if (b := _bad_rdmav_entry(ctx, e, r))]
    if bad:
        emit(
            "lib.rdmav-drivers",
            "error",
            "RDMAV_DRIVERS points nowhere: " + "; ".join(bad[:6]),
            [ctx.env.evidence("RDMAV_DRIVERS")],
            "set RDMAV_DRIVERS to <dir>/libibverbs/libmlx5 next to the libibverbs that loads first, or unset it "
            "(seed 002: spawned children may not inherit it anyway)" + ctx.overlay_hint("RDMAV_DRIVERS"),
        )


@check("libraries", "env.preload-missing", current_env_too=True)
def preload_missing(ctx: DoctorContext, emit: Emitter) -> None:
    """LD_PRELOAD names files that exist (else ld.so preloads nothing and says so in every process)."""
    paths = ctx.paths
    missing = []
    for entry in ctx.env.split("LD_PRELOAD", ": \t"):
        if "/" in entry:
            state = paths.missing(paths.absolute(entry))
            if state is None:
                ctx.notes.append(f"LD_PRELOAD entry {entry}: not verifiable under the root; not checked")
            elif state:
                missing.append(entry)
        elif paths.captures_software and not any(paths.exists(f"{d}/{entry}") for d, _ in ctx.lib_search_dirs()):
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


@check("libraries", "env.home-missing", current_env_too=True)
def home_missing(ctx: DoctorContext, emit: Emitter) -> None:
    """*_HOME/_ROOT/_DIR variables of this stack name paths that exist (seed 002: /opt/deepep/… absent)."""
    for name in sorted(ctx.env.values):
        value = (ctx.env.get(name) or "").strip()
        if not PATH_VAR.match(name) or not value or ":" in value or not value.startswith("/"):
            continue
        state = ctx.paths.missing(value)
        if state is None:
            ctx.notes.append(f"{name}={value}: not verifiable under --root (not captured there, or a path of this machine); not checked")
        elif state:
            emit(
                "env.home-missing",
                "error",
                f"{name}={value} does not exist (seed 002: NVSHMEM_HOME/GDRCOPY_HOME named /opt/deepep paths absent in the pod)",
                [ctx.env.evidence(name)],
                f"point {name} at the real install (on GKE the libraries live under /usr/local/nvidia) or unset it",
            )
