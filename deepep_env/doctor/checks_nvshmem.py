"""Family ``nvshmem``: the NVSHMEM host library that will load is the one DeepEP was built against.

DeepEP's extension links NVSHMEM's device code statically and ``libnvshmem_host.so.3``
dynamically; a device/host version mismatch hangs internode (field notes §3). pip PyTorch depends
on ``nvidia-nvshmem-cu1x`` and loads its ``libnvshmem_host.so.3`` when ``import torch`` runs —
before ``deep_ep_cpp`` — and the loader then reuses that copy for the extension by soname,
whatever the extension's RUNPATH says. Only an ``LD_PRELOAD`` of the env's copy wins over it.

Which copy loads is modelled on ld.so(8): LD_PRELOAD, then a copy already loaded (pip torch's),
then DT_RPATH (without DT_RUNPATH), LD_LIBRARY_PATH, DT_RUNPATH, ld.so.conf, the default dirs.
"""
from __future__ import annotations

import os
from typing import Optional

from deepep_env.doctor.checks_deepep import extension_files, locate_deep_ep
from deepep_env.doctor.context import DoctorContext
from deepep_env.doctor.elf import read_dynamic_path
from deepep_env.doctor.model import Evidence
from deepep_env.doctor.pythonpath import python_search_path
from deepep_env.doctor.check import Emitter, check

IDS = ("nvshmem.host-mismatch", "nvshmem.host-unresolved")
# Where another NVSHMEM host library hides in a Python environment (pip wheels).
COMPETING = ("nvidia/nvshmem/lib", "torch/lib")


def _expand(d: str, origin: str) -> str:
    return d.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)


def same_file(ctx: DoctorContext, a: str, b: str) -> bool:
    ra, rb = ctx.paths.realpath(a), ctx.paths.realpath(b)
    if ra is not None and ra == rb:
        return True
    la, lb = ctx.paths.open_local(a), ctx.paths.open_local(b)
    if not la or not lb:
        return False
    try:
        if os.path.getsize(la) != os.path.getsize(lb):
            return False
        from deepep_env.hashing import file_sha256

        return file_sha256(la) == file_sha256(lb)
    except OSError:
        return False


