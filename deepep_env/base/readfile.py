"""The one bounded reader: every file the tool reads comes through here.

Specs, pixi.toml, pixi.lock, sources.toml, recipes, build manifests, repodata, doctor's JSON and the
host files under a probed root. A file is read only when it is a regular file of bounded size:

- opened with ``O_NONBLOCK``, so a FIFO returns at once instead of waiting for a writer;
- checked with ``fstat`` on the opened descriptor (not a ``stat`` before the open, which a swapped
  symlink could slip past): a directory, FIFO, socket or device (``/dev/zero``) is refused;
- read up to a size cap, and refused when it grows past it while being read;
- decoded as UTF-8 (text readers), the offending byte and line named.

Two layers: :func:`read_regular` raises ``OSError`` (the probes treat an unreadable host file as
absent), the rest raise one-line :class:`~deepep_env.base.errors.UserError` naming the file, what it is
and what would be accepted. Stdlib only (the activate fast path imports this).
"""
from __future__ import annotations

import errno
import os
import stat
from typing import Any, Optional, Union

from deepep_env.base.errors import UserError

PathLike = Union[str, "os.PathLike[str]"]

MAX_BYTES = 64 << 20          # the default cap: locks, JSON reports, anything not listed below
MAX_REPODATA_BYTES = 1 << 30  # a local mirror of conda-forge's linux-64 repodata.json is ~250 MB
MAX_CONFIG_BYTES = 4 << 20    # specs, pixi.toml, catalogs, recipes, manifests: hand-sized files

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def kind_of(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    for test, words in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return words
    return "something else"


class NotRegular(OSError):
    """An ``OSError`` for a path that is there but is not a regular file (``kind``: in words)."""

    def __init__(self, kind: str, path: str) -> None:
        super().__init__(errno.EISDIR if kind == "a directory" else errno.EINVAL, kind, path)
        self.kind = kind


class TooLarge(OSError):
    def __init__(self, size: int, limit: int, path: str) -> None:
        super().__init__(errno.EFBIG, f"{size} bytes or more", path)
        self.size, self.limit = size, limit


def open_regular(path: PathLike, flags: int = 0) -> int:
    """A read-only descriptor of a regular file, never blocking; ``OSError`` (:class:`NotRegular`)
    for anything else."""
    fd = os.open(path, _FLAGS | flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(kind_of(mode), os.fspath(path))
    except OSError:
        os.close(fd)
        raise
    return fd


def read_fd(fd: int, limit: int, name: str) -> bytes:
    """At most ``limit`` bytes of ``fd`` (closed here); :class:`TooLarge` past it."""
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise TooLarge(size, limit, name)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > limit:  # grew while we read
                raise TooLarge(total, limit, name)
            chunks.append(chunk)
    finally:
        os.close(fd)


def present(path: PathLike) -> bool:
    """Whether anything is at ``path`` (a FIFO, a directory, a dangling link too): a check that
    decides between "missing" and "read it" uses this, so the reader says what a non-file is
    instead of the caller calling it missing."""
    return os.path.lexists(path)


def read_regular(path: PathLike, limit: int = MAX_BYTES, flags: int = 0) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; ``OSError`` for anything else."""
    return read_fd(open_regular(path, flags), limit, os.fspath(path))


def as_user_error(exc: OSError, path: PathLike, what: str = "file", accepted: Optional[str] = None,
                  missing: Optional[str] = None) -> UserError:
    """The one line for a read that failed with ``exc``."""
    if isinstance(exc, TooLarge):
        return UserError(f"{what} is {exc.size} bytes or more", file=os.fspath(path), accepted=f"at most {exc.limit} bytes")
    if isinstance(exc, NotRegular):
        return UserError(f"{what} is {exc.kind}, not a regular file", file=os.fspath(path), accepted=accepted or "a regular file")
    if isinstance(exc, FileNotFoundError):
        return UserError(missing or f"{what} not found", file=os.fspath(path), accepted=accepted)
    reason = exc.strerror or type(exc).__name__
    return UserError(f"cannot read {what}: {reason}", file=os.fspath(path), accepted=accepted or "a readable regular file")


def read_bytes(path: PathLike, *, what: str = "file", accepted: Optional[str] = None,
               missing: Optional[str] = None, limit: int = MAX_BYTES) -> bytes:
    """The bytes of ``path``, or one-line :class:`UserError` (``what`` names the file's role:
    "spec", "pixi.toml"…; ``missing`` replaces the message for a file that does not exist)."""
    try:
        return read_regular(path, limit)
    except OSError as exc:
        raise as_user_error(exc, path, what, accepted, missing) from None


def decode(raw: bytes, path: PathLike, *, what: str = "file", accepted: Optional[str] = None) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise UserError(f"{what} is not UTF-8 (byte {exc.start})", file=os.fspath(path), line=line,
                        accepted=accepted or "UTF-8 text") from None


def read_text(path: PathLike, *, what: str = "file", accepted: Optional[str] = None,
              missing: Optional[str] = None, limit: int = MAX_BYTES) -> str:
    """The UTF-8 text of ``path`` (see :func:`read_bytes`)."""
    raw = read_bytes(path, what=what, accepted=accepted, missing=missing, limit=limit)
    return decode(raw, path, what=what, accepted=accepted)



def _refusal(exc: OSError, path: PathLike, what: str, accepted: Optional[str]) -> UserError:
    """The one line of :func:`read_bounded` and :func:`read_tail` (records, node reports, test logs)."""
    head = f"{what} " if what else ""
    if isinstance(exc, NotRegular):
        return UserError("not a regular file", file=os.fspath(path), accepted=accepted)
    if isinstance(exc, TooLarge):
        return UserError(f"{head}larger than {exc.limit} bytes", file=os.fspath(path),
                         accepted=f"a file up to {exc.limit} bytes")
    return UserError(f"cannot read{' ' + what if what else ''}: {exc.strerror or exc}", file=os.fspath(path),
                     accepted=accepted)


def read_bounded(path: PathLike, limit: int, *, what: str = "", accepted: Optional[str] = None) -> bytes:
    """A regular file's bytes, at most ``limit``, the file itself (a symlink is not followed:
    ``O_NOFOLLOW``); a FIFO, device, directory, link or larger file is one-line :class:`UserError`
    ("not a regular file", "larger than N bytes"). For files others hand in: test records, node reports."""
    try:
        return read_regular(path, limit, getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise _refusal(exc, path, what, accepted) from None


def read_tail(path: PathLike, limit: int, *, what: str = "", accepted: Optional[str] = None) -> bytes:
    """The last ``limit`` bytes of a regular file of any size (a test's log); anything that is not
    a regular file is one-line :class:`UserError`."""
    try:
        fd = open_regular(path)
    except OSError as exc:
        raise _refusal(exc, path, what, accepted) from None
    try:
        os.lseek(fd, max(0, os.fstat(fd).st_size - limit), os.SEEK_SET)
        chunks: list[bytes] = []
        left = limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


MAX_JSON_DEPTH = 64           # the deepest nesting any file the tool reads needs is under 10


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):   # 1e999: valid JSON text, but Infinity once read
        raise ValueError(f"{text[:40]} is not a finite number")
    return value


def json_depth(value: Any, limit: int) -> int:
    """How deeply ``value``'s lists and objects nest (0 for a scalar), level by level without recursion;
    the walk stops once it is past ``limit``."""
    depth, level = 0, [value] if isinstance(value, (dict, list)) else []
    while level and depth <= limit:
        depth += 1
        level = [x for v in level for x in (v.values() if isinstance(v, dict) else v) if isinstance(x, (dict, list))]
    return depth


def parse_json(text: str, path: PathLike, *, accepted: Optional[str] = None,
               max_depth: Optional[int] = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` made safe for what others wrote: NaN and Infinity (which Python accepts and no
    JSON reader does) refused, nesting past ``max_depth`` refused (deeper data raised RecursionError
    in whatever printed or re-encoded it), every failure one line naming the file. ``max_depth=None``:
    no walk (repodata, machine-written and up to 1 GiB: the walk would cost seconds; json's own
    recursion guard still ends in one line)."""
    import json

    try:
        data = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise UserError(f"not valid JSON ({exc.msg} at line {exc.lineno})", file=os.fspath(path), line=exc.lineno,
                        accepted=accepted) from None
    except (ValueError, RecursionError) as exc:  # NaN, an int past Python's digit limit, nesting past the stack
        why = str(exc) if isinstance(exc, ValueError) else "nested too deeply"
        raise UserError(f"not valid JSON ({why})", file=os.fspath(path), accepted=accepted) from None
    if max_depth is not None and json_depth(data, max_depth) > max_depth:
        raise UserError(f"not valid JSON here (nested more than {max_depth} deep)", file=os.fspath(path),
                        accepted=accepted)
    return data


def read_json(path: PathLike, *, what: str = "file", accepted: Optional[str] = None,
              missing: Optional[str] = None, limit: int = MAX_BYTES, max_depth: Optional[int] = MAX_JSON_DEPTH) -> Any:
    """The parsed JSON of ``path`` (:func:`parse_json`); malformed JSON is one line with its position."""
    text = read_text(path, what=what, accepted=accepted or "a UTF-8 JSON file", missing=missing, limit=limit)
    return parse_json(text, path, accepted=accepted, max_depth=max_depth)


def parse_toml(text: str, path: PathLike, *, accepted: Optional[str] = "TOML 1.0") -> dict[str, Any]:
    """``tomllib.loads`` with its errors as one line (the line number kept)."""
    import re
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise UserError(f"malformed TOML: {exc}", file=os.fspath(path), line=int(m.group(1)) if m else None,
                        accepted=accepted) from None
    except RecursionError:  # tomllib recurses per nested array/inline table ([[[[...]]]])
        raise UserError("malformed TOML: arrays or inline tables nested too deeply", file=os.fspath(path),
                        accepted=accepted) from None


def read_toml(path: PathLike, *, what: str = "file", accepted: Optional[str] = None,
              missing: Optional[str] = None, limit: int = MAX_CONFIG_BYTES) -> dict[str, Any]:
    """The parsed TOML of ``path``."""
    text = read_text(path, what=what, accepted=accepted or "a UTF-8 TOML file", missing=missing, limit=limit)
    return parse_toml(text, path)


__all__ = ["MAX_BYTES", "MAX_CONFIG_BYTES", "MAX_JSON_DEPTH", "MAX_REPODATA_BYTES", "NotRegular", "TooLarge", "as_user_error", "decode",
           "json_depth", "kind_of", "open_regular", "parse_json", "parse_toml", "present", "read_bounded", "read_bytes", "read_fd", "read_json", "read_regular",
           "read_tail", "read_text", "read_toml"]
