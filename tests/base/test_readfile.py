"""The one bounded reader (deepep_env/base/readfile.py): regular files only, never blocking, capped,
UTF-8 checked, one line naming the file and what would be accepted (issue 26)."""
from __future__ import annotations

import json
import os
import time

import pytest

from deepep_env.base.errors import UserError
from deepep_env.base.readfile import (NotRegular, TooLarge, present, read_bounded, read_json, read_regular, read_tail,
                                      read_text, read_toml)


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


# -- issue 39: one JSON reader for what others wrote (records, node reports): nesting and NaN bounded ------------
@pytest.mark.parametrize("text, words", [
    ("[" * 400_000, "nested too deeply"),                                   # RecursionError inside json.loads
    ("[" * 65 + "]" * 65, "nested more than 64 deep"),                      # parses, then breaks whoever prints it
    ('{"a": ' + "[" * 900 + "]" * 900 + "}", "nested more than 64 deep"),
    ('{"driver": NaN}', "NaN is not a JSON number"),
    ('{"x": [-Infinity]}', "-Infinity is not a JSON number"),
    ('{"x": 1e999}', "1e999 is not a finite number"),
    ("{", "not valid JSON (Expecting property name"),
])
def test_parse_json_refuses_what_no_json_reader_takes_in_one_line(tmp_path, text, words):
    from deepep_env.base.readfile import parse_json

    f = tmp_path / "r.json"
    f.write_text(text)
    for call in (lambda: parse_json(text, f), lambda: read_json(f)):
        with pytest.raises(UserError) as err:
            call()
        assert words in str(err.value) and str(f) in str(err.value) and "\n" not in str(err.value)


def test_parse_json_keeps_ordinary_data_and_its_depth_bound_is_cheap():
    from deepep_env.base.readfile import MAX_JSON_DEPTH, json_depth, parse_json

    doc = {"a": [1, 2.5, {"b": None, "c": '[[[["'}], "d": True}
    assert parse_json(json.dumps(doc), "x.json") == doc
    assert parse_json("[" * 64 + "]" * 64, "x.json") is not None and MAX_JSON_DEPTH == 64
    assert json_depth(7, 64) == 0 and json_depth([], 64) == 1 and json_depth({"a": [[]]}, 64) == 3
    big = {f"p{i}": {"depends": ["x"] * 5, "n": i} for i in range(20000)}
    t = time.perf_counter()
    assert json_depth(big, 64) == 3
    assert time.perf_counter() - t < 1.0
    assert parse_json("[" * 500 + "]" * 500, "x.json", max_depth=None) is not None     # repodata's opt-out


def test_terminal_and_xml_text_show_data_as_data():
    import xml.dom.minidom as xml_parser

    from deepep_env.base.safetext import markup_free, terminal, xml

    forged = "580.1\nfleet: PASS: 4 node(s)\x1b]0;t\x07\x1b[2J\u202e\ud800"
    shown = terminal(forged)
    assert "\n" not in shown and "\x1b" not in shown and "\x07" not in shown
    assert shown == "580.1\\nfleet: PASS: 4 node(s)\\x1b]0;t\\x07\\x1b[2J\\u202e\\ud800"
    assert terminal("H200 80GB — ok") == "H200 80GB — ok" and terminal(3) == "3"
    assert markup_free("[link=https://evil.example]click[/link]") == "\\[link=https://evil.example]click\\[/link]"
    from rich.console import Console

    c = Console(file=__import__("io").StringIO(), force_terminal=True, width=200, highlight=False)   # as cli._common
    c.print(markup_free("[link=https://evil.example]click[/link] [/red]x"))
    out = c.file.getvalue()
    assert "[link=https://evil.example]click[/link]" in out and "\x1b]8;" not in out   # no OSC 8 hyperlink
    v = xml("GPU \x01 <b> & \"q\" \ufffe \x85")
    assert v == "GPU \\x01 &lt;b&gt; &amp; &quot;q&quot; \\ufffe \\x85"
    dom = xml_parser.parseString(f'<a t="{v}">{v}</a>')
    assert dom.documentElement.getAttribute("t") == dom.documentElement.firstChild.data == \
        'GPU \\x01 <b> & "q" \\ufffe \\x85'
    xml_parser.parseString(f'<a t="{xml(forged)}">{xml(forged)}</a>')            # well-formed (a newline is XML)


@pytest.mark.parametrize("kind, words", [("fifo", "not a regular file"), ("zero", "cannot read record: Too many levels"),
                                         ("dir", "not a regular file"), ("big", "record larger than 1048576 bytes")])
def test_read_bounded_refuses_in_the_words_records_and_node_reports_use(tmp_path, kind, words):
    """read_bounded (test records, fleet node reports; issue 41 folded their copies into this one):
    the file itself, never a link (O_NOFOLLOW: the /dev/zero link is refused before it is followed)."""
    p = _special(tmp_path, kind)
    t0 = time.monotonic()
    with pytest.raises(UserError) as e:
        read_bounded(p, 1 << 20, what="record", accepted="a JSON file")
    assert time.monotonic() - t0 < 5
    line = str(e.value)
    assert "\n" not in line and line.startswith(str(p)) and words in line, line
    ok = tmp_path / "ok.json"
    ok.write_bytes(b"{}")
    assert read_bounded(ok, 2) == b"{}"
    with pytest.raises(UserError, match="larger than 1 bytes"):
        read_bounded(ok, 1)


def test_read_tail_keeps_the_last_bytes_of_any_size_and_refuses_a_fifo(tmp_path):
    log = tmp_path / "out.log"
    log.write_bytes(b"a" * 100 + b"the end")
    assert read_tail(log, 7) == b"the end"
    assert read_tail(log, 1 << 20) == b"a" * 100 + b"the end"
    with pytest.raises(UserError, match="not a regular file"):
        read_tail(_special(tmp_path, "fifo"), 10, accepted="a test's output log")