# current_env_too: when `deepep-env run` preloads the env's copy, a launcher that bypasses it still
# loads pip torch's NVSHMEM first (seed 000's hand-written env script) — reported as info.
@check("nvshmem", *IDS, current_env_too=True)
def check_nvshmem(ctx: DoctorContext, emit: Emitter) -> None:
    """The libnvshmem_host that loads is the one deep_ep_cpp was built against (field notes §3)."""
    if ctx.prefix and ctx.meta is None:
        return
    found = locate_deep_ep(ctx)
    if (found is None or found.kind != "package") and ctx.env.label == "current" and ctx.overlay_applied and ctx.meta is not None:
        # Outside `deepep-env run` a host python does not search the prefix; a launcher that puts
        # the env's site-packages on PYTHONPATH by hand (seed 000's unified-env.sh) still imports
        # this copy, without the LD_PRELOAD the overlay adds: check that process.
        from deepep_env.doctor.context import local_site_dirs
        from deepep_env.doctor.pythonpath import PathEntry, find_module

        found = find_module(ctx.paths, [PathEntry(sp, "the env's site-packages (on PYTHONPATH by hand)", True)
                                        for sp in local_site_dirs(ctx.meta.prefix)], "deep_ep")
    if found is None or found.kind != "package":
        return
    exts = extension_files(ctx, found.dir)
    if not exts:
        return  # deepep.extension-missing says so
    ext = exts[0]
    local = ctx.paths.open_local(ext)
    dyn = read_dynamic_path(local) if local else None
    if dyn is None:
        ctx.notes.append(f"{ext}: not a readable ELF shared object; which NVSHMEM it loads was not checked")
        return
    soname = next((n for n in dyn.needed if n.startswith("libnvshmem_host")), None)
    if soname is None:
        return  # deepep.extension-unlinked says so
    origin = os.path.dirname(ext)
    rpath = [] if dyn.runpath else [_expand(d, origin) for d in dyn.rpath]
    runpath = [_expand(d, origin) for d in dyn.runpath]

    # -- what it was built against ------------------------------------------------------------
    built: Optional[str] = None
    built_why = ""
    for d in rpath + runpath:
        cand = os.path.normpath(f"{d}/{soname}")
        if ctx.paths.exists(cand):
            built, built_why = cand, f"found through the extension's {'RUNPATH' if dyn.runpath else 'RPATH'} {d}"
            break
    if built is None and ctx.prefix and ctx.paths.exists(os.path.join(ctx.prefix, "lib", soname)):
        built, built_why = os.path.join(ctx.prefix, "lib", soname), "the env prefix's NVSHMEM (the recipe builds DeepEP against it)"

    # -- what will load ---------------------------------------------------------------------------
    loads: Optional[str] = None
    why: list[Evidence] = []
    for entry in ctx.env.split("LD_PRELOAD", ": \t"):
        if os.path.basename(entry).startswith("libnvshmem_host") and ctx.paths.exists(entry):
            loads = ctx.paths.absolute(entry)
            why = [ctx.env.evidence("LD_PRELOAD")]
            break
    if loads is None:
        entries = python_search_path(ctx)
        has_torch = any(ctx.paths.is_file(f"{e.dir}/torch/__init__.py") for e in entries)
        for e in entries if has_torch else []:
            for rel in COMPETING:
                cand = f"{e.dir.rstrip('/')}/{rel}/{soname}"
                if ctx.paths.exists(cand):
                    loads = cand
                    why = [Evidence(value=f"loaded by `import torch` before deep_ep_cpp ({e.why})", file=cand),
                           ctx.env.evidence("LD_PRELOAD")]
                    break
            if loads:
                break
    if loads is None:
        search = [(d, "the extension's RPATH") for d in rpath] + [(d, w) for d, w in ctx.lib_search_dirs() if w == "LD_LIBRARY_PATH"]
        search += [(d, "the extension's RUNPATH") for d in runpath]
        search += [(d, w) for d, w in ctx.lib_search_dirs() if w != "LD_LIBRARY_PATH"]
        for d, w in search:
            cand = os.path.normpath(f"{d}/{soname}")
            if ctx.paths.exists(cand):
                loads = cand
                why = [Evidence(value=f"first {soname} on the loader's path ({w})", file=cand)]
                break
    ctx.info["nvshmem_host"] = {"loads": loads, "built_against": built}
    if loads is None:
        emit(
            "nvshmem.host-unresolved",
            "error",
            f"{os.path.basename(ext)} needs {soname} and nothing on the loader's path provides it: `import deep_ep` fails",
            [Evidence(value="NEEDED " + ", ".join(dyn.needed) + f"; RUNPATH {':'.join(dyn.runpath) or '-'}; RPATH {':'.join(dyn.rpath) or '-'}", file=ext),
             ctx.env.evidence("LD_LIBRARY_PATH")],
            "reinstall the env so its NVSHMEM is in <prefix>/lib, or LD_PRELOAD the NVSHMEM DeepEP was built against",
        )
        return
    if built is None:
        ctx.notes.append(f"cannot tell which {soname} DeepEP was built against (no RUNPATH hit, none in the prefix)")
        return
    if not same_file(ctx, loads, built):
        emit(
            "nvshmem.host-mismatch",
            "error",
            f"the process will load {loads}, but {os.path.basename(ext)} was built against {built}: NVSHMEM device code and "
            "host library from different builds hang internode (field notes §3)",
            why + [Evidence(value=built_why, file=built)],
            f"LD_PRELOAD={built} (what `deepep-env run` sets when another NVSHMEM can load first), or remove the other copy",
        )
