"""Write files and directories so that a reader never sees half of them.

Everything the tool writes goes through here: a temporary sibling, fsync, then ``os.replace``.
A file the user names on the command line (``--svg``, ``--html``, ``-o``) is checked first by
:func:`output_file`, before the command does its work, so a directory, ``/proc`` or an empty name is
one line instead of a traceback from the writer (issue 39.7).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Iterator

from deepep_env.base.errors import UserError
from deepep_env.base.readfile import kind_of


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


OUTPUT_ACCEPTED = "a file path in a folder this user can write (not a folder, a device or under /proc)"
DIR_ACCEPTED = "a folder this user can write (not a file, a device or under /proc)"


def output_file(raw: "str | Path", *, field: str) -> Path:
    """The file a command writes where the user said (``field``: the option), checked before the
    command's work: not empty, not something other than a regular file, and its folder one this user
    can create a file in (:func:`_can_create_in`)."""
    text = str(raw)
    if not text.strip():
        raise UserError("an empty path names no file", field=field, accepted=OUTPUT_ACCEPTED)
    path = Path(text)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UserError(f"cannot use {text} ({exc.strerror or exc})", field=field, accepted=OUTPUT_ACCEPTED) from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise UserError(f"{text} is {kind_of(st.st_mode)}, not a file", field=field, accepted=OUTPUT_ACCEPTED)
    _can_create_in(path.absolute().parent, text, field, OUTPUT_ACCEPTED)
    return path


def output_dir(raw: "str | Path", *, field: str) -> Path:
    """As :func:`output_file`, for a folder a command writes files into (``export --all -o DIR``)."""
    text = str(raw)
    if not text.strip():
        raise UserError("an empty path names no folder", field=field, accepted=DIR_ACCEPTED)
    path = Path(text)
    if os.path.lexists(path) and not path.is_dir():
        what = ("a file" if path.is_file() else kind_of(os.stat(path).st_mode)) if path.exists() else "a link to nothing"
        raise UserError(f"{text} is {what}, not a folder", field=field, accepted=DIR_ACCEPTED)
    _can_create_in(path.absolute(), text, field, DIR_ACCEPTED)
    return path


def _nearest_existing(folder: Path) -> Path:
    """``folder``, or the nearest folder above it that exists (a link counts as existing)."""
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    return folder


def try_create_in(folder: Path) -> Path:
    """The folder a file would be created in — ``folder``, or the nearest one above it that exists (the
    writers make the rest) — after creating a file there and removing it at once: ``OSError`` when that
    fails (``os.access`` says yes to root under ``/proc``). Nothing is left behind either way."""
    folder = _nearest_existing(folder)
    fd, probe = tempfile.mkstemp(prefix=".deepep-env-probe.", dir=folder)
    os.close(fd)
    os.unlink(probe)
    return folder


def _can_create_in(folder: Path, text: str, field: str, accepted: str) -> None:
    """One line unless :func:`try_create_in` succeeds for ``folder``."""
    try:
        try_create_in(folder)
    except OSError as exc:
        folder = _nearest_existing(folder)
        why = "not a folder" if not folder.is_dir() else (exc.strerror or str(exc))
        raise UserError(f"cannot create {text}: {folder} takes no new file ({why})", field=field,
                        accepted=accepted) from None


def write_output(path: "str | Path", text: str, *, field: str) -> Path:
    """:func:`write_text` for a file the user named (checked by :func:`output_file` first); a write that
    still fails (the disk full, the folder gone meanwhile) is one line naming the file."""
    try:
        return write_text(output_file(path, field=field), text)
    except OSError as exc:
        raise UserError(f"cannot write {path} ({exc.strerror or exc})", field=field, accepted=OUTPUT_ACCEPTED) from None
