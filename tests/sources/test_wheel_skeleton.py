"""benchmarks/gpu/wheel_skeleton.py: a wheel rebuilt byte for byte from a small skeleton and the
files a pip install of it left behind (offline, a tiny wheel-like zip made here)."""
from __future__ import annotations

import hashlib
import random
import subprocess
import sys
import zipfile

import pytest

from build_fixtures import REPO

GPU = REPO / "benchmarks" / "gpu"
sys.path.insert(0, str(GPU))

import wheel_skeleton  # noqa: E402

SCRIPT = GPU / "wheel_skeleton.py"


def _blob(seed: int, n: int) -> bytes:
    rng = random.Random(seed)
    words = [b"nvshmem", b"team", b"put", b"get", b"\x00\x01", b"barrier", b"{", b"}\n"]
    return b"".join(rng.choice(words) if rng.random() < 0.8 else bytes([rng.randrange(256)])
                    for _ in range(n))


def _make_wheel(path):
    members = [  # name, content, compress_type, level
        ("pkg/", b"", zipfile.ZIP_STORED, None),
        ("pkg/__init__.py", b"", zipfile.ZIP_DEFLATED, 6),
        ("pkg/core.py", b"def f():\n    return 1\n" * 300, zipfile.ZIP_DEFLATED, 1),
        ("pkg/lib/libfake.so.3", _blob(1, 60_000), zipfile.ZIP_DEFLATED, 9),
        ("pkg/lib/plain.bin", _blob(2, 5_000), zipfile.ZIP_STORED, None),
        ("pkg/include/h.h", _blob(3, 20_000), zipfile.ZIP_DEFLATED, 6),
        ("pkg/include/z.h", _blob(4, 8_000), zipfile.ZIP_DEFLATED, 0),
        ("fake_pkg-1.0.data/purelib/extra.py", _blob(5, 3_000), zipfile.ZIP_DEFLATED, 3),
        ("fake_pkg-1.0.data/scripts/tool", b"#!python\nprint(1)\n" * 20, zipfile.ZIP_DEFLATED, 6),
        ("fake_pkg-1.0.dist-info/METADATA", b"Name: fake-pkg\nVersion: 1.0\n" * 10, zipfile.ZIP_DEFLATED, 6),
        ("fake_pkg-1.0.dist-info/RECORD", b"pkg/core.py,sha256=abc,123\n" * 20, zipfile.ZIP_DEFLATED, 6),
    ]
    with zipfile.ZipFile(path, "w") as zf:
        zf.comment = b"a wheel-like zip"
        for name, data, ctype, level in members:
            zi = zipfile.ZipInfo(name, date_time=(2024, 5, 6, 7, 8, 10))
            zi.external_attr = (0o40755 << 16) | 0x10 if name.endswith("/") else 0o100644 << 16
            zi.extra = b"\xfe\xca\x04\x00abcd" if name.endswith(".so.3") else b""
            zf.writestr(zi, data, compress_type=ctype, compresslevel=level)
    return members


def _install(wheel, site):
    """What pip leaves: each file at its place, .data/purelib folded in, RECORD rewritten,
    INSTALLER added, scripts elsewhere."""
    site.mkdir()
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            rel = wheel_skeleton._site_path(info.filename)
            if rel is None:
                continue
            dst = site.joinpath(*rel.split("/"))
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(zf.read(info))
    di = site / "fake_pkg-1.0.dist-info"
    di.mkdir()
    (di / "RECORD").write_text("rewritten by pip\n")
    (di / "INSTALLER").write_text("pip\n")
    (site / "pkg" / "__pycache__").mkdir()
    (site / "pkg" / "__pycache__" / "core.cpython-312.pyc").write_bytes(b"\x00" * 16)


@pytest.fixture
def world(tmp_path):
    wheel = tmp_path / "fake_pkg-1.0-py3-none-any.whl"
    _make_wheel(wheel)
    site = tmp_path / "site"
    _install(wheel, site)
    return tmp_path, wheel, site


def test_rebuild_is_byte_identical(world):
    tmp, wheel, site = world
    skel = tmp / "w.skel"
    s = wheel_skeleton.make(str(wheel), str(skel), log=lambda _: None)
    assert s["rebuilt"] == 6 and s["skeleton_bytes"] < wheel.stat().st_size
    doc = wheel_skeleton.load(str(skel))
    by = {m["name"]: m for m in doc["members"]}
    assert "inline" in by["fake_pkg-1.0.dist-info/RECORD"] and "inline" in by["fake_pkg-1.0.data/scripts/tool"]
    assert by["pkg/lib/libfake.so.3"]["params"][0] == 9 and by["pkg/core.py"]["params"][0] == 1
    assert by["fake_pkg-1.0.data/purelib/extra.py"]["path"] == "extra.py"
    want = hashlib.sha256(wheel.read_bytes()).hexdigest()
    out = tmp / "out" / wheel.name
    out.parent.mkdir()
    r = subprocess.run([sys.executable, str(SCRIPT), "rebuild", str(skel), str(site), str(out),
                        "--sha256", want], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == wheel.read_bytes()
    assert sorted(p.name for p in out.parent.iterdir()) == [wheel.name]


def test_unreproducible_stream_stays_inline(world, monkeypatch):
    tmp, wheel, site = world
    monkeypatch.setattr(wheel_skeleton, "_candidates", lambda: iter([(1, -15, 8, 0)]))
    skel = tmp / "w.skel"
    wheel_skeleton.make(str(wheel), str(skel), log=lambda _: None)
    by = {m["name"]: m for m in wheel_skeleton.load(str(skel))["members"]}
    assert by["pkg/lib/libfake.so.3"]["inline"] == "no zlib setting reproduces the stream"
    assert by["pkg/core.py"]["params"] == [1, -15, 8, 0]
    out = tmp / "out.whl"
    monkeypatch.undo()
    wheel_skeleton.rebuild(str(skel), str(site), str(out), log=lambda _: None)
    assert out.read_bytes() == wheel.read_bytes()


@pytest.mark.parametrize("damage", ["tamper", "missing", "sha"])
def test_failure_is_one_line_and_leaves_nothing(world, damage):
    tmp, wheel, site = world
    skel = tmp / "w.skel"
    wheel_skeleton.make(str(wheel), str(skel), log=lambda _: None)
    target = site / "pkg" / "include" / "h.h"
    extra = []
    if damage == "tamper":
        b = bytearray(target.read_bytes())
        b[100] ^= 1
        target.write_bytes(bytes(b))
    elif damage == "missing":
        target.unlink()
    else:
        extra = ["--sha256", "0" * 64]
    outdir = tmp / "out"
    outdir.mkdir()
    r = subprocess.run([sys.executable, str(SCRIPT), "rebuild", str(skel), str(site),
                        str(outdir / "x.whl"), *extra], capture_output=True, text=True)
    assert r.returncode == 1 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("wheel_skeleton: error: ")
    if damage != "sha":
        assert "pkg/include/h.h" in lines[0]
    assert list(outdir.iterdir()) == []
