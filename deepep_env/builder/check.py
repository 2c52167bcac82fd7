"""Reproducibility check: compare two builds of the same package file by file.

rattler-build packages are reproducible in payload but not in timestamps (field notes §5), so a
bit-for-bit comparison of the ``.conda`` files (what ``Package.rebuild()`` reports) always says
"different". This compares what matters and names every file that differs; nothing is hidden
except the fields listed in :data:`VOLATILE`, which carry build times and build-folder names.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

# Members whose differences are expected between two builds of the same inputs. index.json is
# compared with its "timestamp" removed; rendered_recipe.yaml records the build folder (named by
# time) and the build time.
VOLATILE = frozenset({"info/recipe/rendered_recipe.yaml"})
TIMESTAMP_FIELDS = {"info/index.json": ("timestamp",)}


def _extract(pkg: Path, dest: Path) -> None:
    import rattler.package_streaming as ps

    ps.extract(str(pkg), str(dest))


def _fingerprint(root: Path, rel: str) -> tuple:
    p = root / rel
    st = p.lstat()
    if stat.S_ISLNK(st.st_mode):
        return ("symlink", os.readlink(p))
    data = p.read_bytes()
    if rel in TIMESTAMP_FIELDS:
        try:
            obj = json.loads(data)
            for k in TIMESTAMP_FIELDS[rel]:
                obj.pop(k, None)
            data = json.dumps(obj, sort_keys=True).encode()
        except ValueError:
            pass
    return ("exe" if st.st_mode & 0o111 else "file", hashlib.sha256(data).hexdigest())


def _members(root: Path) -> set[str]:
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for n in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            out.add(os.path.relpath(os.path.join(dirpath, n), root).replace(os.sep, "/"))
    return out


def compare_packages(a: Path, b: Path) -> list[str]:
    """Differences between two package files, one line each (empty list: same payload)."""
    tmp = Path(tempfile.mkdtemp(prefix="deepep-env-check-"))
    try:
        _extract(a, tmp / "a")
        _extract(b, tmp / "b")
        ma, mb = _members(tmp / "a"), _members(tmp / "b")
        diffs = [f"only in original: {m}" for m in sorted(ma - mb) if m not in VOLATILE]
        diffs += [f"only in rebuild: {m}" for m in sorted(mb - ma) if m not in VOLATILE]
        for m in sorted(ma & mb):
            if m in VOLATILE:
                continue
            if _fingerprint(tmp / "a", m) != _fingerprint(tmp / "b", m):
                diffs.append(f"differs: {m}")
        return diffs
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
