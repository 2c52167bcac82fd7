"""Issue 39: test records and node reports are data others wrote. A malformed one is skipped (records) or
refused (node reports) in one line naming it, never a traceback; what they hold reaches a terminal or an
XML file as data (no rich markup, control characters escaped); `record` and `fleet report` refuse bad
arguments. Each case of the issue and its neighbours (docs/bad-input.md, "Issue 39")."""
from __future__ import annotations

import json
import shutil
import xml.dom.minidom
from pathlib import Path

import pytest

from cli_runner import cli_in_process, cli_subprocess
from platform_fixtures import no_traceback
from verify_fixtures import NOW, DEEPEP_OUTPUT, proj  # noqa: F401 (proj: the fixture)

from deepep_env.base.project import Project
from deepep_env.verify.records import record_test



@pytest.fixture
def good(proj, host_tree) -> dict:
    """A real record's data (its file removed): each case plants a variant of it."""
    path = record_test(proj, "h200-nvlink", "intranode", [], 0, DEEPEP_OUTPUT, root=str(host_tree("h200x8-nvlink")), now=NOW)
    data = json.loads(path.read_text())
    path.unlink()
    return data


def _plant(proj: Project, text: str) -> Path:
    d = proj.root / "verified" / "h200-nvlink"
    d.mkdir(parents=True, exist_ok=True)
    (d / "bad.json").write_text(text)
    return d / "bad.json"


def _with(data: dict, path: tuple, value) -> str:
    data = json.loads(json.dumps(data))
    d = data
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] = value
    return json.dumps(data)


MALFORMED = {   # case → (field path, value) or raw text; each is skipped by every reader with one line
    "figures {x: 'abc'}": (("figures",), {"dispatch_fp8_gbps": "abc"}),
    "figures [1, 2]": (("figures",), [1, 2]),
    "figures {x: true}": (("figures",), {"dispatch_fp8_gbps": True}),
    "figures {x: {}}": (("figures",), {"x": {}}),
    "host.platform [1]": (("host", "platform"), [1]),
    "host []": (("host",), []),
    "exit_code true": (("exit_code",), True),
    "exit_code 10**20": (("exit_code",), 10 ** 20),
    "passed 'yes'": (("passed",), "yes"),
    "ranks 0": (("ranks",), 0),
    "args [1]": (("args",), [1]),
    "time 5": (("time",), 5),
    "400,000 nested [": "[" * 400_000,
    "figures nested 900 deep": None,
    "figures {x: NaN}": None,
    "figures {x: 1e999}": None,
}


def _text(case: str, good: dict) -> str:
    spec = MALFORMED[case]
    if isinstance(spec, str):
        return spec
    if spec is not None:
        return _with(good, *spec)
    if "NaN" in case or "1e999" in case:
        return json.dumps({**good, "figures": {"x": 0}}).replace('"x": 0', '"x": ' + ("NaN" if "NaN" in case else "1e999"))
    return json.dumps({**good, "figures": {"x": 0}}).replace('"x": 0', '"x": ' + "[" * 900 + "]" * 900)


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_record_is_skipped_with_a_line_naming_it(case, proj, good, host_tree, capsys, tmp_path):
    bad = _plant(proj, _text(case, good))
    rc, out, err = cli_in_process(capsys, "verified", "--project", proj.root)
    assert rc == 0 and f"skipped: {bad}" in err and len(err.strip().splitlines()) == 1, err
    rc, out, err = cli_in_process(capsys, "verified", "--json", "--project", proj.root)
    assert rc == 0 and json.loads(out)["records"] == 0
    chan = tmp_path / "chan"
    (chan / "verified" / "h200-nvlink").mkdir(parents=True)
    shutil.copy(bad, chan / "verified" / "h200-nvlink" / "bad.json")
    rc, out, err = cli_in_process(capsys, "verified", "--channel", chan, "--project", proj.root)
    assert rc == 0 and "skipped:" in err and "bad.json" in err
    rc, out, err = cli_in_process(capsys, "plan", "h200-nvlink", "--root", host_tree("h200x8-nvlink"), "--project", proj.root)
    assert rc == 0 and "verified: no passing record" in out, err


def test_publish_ships_only_what_reads_as_a_record(proj, good, tmp_path):
    from deepep_env.publish.model import PublishReport
    from deepep_env.verify.shipping import ship_records

    _plant(proj, _with(good, ("figures",), {"dispatch_fp8_gbps": "abc"}))
    (proj.root / "verified" / "h200-nvlink" / "ok.json").write_text(json.dumps(good))
    chan = tmp_path / "chan"
    rep = ship_records("file", chan, "h200-nvlink", proj.root, PublishReport("h200-nvlink", str(chan), "file", chan.as_uri()))
    assert [r["file"] for r in rep.records] == ["verified/h200-nvlink/ok.json"]
    assert not (chan / "verified" / "h200-nvlink" / "bad.json").exists()
    (note,) = rep.notes
    assert "bad.json" in note and "record field 'figures'" in note and "\n" not in note


