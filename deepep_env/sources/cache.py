"""The source cache: content-addressed, so a source is found by *what it is*, never where it came from.

Layout (docs/build-id.md §3)::

    <cache>/trees/<hex of tree_sha256>/...   an unpacked source tree (no VCS metadata)
    <cache>/patches/<hex of sha256>          a patch file, byte for byte
    <cache>/.tmp/                            scratch for downloads and unpacking (same filesystem)

An entry appears only after its content was hashed and matched the pin: it is unpacked into
``.tmp/``, hashed there, then renamed into place (one ``rename``, so a reader never sees half a
tree and a killed fetch leaves only scratch behind, which the next fetch sweeps:
:meth:`SourceCache.sweep`). Entries are immutable; if two fetchers race, the first rename wins and
the second copy is dropped (same rule as ``atomic.staged_dir``).
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import tarfile
import zlib
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from deepep_env.base.atomic import write_bytes
from deepep_env.base.errors import UserError
from deepep_env.base.hashing import tree_sha256
from deepep_env.formats.prefix import pid_alive


SCRATCH_MAX_AGE_S = 24 * 3600.0    # longer than any fetch's deadline (30 min) and git clone
_SCRATCH_PID = re.compile(r"[a-z]+-(\d+)-")


def _hex(digest: str) -> str:
    return digest.split(":", 1)[-1]


@dataclass(frozen=True)
class SourceCache:
    root: Path

    @property
    def trees(self) -> Path:
        return self.root / "trees"

    @property
    def patches(self) -> Path:
        return self.root / "patches"

    def scratch(self, prefix: str = "tmp-") -> Path:
        """A fresh scratch directory on the cache's filesystem (so moving in is one rename), named by
        this process (``<prefix><pid>-…``) so that :meth:`sweep` knows whose it is."""
        base = self.root / ".tmp"
        base.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=base))

    def sweep(self) -> list[Path]:
        """Remove the scratch of fetches that are gone (killed: SIGKILL, a lost machine): a folder whose
        process is not running, or older than :data:`SCRATCH_MAX_AGE_S` (its pid since reused, or
        named before scratch carried one). This process's own scratch is never touched."""
        base = self.root / ".tmp"
        removed: list[Path] = []
        for p in sorted(base.iterdir()) if base.is_dir() else ():
            m = _SCRATCH_PID.match(p.name)
            pid = int(m.group(1)) if m else None
            try:
                age = time.time() - p.lstat().st_mtime
            except OSError:
                continue
            if pid == os.getpid() or (age < SCRATCH_MAX_AGE_S and (pid is None or pid_alive(pid))):
                continue
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    p.unlink()
            removed.append(p)
        return removed

    def tree(self, digest: str) -> Optional[Path]:
        p = self.trees / _hex(digest)
        return p if p.is_dir() else None

    def patch(self, digest: str) -> Optional[Path]:
        p = self.patches / _hex(digest)
        return p if p.is_file() else None

    def add_tree(self, tree: Path, *, digest: Optional[str] = None, move: bool = False) -> tuple[str, Path]:
        """Put an (already verified) tree into the cache under its hash; returns (digest, path).

        ``tree`` must live under :meth:`scratch` when ``move`` is true (then it is renamed, not
        copied). ``digest`` is recomputed when not given.
        """
        digest = digest or tree_sha256(tree)
        final = self.trees / _hex(digest)
        if final.is_dir():
            if move:
                shutil.rmtree(tree, ignore_errors=True)
            return digest, final
        final.parent.mkdir(parents=True, exist_ok=True)
        if not move:
            tmp = self.scratch("copy-")
            dst = tmp / "tree"
            shutil.copytree(tree, dst, symlinks=True, ignore=shutil.ignore_patterns(".git", ".hg", ".svn"))
            tree = dst
        try:
            os.rename(tree, final)
        except OSError:
            if not final.is_dir():
                raise
            shutil.rmtree(tree, ignore_errors=True)  # another fetcher won the race; entries are immutable
        return digest, final

    def add_patch(self, data: bytes, digest: str) -> Path:
        final = self.patches / _hex(digest)
        if not final.is_file():
            write_bytes(final, data)
        return final


# --- archives -----------------------------------------------------------------------------------

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".tar.zst", ".tar", ".zip")


def is_archive(path: Path) -> bool:
    """An archive by its content, or by its name when the content cannot be read to the end (a
    truncated .tar.gz makes tarfile raise EOFError): :func:`unpack` then says what is wrong with it."""
    if not path.is_file():
        return False
    try:
        return tarfile.is_tarfile(path) or zipfile.is_zipfile(path)
    except (OSError, EOFError, tarfile.TarError, zlib.error):
        return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def _extract_zip(path: Path, dest: Path) -> None:
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            target = (dest / info.filename).resolve()
            if not str(target).startswith(str(dest.resolve())):
                raise UserError(f"refused to unpack {path.name}: member {info.filename!r} would land outside it "
                                "(extraction stopped, nothing kept)", file=path)
            mode = (info.external_attr >> 16) & 0o177777
            if mode and (mode & 0o170000) == 0o120000:  # symlink stored by Info-ZIP
                target.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(zf.read(info).decode(), target)
                continue
            zf.extract(info, dest)
            if mode & 0o111 and not info.is_dir():
                os.chmod(target, 0o755)


def unpack(archive: Path, dest: Path) -> Path:
    """Unpack ``archive`` into ``dest`` and return the source root: the single top-level directory
    when the archive has exactly one (GitHub/NVIDIA tarballs), else ``dest`` itself (``git archive``
    without ``--prefix``). Same rule as Nix's ``fetchzip``."""
    dest.mkdir(parents=True, exist_ok=True)
    if zipfile.is_zipfile(archive):
        try:
            _extract_zip(archive, dest)
        except (zipfile.BadZipFile, EOFError, OSError, zlib.error) as exc:
            raise UserError(f"cannot unpack {archive.name}: {exc or type(exc).__name__} (truncated or corrupt?)",
                            file=archive, accepted="a complete .tar.gz/.tar.xz/.zip of the upstream tree") from None
    else:
        try:
            with tarfile.open(archive) as tf:
                # "tar" filter: refuses absolute paths and members outside dest, keeps exec bits
                # (which tree_sha256 counts).
                tf.extractall(dest, filter="tar")
        except tarfile.FilterError as exc:   # a member outside the tree, an absolute path, a device
            raise UserError(f"refused to unpack {archive.name}: {exc} (extraction stopped, nothing kept)",
                            file=archive, accepted="an upstream source tarball whose members stay inside it") from None
        except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:   # truncated, corrupt, not gzip
            raise UserError(f"cannot unpack {archive.name}: {exc or type(exc).__name__} (truncated or corrupt?)",
                            file=archive, accepted="a complete .tar.gz/.tar.xz/.zip of the upstream tree") from None
    entries = [e for e in dest.iterdir() if e.name not in ("pax_global_header",)]
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
        return entries[0]
    return dest
