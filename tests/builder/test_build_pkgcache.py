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


def _many(root: Path, n: int = 24) -> Path:
    """An extraction of n files (hashed on several threads when first seen)."""
    e = root / "pkgs" / "big-1.0-h0"
    (e / "lib").mkdir(parents=True)
    (e / "info").mkdir()
    recs = []
    for i in range(n):
        body = f"lib {i}\n".encode() * 1000
        (e / "lib" / f"l{i:02}.so").write_bytes(body)
        recs.append({"_path": f"lib/l{i:02}.so", "path_type": "hardlink",
                     "sha256": file_sha256(e / "lib" / f"l{i:02}.so")[7:], "size_in_bytes": len(body)})
    (e / "info" / "paths.json").write_text(json.dumps({"paths": recs}))
    return e


def test_a_first_seen_extraction_of_many_files_is_verified_file_by_file(tmp_path):
    e = _many(tmp_path)
    assert pkgcache.check(tmp_path) == [] and e.is_dir()
    f = _many(tmp_path / "other")
    body = (f / "lib" / "l17.so").read_bytes()
    (f / "lib" / "l17.so").write_bytes(body[:-2] + b"X\n")   # one file of 24, same size, other bytes
    assert pkgcache.check(tmp_path / "other") == [f.name] and not f.exists()


def test_a_first_seen_extraction_holding_a_fifo_is_removed_not_read(tmp_path):
    e = _many(tmp_path, n=3)
    (e / "lib" / "l01.so").unlink()
    os.mkfifo(e / "lib" / "l01.so")          # a read would block; the recorded size differs anyway
    assert pkgcache.check(tmp_path) == [e.name]
    g = _many(tmp_path / "g", n=3)
    rec = json.loads((g / "info" / "paths.json").read_text())
    del rec["paths"][1]["size_in_bytes"]      # no size to compare: the hash must refuse it, not hang
    (g / "info" / "paths.json").write_text(json.dumps(rec))
    (g / "lib" / "l01.so").unlink()
    os.mkfifo(g / "lib" / "l01.so")
    assert pkgcache.check(tmp_path / "g") == [g.name]


def test_a_link_to_a_folder_replaced_in_an_extraction_is_seen(tmp_path):
    """Links are recorded as themselves (a link to a folder too, which os.walk left out)."""
    e = _entry(tmp_path)
    (e / "lib").mkdir()
    os.symlink("../include", e / "lib" / "inc")
    assert pkgcache.check(tmp_path) == []
    assert "lib/inc" in json.loads(e.with_name(e.name + pkgcache.STATS_SUFFIX).read_text())
    time.sleep(0.01)
    os.unlink(e / "lib" / "inc")
    os.symlink("/etc", e / "lib" / "inc")
    assert pkgcache.check(tmp_path) == [e.name]


def test_the_check_report_says_what_it_did(tmp_path):
    _entry(tmp_path, "a-1-h0")
    _entry(tmp_path, "b-1-h0")
    first = pkgcache.check_report(tmp_path)
    assert (first.kept, first.verified, first.removed) == (2, 2, [])
    again = pkgcache.check_report(tmp_path)
    assert (again.kept, again.verified) == (2, 0)
    assert again.summary().startswith("package cache checked in ") and "2 extractions kept (0 first seen" in again.summary()
