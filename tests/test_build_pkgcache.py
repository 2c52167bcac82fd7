"""Issue 25.7: builds keep their extracted dependencies, trusted only after a check
(deepep_env/builder/pkgcache.py): verified against paths.json when first seen, then by size and mtime;
an extraction a build wrote into (through rattler's hard links) is removed, never reused."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from deepep_env.builder import pkgcache
from deepep_env.base.hashing import file_sha256


def _entry(root: Path, name: str = "dep-1.0-h0", body: bytes = b"int x;\n") -> Path:
    e = root / "pkgs" / name
    (e / "include").mkdir(parents=True)
    (e / "info").mkdir()
    (e / "include" / "dep.h").write_bytes(body)
    sha = file_sha256(e / "include" / "dep.h")[7:]
    (e / "info" / "paths.json").write_text(json.dumps({"paths": [
        {"_path": "include/dep.h", "path_type": "hardlink", "sha256": sha, "size_in_bytes": len(body)}]}))
    (root / "pkgs" / f"{name}.lock").write_bytes(b"\0" * 40)
    return e


def test_a_good_extraction_is_kept_and_recorded(tmp_path):
    e = _entry(tmp_path)
    assert pkgcache.check(tmp_path) == []
    assert e.is_dir() and e.with_name(e.name + pkgcache.STATS_SUFFIX).is_file()
    assert pkgcache.check(tmp_path) == []          # the second look is by stat only, still kept


def test_an_extraction_written_to_after_it_was_recorded_is_removed(tmp_path):
    e = _entry(tmp_path)
    pkgcache.check(tmp_path)
    time.sleep(0.01)
    with open(e / "include" / "dep.h", "a") as fh:   # a build script appending through a hard link
        fh.write("// vandalised\n")
    assert pkgcache.check(tmp_path) == [e.name]
    assert not e.exists() and not e.with_name(e.name + ".lock").exists()


def test_a_first_seen_extraction_that_is_not_its_package_is_removed(tmp_path):
    e = _entry(tmp_path)
    (e / "include" / "dep.h").write_bytes(b"int y;\n")   # same size, other bytes
    os.utime(e / "include" / "dep.h", (0, 0))
    assert pkgcache.check(tmp_path) == [e.name]
    assert not e.exists()
