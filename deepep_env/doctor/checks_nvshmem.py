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
from dataclasses import dataclass
from typing import Optional

from deepep_env.doctor.check import Emitter, check
from deepep_env.doctor.checks_deepep import extension_dynamic, extension_files, installed_deep_ep
from deepep_env.doctor.context import DoctorContext, local_site_dirs
from deepep_env.doctor.elf import Dynamic
from deepep_env.doctor.model import Evidence
from deepep_env.doctor.pythonpath import FoundModule, PathEntry, find_module, python_search_path
from deepep_env.base.hashing import file_sha256

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
        return file_sha256(la) == file_sha256(lb)
    except OSError:
        return False


@dataclass(frozen=True)
class HostLibrary:
    """Which libnvshmem_host deep_ep's extension needs, was built against, and will load."""

    ext: str  # the extension
    dyn: Dynamic  # its dynamic section
    soname: str  # the libnvshmem_host it needs
    built: Optional[str]  # the copy it was built against (None: cannot tell)
    built_why: str
    loads: Optional[str]  # the copy the process will load (None: none found)
    why: list[Evidence]


def _checked_package(ctx: DoctorContext) -> Optional[FoundModule]:
    """The deep_ep package whose extension is checked: the one Python imports, else (over the current
    environment alone) the env's own copy."""
    found = installed_deep_ep(ctx)
    if (found is None or found.kind != "package") and ctx.env.label == "current" and ctx.overlay_applied and ctx.meta is not None:
        # Outside `deepep-env run` a host python does not search the prefix; a launcher that puts
        # the env's site-packages on PYTHONPATH by hand (seed 000's unified-env.sh) still imports
        # this copy, without the LD_PRELOAD the overlay adds: check that process.
        found = find_module(ctx.paths, [PathEntry(sp, "the env's site-packages (on PYTHONPATH by hand)", True)
                                        for sp in local_site_dirs(ctx.meta.prefix)], "deep_ep")
    return found if found is not None and found.kind == "package" else None


def nvshmem_host(ctx: DoctorContext) -> Optional[HostLibrary]:
    """Which libnvshmem_host the checked deep_ep's extension needs, was built against and will load;
    None when it needs none (or there is no extension: the deepep family says so)."""
    return ctx.cached("nvshmem.host", lambda: _nvshmem_host(ctx))


def _nvshmem_host(ctx: DoctorContext) -> Optional[HostLibrary]:
    found = _checked_package(ctx)
    exts = extension_files(ctx, found.dir) if found is not None else []
    if not exts:
        return None  # deepep.extension-missing says so
    ext = exts[0]
    dyn = extension_dynamic(ctx, ext)
    if dyn is None:
        ctx.notes.append(f"{ext}: not a readable ELF shared object; which NVSHMEM it loads was not checked")
        return None
    soname = next((n for n in dyn.needed if n.startswith("libnvshmem_host")), None)
    if soname is None:
        return None  # deepep.extension-unlinked says so
    origin = os.path.dirname(ext)
    rpath = [] if dyn.runpath else [_expand(d, origin) for d in dyn.rpath]
    runpath = [_expand(d, origin) for d in dyn.runpath]
    built, built_why = _built_against(ctx, soname, rpath + runpath, "RUNPATH" if dyn.runpath else "RPATH")
    loads, why = _preloaded(ctx) or _loaded_by_torch(ctx, soname) or _first_on_loader_path(ctx, soname, rpath, runpath)
    ctx.info["nvshmem_host"] = {"loads": loads, "built_against": built}
    if loads is not None and built is None:
        ctx.notes.append(f"cannot tell which {soname} DeepEP was built against (no RUNPATH hit, none in the prefix)")
    return HostLibrary(ext, dyn, soname, built, built_why, loads, why)


def _built_against(ctx: DoctorContext, soname: str, dirs: list[str], kind: str) -> tuple[Optional[str], str]:
    """The copy found through the extension's RUNPATH (or RPATH), else the prefix's."""
    for d in dirs:
        cand = os.path.normpath(f"{d}/{soname}")
        if ctx.paths.exists(cand):
            return cand, f"found through the extension's {kind} {d}"
    if ctx.prefix and ctx.paths.exists(os.path.join(ctx.prefix, "lib", soname)):
        return os.path.join(ctx.prefix, "lib", soname), "the env prefix's NVSHMEM (the recipe builds DeepEP against it)"
    return None, ""


