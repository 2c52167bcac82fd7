"""The one bounded reader (deepep_env/base/readfile.py): regular files only, never blocking, capped,
UTF-8 checked, one line naming the file and what would be accepted (issue 26)."""
from __future__ import annotations

import os
import time

import pytest

from deepep_env.base.errors import UserError
from deepep_env.base.readfile import (NotRegular, TooLarge, present, read_json, read_regular, read_text, read_toml)


def _special(tmp_path, kind):
    p = tmp_path / f"x.{kind}"
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "zero":
        os.symlink("/dev/zero", p)
    elif kind == "dir":
        p.mkdir()
    elif kind == "loop":
        os.symlink(p.name, p)
    elif kind == "big":
        with p.open("wb") as fh:
            fh.truncate(5 << 20)
    return p


@pytest.mark.parametrize("kind, words", [("fifo", "is a FIFO, not a regular file"),
                                         ("zero", "is a character device, not a regular file"),
                                         ("dir", "is a directory, not a regular file"),
                                         ("loop", "cannot read thing: Too many levels of symbolic links"),
                                         ("big", "is 5242880 bytes or more")])
def test_what_is_not_a_small_regular_file_is_one_line(tmp_path, kind, words):
    p = _special(tmp_path, kind)
    t0 = time.monotonic()
    with pytest.raises(UserError) as e:
        read_text(p, what="thing", accepted="a thing file", limit=1 << 20)
    assert time.monotonic() - t0 < 5  # never blocks on a FIFO, never reads /dev/zero to the end
    line = str(e.value)
    assert "\n" not in line and line.startswith(str(p)) and words in line, line
    if kind not in ("big", "loop"):
        assert "(accepted: a thing file)" in line
    assert present(p)


def test_the_low_layer_raises_oserror_for_probes(tmp_path):
    with pytest.raises(NotRegular):
        read_regular(_special(tmp_path, "fifo"))
    with pytest.raises(TooLarge):
        read_regular(_special(tmp_path, "big"), limit=1 << 20)
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "missing")


def test_missing_not_utf8_and_malformed(tmp_path):
    with pytest.raises(UserError, match="no such thing"):
        read_text(tmp_path / "missing", what="thing", missing="no such thing")
    assert not present(tmp_path / "missing")
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b'a = 1\nb = "\xff"\n')
    with pytest.raises(UserError) as e:
        read_toml(bad, what="pixi.toml")
    assert f"{bad}:2: pixi.toml is not UTF-8 (byte 11)" in str(e.value)
    bad.write_text("a = [\n")
    with pytest.raises(UserError, match="malformed TOML"):
        read_toml(bad)
    bad.write_text("[" * 100000)
    with pytest.raises(UserError, match="nested too deeply|malformed TOML"):
        read_toml(bad)
    j = tmp_path / "x.json"
    j.write_text('{"a": ')
    with pytest.raises(UserError, match=r"not valid JSON \(Expecting value at line 1\)"):
        read_json(j)
    j.write_text('{"a": 1}')
    assert read_json(j) == {"a": 1}
