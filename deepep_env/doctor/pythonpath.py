"""Which ``deep_ep`` the env's Python would import — found without starting Python or torch.

The search path is what the interpreter builds (site.py, importlib): PYTHONPATH entries first (in
order), then the interpreter's own site-packages — the prefix's for a conda Python, the venv's for a
host Python — each followed by the directories its ``*.pth`` files add. A package is
``<dir>/deep_ep/__init__.py``; a module ``<dir>/deep_ep.py`` or an extension; a bare ``deep_ep/``
directory is a namespace portion, used only when no regular package follows (PEP 420). This is
``importlib.machinery.PathFinder.find_spec`` over that list (tests/doctor/test_doctor_deepep.py compares
the two), done through the doctor's path view so it also works on a captured tree.

Seed 000 §4 problem 1 is why it matters: PR #466 was in a source tree, but the module Python
imported was another copy.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from deepep_env.doctor.context import DoctorContext, PathView, local_site_dirs, site_dirs_of_python

MODULE_SUFFIXES = (".cpython-3*.so", ".abi3.so", ".so", ".py", ".pyc")


@dataclass(frozen=True)
class PathEntry:
    dir: str
    why: str
    site: bool  # a site directory: its .pth files are processed


@dataclass(frozen=True)
class FoundModule:
    name: str
    kind: str  # "package" | "module" | "namespace"
    origin: Optional[str]  # the file Python would execute (None for a namespace package)
    dir: str  # the package directory (or the module's directory)
    entry: PathEntry


def python_search_path(ctx: DoctorContext) -> list[PathEntry]:
    paths = ctx.paths
    entries: list[PathEntry] = []
    pp_origin = ctx.env.origin("PYTHONPATH")
    for d in ctx.env.split("PYTHONPATH", ":"):
        entries.append(PathEntry(paths.absolute(d), f"PYTHONPATH [{pp_origin}]", False))
    meta = ctx.meta
    if meta is not None:
        if meta.python_provider == "conda":
            sps = [meta.site_packages()] if meta.site_packages() else local_site_dirs(meta.prefix)
            for sp in sps:
                entries.append(PathEntry(sp, "site-packages of the env's own python (in the prefix)", True))
        else:
            exe = meta.python_executable
            for sp in site_dirs_of_python(paths, exe):
                entries.append(PathEntry(sp, f"site-packages of the host python {exe}", True))
    elif ctx.prefix:
        for sp in local_site_dirs(ctx.prefix):
            entries.append(PathEntry(sp, "site-packages of the prefix", True))
    out: list[PathEntry] = []
    seen: set[str] = set()
    for e in entries:
        if e.dir in seen:
            continue
        seen.add(e.dir)
        out.append(e)
        if e.site:
            for extra in pth_dirs(paths, e.dir):
                if extra not in seen:
                    seen.add(extra)
                    out.append(PathEntry(extra, f"a .pth file in {e.dir}", False))
    return out


def pth_dirs(paths: PathView, site: str) -> list[str]:
    """Directories ``*.pth`` files in ``site`` add (site.addpackage: plain lines; ``import`` lines
    run code and are not followed)."""
    out: list[str] = []
    for pth in paths.glob(f"{site}/*.pth"):
        text = paths.read_text(pth, 1 << 16) or ""
        for line in text.splitlines():
            line = line.rstrip()
            if not line or line.startswith("#") or line.startswith(("import ", "import\t")):
                continue
            d = line if os.path.isabs(line) else os.path.normpath(os.path.join(site, line))
            if paths.is_dir(d) and d not in out:
                out.append(d)
    return out


def find_module(paths: PathView, entries: list[PathEntry], name: str) -> Optional[FoundModule]:
    namespace: Optional[FoundModule] = None
    for e in entries:
        pkg = f"{e.dir.rstrip('/')}/{name}"
        for init in ("__init__.py", "__init__.pyc"):
            if paths.is_file(f"{pkg}/{init}"):
                return FoundModule(name, "package", f"{pkg}/{init}", pkg, e)
        for suffix in MODULE_SUFFIXES:
            hits = [h for h in paths.glob(f"{e.dir.rstrip('/')}/{name}{suffix}") if paths.is_file(h)]
            if hits:
                return FoundModule(name, "module", hits[0], e.dir, e)
        if namespace is None and paths.is_dir(pkg):
            namespace = FoundModule(name, "namespace", None, pkg, e)
    return namespace
