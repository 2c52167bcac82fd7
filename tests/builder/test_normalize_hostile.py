"""Issue 52.12: normalize_conda on a truncated .conda was a BadZipFile traceback, and a payload member
named ``../x`` or ``/abs`` (or a hard link to one) was repacked as it came. Each is one line naming the
package file now; a whole package with ordinary members (and a relative symlink) is still normalized."""
from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest
import zstandard

from deepep_env.base.errors import UserError
from deepep_env.builder.normalize import normalize_conda


def _tar(members: list[tarfile.TarInfo], data: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:", format=tarfile.PAX_FORMAT) as t:
        for m in members:
            body = data.get(m.name)
            if body is not None:
                m.size = len(body)
            t.addfile(m, io.BytesIO(body) if body is not None else None)
    return zstandard.ZstdCompressor().compress(buf.getvalue())


def _conda(path: Path, payload: list[tarfile.TarInfo], data: dict[str, bytes]) -> Path:
    info = tarfile.TarInfo("info/index.json")
    index = json.dumps({"name": "x", "version": "1", "timestamp": 1}).encode()
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("metadata.json", '{"conda_pkg_format_version": 2}')
        z.writestr("pkg-x-1-0.tar.zst", _tar(payload, data))
        z.writestr("info-x-1-0.tar.zst", _tar([info], {"info/index.json": index}))
    return path


def _file(name: str) -> tarfile.TarInfo:
    return tarfile.TarInfo(name)


def _link(name: str, target: str, kind: bytes) -> tarfile.TarInfo:
    m = tarfile.TarInfo(name)
    m.type, m.linkname = kind, target
    return m


@pytest.mark.parametrize("member", [
    _file("../x"), _file("/abs/x"), _file("lib/../../x"), _file("lib//x"),
    _link("lib/h", "../../etc/passwd", tarfile.LNKTYPE), _link("lib/h", "/etc/passwd", tarfile.LNKTYPE),
])
def test_a_member_outside_the_prefix_is_refused_in_one_line(tmp_path, member):
    pkg = _conda(tmp_path / "x-1-0.conda", [_file("lib/ok.txt"), member], {"lib/ok.txt": b"ok", member.name: b"x"})
    before = pkg.read_bytes()
    with pytest.raises(UserError) as ei:
        normalize_conda(pkg, 1600000000)
    msg = str(ei.value)
    assert "would be written outside the environment's prefix" in msg and pkg.name in msg and "\n" not in msg
    assert pkg.read_bytes() == before


@pytest.mark.parametrize("cut", [0, 10, 200, -30])
def test_a_truncated_package_is_one_line(tmp_path, cut):
    pkg = _conda(tmp_path / "x-1-0.conda", [_file("lib/ok.txt")], {"lib/ok.txt": b"ok" * 1000})
    raw = pkg.read_bytes()
    pkg.write_bytes(raw[:cut] if cut >= 0 else raw[:cut])
    with pytest.raises(UserError, match=r"not a whole \.conda package"):
        normalize_conda(pkg, 1600000000)


def test_neighbours_ordinary_members_and_a_relative_symlink_are_normalized(tmp_path):
    pkg = _conda(tmp_path / "x-1-0.conda", [_file("lib/ok.txt"), _link("lib/ok.so", "ok.txt", tarfile.SYMTYPE),
                                            _link("lib/a/up.txt", "../ok.txt", tarfile.SYMTYPE)],
                 {"lib/ok.txt": b"ok"})
    assert normalize_conda(pkg, 1600000000)
    assert not normalize_conda(pkg, 1600000000)