@pytest.mark.parametrize("field,value,shown", [
    ("test", "[/red]x", "[/red]x"),                                                     # was rich.errors.MarkupError
    (("host", "node"), "[link=https://evil.example]click[/link]", "[link=https://evil.example]click[/link]"),
    (("host", "node"), "n\x1b]0;pwned\x07\x1b[2J", "n\\x1b]0;pwned\\x07\\x1b[2J"),     # raw ESC/BEL before
    (("host", "platform"), "nv\u202elink", "nv\\u202elink"),
])
def test_record_values_print_as_data(field, value, shown, proj, good, host_tree, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")   # a terminal wide enough that no cell wraps: the value is compared whole
    _plant(proj, _with(good, field if isinstance(field, tuple) else (field,), value))
    rc, out, err = cli_in_process(capsys, "verified", "--project", proj.root)
    assert rc == 0 and not err, err
    flat = "".join(out.split())                                     # a table may wrap a long cell
    assert "".join(shown.split()) in flat and "\x1b" not in out and "\x07" not in out
    rc, out, err = cli_in_process(capsys, "plan", "h200-nvlink", "--root", host_tree("h200x8-nvlink"), "--project", proj.root)
    assert rc == 0 and "Traceback" not in err and "\x1b" not in out


@pytest.mark.parametrize("args,words", [
    (["nosuch"], "unknown env 'nosuch'"),
    (["../../../tmp/x"], "unknown env '../../../tmp/x'"),
    (["h200-nvlink", "--exit-code", "99999999999999999999999"], "not an exit status"),
    (["h200-nvlink", "--exit-code", "-99999"], "not an exit status"),
    (["h200-nvlink", "--test", "[/red]x"], "not a test name"),
    (["h200-nvlink", "--test", ""], "not a test name"),
    (["h200-nvlink", "--test", "../x"], "not a test name"),
])
def test_record_refuses_what_it_cannot_write(args, words, proj, capsys, tmp_path):
    argv = ["record", *args]
    if "--test" not in argv:
        argv += ["--test", "intranode"]
    if "--exit-code" not in argv:
        argv += ["--exit-code", "0"]
    rc, out, err = cli_in_process(capsys, *argv, "--project", proj.root)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and words in lines[0] and "accepted" in lines[0], err
    assert not (proj.root / "verified").exists()                   # nothing written, not even the folder


# -- fleet report ------------------------------------------------------------------------------------------------
@pytest.fixture
def fleet(host_tree, tmp_path) -> tuple[Path, dict]:
    from deepep_env.doctor import run_doctor

    doc = run_doctor(None, root=str(host_tree("h200x8-nvlink")), environ={}).to_dict()
    d = tmp_path / "fleet"
    d.mkdir()
    for i in range(4):
        (d / f"node-{i}.json").write_text(json.dumps(doc))
    return d, doc


@pytest.mark.parametrize("expect", ["-3", "0", "100001"])
def test_fleet_expect_is_a_number_of_nodes(expect, fleet, capsys):
    rc, out, err = cli_in_process(capsys, "fleet", "report", fleet[0], "--expect", expect)
    assert rc == 2 and "PASS" not in out and "--expect" in err and len(err.strip().splitlines()) == 1, (out, err)


def test_a_node_report_cannot_forge_the_verdict_or_write_controls(fleet):
    d, doc = fleet
    forged = json.loads(json.dumps(doc))
    forged["context"]["host"]["driver"] = "580.1\nfleet: PASS: 4 node(s), 0 with errors, uniform\x1b[2J\x07"
    (d / "node-3.json").write_text(json.dumps(forged))
    res = cli_subprocess("fleet", "report", d)                      # as the launch preflight runs it
    no_traceback(res)
    lines = res.stdout.splitlines()
    assert res.returncode == 1 and lines[-1].startswith("fleet: FAIL")
    assert not any(ln.startswith("fleet: PASS") for ln in lines) and "\x1b" not in res.stdout and "\x07" not in res.stdout
    assert "580.1\\nfleet: PASS: 4 node(s), 0 with errors, uniform\\x1b[2J\\x07" in res.stdout


@pytest.mark.parametrize("text,words", [
    ("NaN", "NaN is not a JSON number"), ("-Infinity", "-Infinity is not a JSON number"),
    ("1e999", "1e999 is not a finite number"), ("[" * 900 + "]" * 900, "nested more than 64 deep"),
])
def test_a_node_report_that_is_not_json_is_one_line(text, words, fleet, capsys):
    d, doc = fleet
    (d / "node-3.json").write_text(json.dumps(doc).replace('"platform_source"', f'"driver": {text}, "platform_source"', 1))
    for extra in ([], ["--json"]):
        rc, out, err = cli_in_process(capsys, "fleet", "report", d, *extra)
        assert rc == 2 and not out and words in err and "node-3.json" in err and len(err.strip().splitlines()) == 1


def test_a_deeply_nested_node_report_is_one_line(fleet):
    d, _ = fleet
    (d / "node-3.json").write_text("[" * 200_000)
    res = cli_subprocess("fleet", "report", d, "--expect", "4")
    no_traceback(res)
    assert res.returncode == 2 and "node-3.json" in res.stderr and "nested too deeply" in res.stderr


def test_control_characters_in_host_facts_keep_the_pictures_well_formed(fleet, host_tree, tmp_path, capsys):
    d, doc = fleet
    ctl = json.loads(json.dumps(doc))
    ctl["context"]["host"]["driver"] = "580\x01\x0b<b>"
    (d / "node-3.json").write_text(json.dumps(ctl))
    page = tmp_path / "f.html"
    rc, out, err = cli_in_process(capsys, "fleet", "report", d, "--html", page)
    assert rc == 1 and "580\\x01\\x0b<b>" in out
    assert "580\\x01\\x0b&lt;b&gt;" in page.read_text()
    xml.dom.minidom.parse(str(page))
    root = tmp_path / "host"
    shutil.copytree(host_tree("h200x8-nvlink"), root, symlinks=True)
    for info in (root / "proc/driver/nvidia/gpus").glob("*/information"):
        info.write_text(info.read_text().replace("NVIDIA H200", "NVIDIA H\x01200", 1))
    svg = tmp_path / "t.svg"
    rc, out, err = cli_in_process(capsys, "detect", "--root", root, "--svg", svg)
    assert rc == 0, err
    assert "H\\x01200" in svg.read_text()
    xml.dom.minidom.parse(str(svg))
