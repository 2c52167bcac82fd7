"""Local conda channels: the project's channel (what ``lock`` and ``install`` read) and the small
per-build channel each node is built against.

Why a per-build channel: the project channel keeps every build ever published, so a recipe that
asks for ``liba`` (without our exact pin) could be solved against an *older* build of ``liba``.
Each node is therefore built against a fresh channel holding exactly the outputs of its graph
dependencies (transitively) — the dependency a build id names is the one the build sees.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from deepep_env.base.atomic import write_bytes, write_text
from deepep_env.base.errors import UserError
from deepep_env.base.hashing import digest, file_sha256
from deepep_env.base.rattler_errors import rattler_errors
from deepep_env.base.readfile import MAX_REPODATA_BYTES, read_json


# Written by rattler's indexer besides repodata.json; we do not write them (zstd at rattler's level
# costs 0.3–2 s per call, measured, which would dominate a no-op rebuild), so any left by an
# earlier indexer are stale and must go: readers prefer them over repodata.json.
_DERIVED = ("repodata.json.zst", "repodata_shards.msgpack.zst", "repodata.json.bz2")


def index(root: Path) -> None:
    """(Re)write ``repodata.json`` for every subdir of ``root`` with rattler's indexer."""
    import rattler.index

    (root / "noarch").mkdir(parents=True, exist_ok=True)  # a channel always has noarch/
    with rattler_errors("could not index channel: {error}", file=root, first_line=True,
                        accepted="a channel folder holding only valid .conda/.tar.bz2 files"):
        asyncio.run(rattler.index.index_fs(root, write_zst=False, write_shards=False))
    for sub in root.iterdir():
        if sub.is_dir() and (sub / "repodata.json").is_file():
            for name in _DERIVED:
                with contextlib.suppress(FileNotFoundError):
                    (sub / name).unlink()
            shutil.rmtree(sub / "shards", ignore_errors=True)


def _copy_sha(path: Path) -> "str | None":
    """``sha256:…`` of a channel copy that is a file of its own; what else it is (a link, a hard link
    shared with another name, not a file), or None when there is nothing."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if os.path.islink(path):
        return "a symbolic link"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_nlink > 1:
        return "a hard link shared with another file"
    return file_sha256(path)


def _indexed_sha(root: Path, rel: str) -> "str | None":
    """The sha256 (hex) the channel's repodata.json records for ``rel``; None when it records none."""
    sub, _, name = rel.partition("/")
    rd = root / sub / "repodata.json"
    if not rd.is_file():
        return None
    data = read_json(rd, what="repodata", limit=MAX_REPODATA_BYTES)
    rec = next((data[k][name] for k in ("packages.conda", "packages") if isinstance(data.get(k), dict)
                and isinstance(data[k].get(name), dict)), None)
    return str(rec.get("sha256")) if rec and rec.get("sha256") else None


def forget(root: Path, rel: str) -> None:
    """Drop ``rel``'s record from its subdir's repodata.json. rattler's indexer keeps the record of a
    file name it has seen (measured: a file replaced under the same name kept its old sha256), so a
    replaced file must be forgotten first or the channel would describe bytes it no longer holds."""
    sub, _, name = rel.partition("/")
    rd = root / sub / "repodata.json"
    if not rd.is_file():
        return
    data = read_json(rd, what="repodata", limit=MAX_REPODATA_BYTES, max_depth=None)
    if any(name in (data.get(k) or {}) for k in ("packages", "packages.conda")):
        for k in ("packages", "packages.conda"):
            (data.get(k) or {}).pop(name, None)
        write_text(rd, json.dumps(data, indent=2, sort_keys=True))


@dataclass(frozen=True)
class Channel:
    root: Path
    notes: list = field(default_factory=list, compare=False)   # copies found damaged and replaced
    restored: list = field(default_factory=list, compare=False)   # their channel paths (build: "restored")

    def ensure(self) -> "Channel":
        if not (self.root / "noarch" / "repodata.json").is_file():
            index(self.root)
        return self

    def has(self, rel: str, sha256: str) -> bool:
        p = self.root / rel
        return p.is_file() and file_sha256(p) == sha256

    def put(self, src: Path, rel: str, sha256: str) -> bool:
        """Put one package file in (atomically); True when the channel changed. A different file
        under the same name (a generic recipe whose build string does not carry our id) is
        replaced: the channel shows the build of the current graph. A copy that is damaged, a link
        (to the store's file or anywhere) or that the index describes with another sha256 is
        replaced too, and named in :attr:`notes` and :attr:`restored` (issue 39.11: never "cached")."""
        dst = self.root / rel
        have = _copy_sha(dst)
        if have == sha256:
            if _indexed_sha(self.root, rel) in (None, sha256[7:]):
                return False
            forget(self.root, rel)
            self._restored(rel, f"the channel's index described {rel} with another sha256 than its file's "
                                f"(the store's, {sha256[7:23]}…): indexed again")
            return True
        # A copy, never a hard link: a file shared by store and channel is one file, so damage to
        # either (an editor, a tool writing in place) would reach both and then every publish.
        # The copy is checked against the store's recorded sha256 before it is put in place.
        data = src.read_bytes()
        if digest(data) != sha256:
            raise UserError(f"{src} changed while it was being published (sha256 is not {sha256[:23]}…)",
                            file=src, accepted="rerun `deepep-env build`: the store re-verifies its entries")
        if os.path.lexists(dst):
            forget(self.root, rel)
            if dst.is_dir() and not dst.is_symlink():
                shutil.rmtree(dst)
        write_bytes(dst, data)
        if have is not None:
            what = f"sha256 {have[7:23]}…" if have.startswith("sha256:") else have
            self._restored(rel, f"the channel's {rel} was not the store's file ({what}, the store records "
                                f"{sha256[7:23]}…): replaced by a copy of the verified store entry")
        return True

    def _restored(self, rel: str, note: str) -> None:
        self.notes.append(note)
        self.restored.append(rel)

    def url(self) -> str:
        return self.root.resolve().as_uri()


def make_build_channel(root: Path, files: Iterable[tuple[Path, str]]) -> Channel:
    """A throwaway channel with exactly ``files`` ([(package file, "subdir/name.conda")])."""
    if root.exists():
        shutil.rmtree(root)
    (root / "noarch").mkdir(parents=True)
    for src, rel in files:
        dst = root / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, dst)  # store entries are immutable: a hard link is a safe, free copy
        except OSError:
            shutil.copy2(src, dst)
    index(root)
    return Channel(root)