def _preloaded(ctx: DoctorContext) -> Optional[tuple[str, list[Evidence]]]:
    """An LD_PRELOAD of a libnvshmem_host: the loader maps it first."""
    for entry in ctx.env.split("LD_PRELOAD", ": \t"):
        if os.path.basename(entry).startswith("libnvshmem_host") and ctx.paths.exists(entry):
            return ctx.paths.absolute(entry), [ctx.env.evidence("LD_PRELOAD")]
    return None


def _loaded_by_torch(ctx: DoctorContext, soname: str) -> Optional[tuple[str, list[Evidence]]]:
    """pip PyTorch's NVSHMEM, loaded by `import torch` before the extension (reused by soname)."""
    entries = python_search_path(ctx)
    if not any(ctx.paths.is_file(f"{e.dir}/torch/__init__.py") for e in entries):
        return None
    for e in entries:
        for rel in COMPETING:
            cand = f"{e.dir.rstrip('/')}/{rel}/{soname}"
            if ctx.paths.exists(cand):
                return cand, [Evidence(value=f"loaded by `import torch` before deep_ep_cpp ({e.why})", file=cand),
                              ctx.env.evidence("LD_PRELOAD")]
    return None


def _first_on_loader_path(ctx: DoctorContext, soname: str, rpath: list[str], runpath: list[str]) -> tuple[Optional[str], list[Evidence]]:
    """The first ``soname`` in ld.so(8)'s order: RPATH, LD_LIBRARY_PATH, RUNPATH, ld.so.conf, defaults."""
    search = [(d, "the extension's RPATH") for d in rpath] + [(d, w) for d, w in ctx.lib_search_dirs() if w == "LD_LIBRARY_PATH"]
    search += [(d, "the extension's RUNPATH") for d in runpath]
    search += [(d, w) for d, w in ctx.lib_search_dirs() if w != "LD_LIBRARY_PATH"]
    for d, w in search:
        cand = os.path.normpath(f"{d}/{soname}")
        if ctx.paths.exists(cand):
            return cand, [Evidence(value=f"first {soname} on the loader's path ({w})", file=cand)]
    return None, []


# current_env_too: when `deepep-env run` preloads the env's copy, a launcher that bypasses it still
# loads pip torch's NVSHMEM first (seed 000's hand-written env script) — reported as info.
@check("nvshmem", "nvshmem.host-unresolved", current_env_too=True)
def host_library_resolves(ctx: DoctorContext, emit: Emitter) -> None:
    """Some libnvshmem_host satisfies the extension's NEEDED entry on the loader's path."""
    lib = nvshmem_host(ctx)
    if lib is None or lib.loads is not None:
        return
    dyn = lib.dyn
    emit(
        "nvshmem.host-unresolved",
        "error",
        f"{os.path.basename(lib.ext)} needs {lib.soname} and nothing on the loader's path provides it: `import deep_ep` fails",
        [Evidence(value="NEEDED " + ", ".join(dyn.needed) + f"; RUNPATH {':'.join(dyn.runpath) or '-'}; RPATH {':'.join(dyn.rpath) or '-'}",
                  file=lib.ext),
         ctx.env.evidence("LD_LIBRARY_PATH")],
        "reinstall the env so its NVSHMEM is in <prefix>/lib, or LD_PRELOAD the NVSHMEM DeepEP was built against",
    )


@check("nvshmem", "nvshmem.host-mismatch", current_env_too=True)
def host_library_is_the_built_one(ctx: DoctorContext, emit: Emitter) -> None:
    """The libnvshmem_host that loads is the one deep_ep_cpp was built against (field notes §3)."""
    lib = nvshmem_host(ctx)
    if lib is None or lib.loads is None or lib.built is None or same_file(ctx, lib.loads, lib.built):
        return
    emit(
        "nvshmem.host-mismatch",
        "error",
        f"the process will load {lib.loads}, but {os.path.basename(lib.ext)} was built against {lib.built}: NVSHMEM device "
        "code and host library from different builds hang internode (field notes §3)",
        lib.why + [Evidence(value=lib.built_why, file=lib.built)],
        f"LD_PRELOAD={lib.built} (what `deepep-env run` sets when another NVSHMEM can load first), or remove the other copy",
    )
