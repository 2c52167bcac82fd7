"""`deepep-env prove`: install from the lock, bytes against the lock, the tests through `task` on every
GPU of a stand-in host (a captured host root), records written, one table; a run folder under the
state folder that `prove --follow` reads; a byte mismatch and a failing test make it exit 1."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import lock_fixtures as lf
from cli_runner import cli_in_process


@pytest.fixture
def proj(lt_world, tmp_path, monkeypatch, capsys, host_tree):
    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DEEPEP_ENV_HOST_ROOT", str(host_tree("gcp-b200")))
    monkeypatch.setenv("DEEPEP_ENV_PLATFORM", "gcp-b200")
    p = lf.project_copy(lt_world, tmp_path / "proj")
    assert cli_in_process(capsys, "lock", "lt-host", "--project", p.root)[0] == 0
    assert cli_in_process(capsys, "pixi", "sync", "--project", p.root)[0] == 0
    monkeypatch.chdir(tmp_path)   # the caller's folder: prove writes nothing here
    return p


def test_prove_passes_and_writes_records(proj, tmp_path, capsys):
    rc, out, err = cli_in_process(capsys, "prove", "lt-host", "--reinstall", "--json", "--project", proj.root)
    assert rc == 0, err
    data = json.loads(out)
    (env,) = data["envs"]
    assert env["bytes"] == "same 4/4" and env["ok"]
    assert [t["test"] for t in env["tests"]] == ["intranode", "low-latency"]   # V1: no elastic test
    gpus = data["ranks"]
    assert gpus == 8   # --ranks all: every GPU of the captured host
    for t in env["tests"]:
        assert t["result"] == "pass" and t["record"].startswith("verified/lt-host/")
        rec = json.loads((proj.root / t["record"]).read_text())
        assert rec["args"] == ["--num-processes", str(gpus)] and rec["passed"]
    assert env["tests"][0]["ranks"] == gpus   # the record's (the stand-in low-latency prints rank 0 only)
    assert env["tests"][1]["figures"]["ll_rank0_gbps"] == pytest.approx(197.8)
    run = Path(data["run"])
    assert run.parent == Path(os.environ["DEEPEP_ENV_STATE"]) / "prove"
    assert (run / "result.json").is_file() and (run / "lt-host" / "intranode.log").is_file()
    assert "--num-processes" in (run / "lt-host" / "intranode.log").read_text()   # the test's own output
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["cache", "proj"])
    # a second call attaches to the run: its progress from the start, then the same table
    rc, out, err = cli_in_process(capsys, "prove", "--follow", "--project", proj.root)
    assert rc == 0 and "lt-host: same 4/4" in err and "done: ok" in err
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["env", "test", "bytes", "result"]
    assert lines[1].split()[:6] == ["lt-host", "intranode", "same", "4/4", "pass", "8"]


def test_prove_byte_mismatch_exits_1(proj, capsys):
    for pkg in proj.channel.glob("*/deep-ep-*.conda"):   # lt-host's among them
        lf.corrupt(pkg)
    rc, out, err = cli_in_process(capsys, "prove", "lt-host", "--reinstall", "--project", proj.root)
    assert rc == 1, err
    row = [ln for ln in out.splitlines() if ln.startswith("lt-host")][0]
    assert "refused" in row and "FAIL" in row and "sha256" in row


def test_prove_failing_test_exits_1(proj, capsys):
    assert cli_in_process(capsys, "install", "lt-host", "--project", proj.root)[0] == 0
    script = proj.prefix_for("lt-host") / "share/deep-ep/tests/test_low_latency.py"
    script.write_text("import sys\nprint('RuntimeError: CUDA error: out of memory')\nsys.exit(3)\n")
    rc, out, err = cli_in_process(capsys, "prove", "lt-host", "--ranks", "2", "--json", "--project", proj.root)
    assert rc == 1
    t = {x["test"]: x for x in json.loads(out)["envs"][0]["tests"]}
    assert t["intranode"]["result"] == "pass" and t["intranode"]["ranks"] == 2
    assert t["low-latency"]["result"] == "fail" and t["low-latency"]["exit_code"] == 3
    assert "exit code 3" in t["low-latency"]["evidence"]


def test_prove_refusals(proj, capsys):
    rc, _, err = cli_in_process(capsys, "prove", "lt-host", "--ranks", "zero", "--project", proj.root)
    assert rc == 2 and "--ranks" in err
    rc, _, err = cli_in_process(capsys, "prove", "no-such-env", "--project", proj.root)
    assert rc == 2 and "unknown env" in err


def test_detach_then_follow(proj, capsys):
    """A run started in the background (its own session; a GPU machine's command is 10 minutes at most),
    followed by a second call: its progress from the start, then its table and exit status."""
    rc, out, err = cli_in_process(capsys, "prove", "lt-host", "--detach", "--ranks", "4", "--project", proj.root)
    assert rc == 0, err
    run = Path(out.strip())
    assert run.parent == Path(os.environ["DEEPEP_ENV_STATE"]) / "prove" and (run / "pid").is_file()
    rc, out, err = cli_in_process(capsys, "prove", "--follow", "--timeout", "240", "--project", proj.root)
    assert rc == 0, err + (run / "console.log").read_text()
    assert "prove lt-host (lock; 8 GPU(s)" in err and "done: ok" in err
    assert [ln.split()[1] for ln in out.splitlines()[1:]] == ["intranode", "low-latency"]
    assert sorted(p.name for p in (run / "records" / "lt-host").iterdir()) == \
        sorted(p.name for p in (proj.root / "verified" / "lt-host").iterdir())
    rc, _, err = cli_in_process(capsys, "prove", "lt-host", "--detach", "--ranks", "0", "--project", proj.root)
    assert rc == 2 and "--ranks" in err   # refused here, before anything starts


def test_prove_from_a_carry_with_nothing_built_here(proj, tmp_path, capsys):
    carry = tmp_path / "lt.carry.tgz"
    assert cli_in_process(capsys, "carry", "lt-host", "--to", str(carry), "--no-wheels", "--project", proj.root)[0] == 0
    import shutil

    shutil.rmtree(proj.channel)   # the offline machine: nothing built, nothing in a channel
    rc, out, err = cli_in_process(capsys, "prove", "lt-host", "--reinstall", "--from-carry", str(carry), "--json",
                                  "--project", proj.root)
    assert rc == 0, err
    (env,) = json.loads(out)["envs"]
    assert env["bytes"] == "same 4/4" and [t["result"] for t in env["tests"]] == ["pass", "pass"]
    rc, _, err = cli_in_process(capsys, "prove", "lt-host", "--relock", "--from-carry", str(carry), "--project", proj.root)
    assert rc == 2 and "--from-carry" in err


def test_prove_signs_every_record_it_writes(proj, tmp_path, capsys):
    """`prove --sign KEY`: each test record gets its in-toto attestation (as `task --sign`), and under the
    key's trust file `verified --trust` counts them."""
    key = tmp_path / "keys" / "ci.key"
    key.parent.mkdir()
    assert cli_in_process(capsys, "key", "new", str(key), "--name", "ci")[0] == 0
    rc, out, err = cli_in_process(capsys, "prove", "lt-host", "--reinstall", "--sign", str(key), "--json",
                                  "--project", proj.root)
    assert rc == 0, err
    (env,) = json.loads(out)["envs"]
    for t in env["tests"]:
        rec = proj.root / t["record"]
        assert rec.with_name(rec.stem + ".intoto.jsonl").is_file()
    rc, out, err = cli_in_process(capsys, "verified", "--json", "--trust", f"{key}.pub", "--project", proj.root)
    cells = {c["test"]: c for c in json.loads(out)["cells"]}
    assert cells["intranode"]["verified"] and cells["low-latency"]["verified"]


def test_jobs_installs_in_child_processes_then_tests_in_turn(proj, tmp_path, capsys):
    """--jobs N: each env installed (built) by a `deepep-env install` child process, N at a time, from the
    carry; then the bytes against the lock and the tests env by env. A child that fails is that env's row."""
    import shutil

    carry = tmp_path / "lt.carry.tgz"
    assert cli_in_process(capsys, "carry", "lt-host", "--to", str(carry), "--no-wheels", "--project", proj.root)[0] == 0
    shutil.rmtree(proj.channel)
    rc, out, err = cli_in_process(capsys, "prove", "lt-host", "--reinstall", "--from-carry", str(carry), "--jobs", "2",
                                  "--json", "--project", proj.root)
    assert rc == 0, err
    (env,) = json.loads(out)["envs"]
    assert env["bytes"] == "same 4/4" and [t["result"] for t in env["tests"]] == ["pass", "pass"]
    run = Path(json.loads(out)["run"])
    assert "child process" in err and (run / "lt-host" / "install.log").is_file()
    assert not (run / "build-pkgs").exists()
    rc, out, err = cli_in_process(capsys, "prove", "lt-host", "--reinstall", "--from-carry", str(tmp_path / "none.tgz"),
                                  "--jobs", "2", "--json", "--project", proj.root)
    assert rc != 0
    rc, _, err = cli_in_process(capsys, "prove", "lt-host", "--relock", "--jobs", "2", "--project", proj.root)
    assert rc == 2 and "--jobs" in err


def test_relock_puts_the_env_tasks_in_pixi_toml_before_its_tests(proj, capsys, monkeypatch):
    """`prove ENV --relock` of an env pixi.toml does not know yet (a spec locked here for the first time,
    round twenty's h200-nvlink-ptx): its tasks are synced after the lock, so its tests run. (The stand-in
    recipes' sources are made-up pins, so the build step is the store's as it stands: the lock is real.)"""
    from deepep_env.views import prove as pv

    monkeypatch.setattr(pv, "build_env", lambda env, project, offline=False: None)
    proj.pixi_toml.unlink()
    rc, out, err = cli_in_process(capsys, "prove", "lt-host", "--relock", "--offline", "--json", "--project", proj.root)
    assert rc == 0, err
    (env,) = json.loads(out)["envs"]
    assert [t["result"] for t in env["tests"]] == ["pass", "pass"]
    assert "lt-host: pixi.toml in step" in err and "deepep-test-intranode" in proj.pixi_toml.read_text()
