"""``file://`` target: a channel directory on a shared filesystem (NFS, Lustre) or local disk.

Files are copied in atomically (temp sibling + rename, ``deepep_env.base.atomic``), so a reader never
sees half a package; the touched subdirs are then indexed with rattler's ``index_fs`` in place.
"""
from __future__ import annotations

import contextlib
import os
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from deepep_env.base import atomic, progress, readfile
from deepep_env.base.errors import UserError
from deepep_env.base.hashing import file_sha256
from deepep_env.publish.common import classify, uploaded
from deepep_env.publish.model import LocalPackage, PublishReport
from deepep_env.publish.repodata import index_dir, listed, parse


def _read_index(channel: Path, subdir: str) -> dict[str, Any] | None:
    path = channel / subdir / "repodata.json"
    if not readfile.present(path):
        return None
    return parse(readfile.read_bytes(path, what="repodata", limit=readfile.MAX_REPODATA_BYTES), str(path))


# atomic.write_bytes's temp sibling of a package: ``.NAME.conda.XXXXXXXX.tmp``
_LEFTOVER = re.compile(r"\.(.+\.(?:conda|tar\.bz2))\.[A-Za-z0-9_]{8}\.tmp")
STALE_TMP_S = 600       # a copy in flight writes its temp file within seconds; one this old was killed


def _sweep_leftovers(channel: Path, subdirs: set[str], report: PublishReport) -> None:
    """Remove the temp copies a publish killed mid-copy left (issue 52.12: the next publish kept them in
    the channel, served with it): regular files of that name, untouched for :data:`STALE_TMP_S`."""
    now = time.time()
    for sd in sorted(subdirs):
        folder = channel / sd
        if not folder.is_dir():
            continue
        for entry in os.scandir(folder):
            if _LEFTOVER.fullmatch(entry.name) and entry.is_file(follow_symlinks=False) \
                    and now - entry.stat(follow_symlinks=False).st_mtime > STALE_TMP_S:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
                report.notes.append(f"removed {sd}/{entry.name}, left by a publish killed mid-copy")


def publish_dir(channel: Path, packages: list[LocalPackage], report: PublishReport) -> PublishReport:
    channel.mkdir(parents=True, exist_ok=True)
    _sweep_leftovers(channel, {p.subdir for p in packages} | {"noarch"}, report)
    indexes = {sd: _read_index(channel, sd) for sd in {p.subdir for p in packages}}
    todo, present = classify(packages, lambda p: listed(indexes[p.subdir], p.filename),
                             str(channel))
    for p in todo:
        dest = channel / p.subdir / p.filename
        if not (dest.is_file() and dest.stat().st_size == p.size
                and file_sha256(dest) == p.sha256):
            # Packages are tens to hundreds of MB: fine to hold in memory on a build host, and
            # atomic.write_bytes gives the temp-then-rename guarantee readers rely on.
            shown = progress.current()
            shown.start(p.filename, p.size)
            atomic.write_bytes(dest, p.path.read_bytes())
            shown.advance(p.filename, p.size)
            shown.finish(p.filename)
    touched = sorted({p.subdir for p in todo})
    if not (channel / "noarch" / "repodata.json").is_file():
        touched = sorted(set(touched) | {"noarch"})
    if touched:
        index_dir(channel, touched)
        # What rattler wrote must list what we uploaded: a silent skip would publish nothing.
        for p in todo:
            if listed(_read_index(channel, p.subdir), p.filename) is None:
                raise UserError("indexing did not list the uploaded package", file=channel / p.key)
    report.packages = sorted(present + uploaded(todo), key=lambda o: o.key)
    report.indexed = touched
    return report


def channel_path(url: str) -> Path:
    if url.startswith("file:"):
        parts = urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise UserError(f"file URL with a host ({parts.netloc}) is not supported", field="--to",
                            accepted="file:///absolute/path")
        return Path(unquote(parts.path))
    return Path(url).expanduser().resolve()
