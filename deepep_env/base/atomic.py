"""Write files and directories so that a reader never sees half of them.

Everything the tool writes goes through here: a temporary sibling, fsync, then ``os.replace``.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator


def write_bytes(path: str | Path, data: bytes, mode: int = 0o644) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def write_text(path: str | Path, text: str, mode: int = 0o644) -> Path:
    return write_bytes(path, text.encode("utf-8"), mode)


@contextlib.contextmanager
def staged_dir(final: str | Path) -> Iterator[Path]:
    """Yield a temporary directory beside ``final``; on success it is renamed onto ``final``.

    On any exception the temporary directory is removed and ``final`` is untouched. If ``final``
    already exists (another writer won the race) the new copy is discarded: entries are immutable.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".partial", dir=final.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        os.rename(tmp, final)
    except OSError:
        if final.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            raise
