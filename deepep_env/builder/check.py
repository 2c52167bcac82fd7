"""Reproducibility check: are two builds of the same package the same bytes, and if not, where do
they differ?

The verdict is the sha256 of the whole archive (what a lock records and an installer verifies):
nothing is excluded. Only when the archives differ are they opened, to name the members that
differ — first the payload and metadata files, then (when every file matches) the container
itself, so a reader always gets a place to look, never just "different".
"""
from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

from deepep_env.base.hashing import file_sha256


def _extract(pkg: Path, dest: Path) -> None:
    import rattler.package_streaming as ps

    ps.extract(pkg, dest)


def _fingerprint(root: Path, rel: str) -> tuple:
    p = root / rel
    st = p.lstat()
    if stat.S_ISLNK(st.st_mode):
        return ("symlink", os.readlink(p))
    return ("exe" if st.st_mode & 0o111 else "file", hashlib.sha256(p.read_bytes()).hexdigest())


def _members(root: Path) -> set[str]:
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for n in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            out.add(os.path.relpath(os.path.join(dirpath, n), root).replace(os.sep, "/"))
    return out


def member_fingerprints(pkg: Path) -> dict[str, tuple]:
    """Every member of a package: ``(kind, sha256 or link target)`` by its path (what
    :func:`member_differences` compares; a GPU run lists it for a package that differs from its lock)."""
    tmp = Path(tempfile.mkdtemp(prefix="deepep-env-check-"))
    try:
        _extract(pkg, tmp)
        return {m: _fingerprint(tmp, m) for m in sorted(_members(tmp))}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def member_differences(a: Path, b: Path) -> list[str]:
    """Files that differ between two packages, one line each (empty: every file is the same)."""
    fa, fb = member_fingerprints(a), member_fingerprints(b)
    diffs = [f"only in original: {m}" for m in sorted(fa.keys() - fb.keys())]
    diffs += [f"only in rebuild: {m}" for m in sorted(fb.keys() - fa.keys())]
    diffs += [f"differs: {m}" for m in sorted(fa.keys() & fb.keys()) if fa[m] != fb[m]]
    return diffs


def compare_packages(a: Path, b: Path) -> list[str]:
    """Differences between two package files, one line each; empty list: the same bytes."""
    sa, sb = file_sha256(a), file_sha256(b)
    if sa == sb:
        return []
    head = f"archive sha256 {sa.split(':')[-1][:16]}… ≠ {sb.split(':')[-1][:16]}…"
    diffs = member_differences(a, b)
    if not diffs:  # every file equal: the difference is in the archive itself (member times, order)
        diffs = ["archive container (member metadata or order; every file's content is the same)"]
    return [head, *diffs]


def compare_with_sha(path: Path, expected: str) -> list[str]:
    """Differences between a package file and a recorded sha256 (a lock's)."""
    actual = file_sha256(path)
    want = expected if expected.startswith("sha256:") else f"sha256:{expected}"
    if actual == want:
        return []
    return [f"archive sha256 {actual.split(':')[-1][:16]}… ≠ lock's {want.split(':')[-1][:16]}…"]
