"""Every copy of a package file is checked before it is used.

The local channel's files are copies of build-store entries (docs/build-id.md §7). A copy can be
damaged after it was made (a flipped byte, an editor, a tool writing in place), so each user of one
hashes it first and compares the hash with what the store and the build manifest recorded:

- ``build`` calls a package cached only once its channel copy matches the verified store entry
  (``Channel.put`` re-copies it otherwise, with a note);
- ``publish`` refuses, before anything is uploaded, a file that does not match the build manifest
  and the store (:func:`check_copy`);
- ``lock`` records the sha256 of the file it hashed, never the one the channel's index claims
  (:func:`file_digests`), and refuses a file that does not match the store.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import NamedTuple, Optional

from deepep_env.base.errors import UserError
from deepep_env.base.readfile import open_regular
from deepep_env.builder.store import Store


class Digests(NamedTuple):
    sha256: str      # hex, no algorithm prefix
    md5: str         # hex
    size: int


def bare(sha: str) -> str:
    """``sha256:<hex>`` or ``<hex>`` → ``<hex>`` (lower case)."""
    return sha.split(":", 1)[-1].strip().lower()


def file_digests(path: Path) -> Digests:
    sha, md5, size = hashlib.sha256(), hashlib.md5(usedforsecurity=False), 0
    with os.fdopen(open_regular(path), "rb") as fh:  # never blocks on a FIFO, never reads a device
        for block in iter(lambda: fh.read(1 << 20), b""):
            sha.update(block)
            md5.update(block)
            size += len(block)
    return Digests(sha.hexdigest(), md5.hexdigest(), size)


def check_copy(path: Path, expected: list[tuple[str, Optional[str]]], *, fix: str) -> Digests:
    """Digests of ``path``, which must have every sha256 of ``expected`` ([(who records it, sha256 or
    None when that one has no record)]); else one line naming the file, both hashes and the way out."""
    got = file_digests(path)
    for who, want in expected:
        if want is not None and bare(want) != got.sha256:
            raise UserError(f"the copy is damaged: its sha256 is {got.sha256[:16]}…, {who} records "
                            f"{bare(want)[:16]}…; {fix}", file=path)
    return got


def store_sha(store: Path, build_id: str, rel: str) -> Optional[str]:
    """The sha256 the verified store entry of ``build_id`` records for its output ``rel``
    ("linux-64/x.conda"); None when the store has no such entry (or it was found corrupt)."""
    entry = Store(store).find(build_id)
    if entry is None:
        return None
    return next((o.sha256 for o in entry.outputs if o.file == rel), None)
