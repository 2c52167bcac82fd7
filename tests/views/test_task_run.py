"""`deepep-env task`: the pixi.toml tasks, run without pixi — same names, same env, same command.

Local channel (real rattler-build) → lock → check → install (as the task's dependency) → activate →
run DeepEP's (stand-in) intranode test with the overlay applied."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

import lock_fixtures as lf
from cli_runner import cli_in_process, cli_subprocess

REPO = Path(__file__).resolve().parents[2]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@pytest.fixture
def proj(lt_world, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(lt_world.root / "cache"))
    p = lf.project_copy(lt_world, tmp_path / "proj")
    for env in ("lt-host", "lt-conda"):   # pixi.toml has an environment per locked spec
        assert cli_in_process(capsys, "lock", env, "--project", p.root)[0] == 0
        assert cli_in_process(capsys, "lock", env, "--check", "--project", p.root)[0] == 0
    assert cli_in_process(capsys, "pixi", "sync", "--project", p.root)[0] == 0
    return p


def _last_json(stdout: str) -> dict:
    return json.loads([ln for ln in stdout.splitlines() if ln.startswith("{")][-1])


def test_task_installs_then_runs_the_test_with_the_overlay(proj, host_tree):
    """As `pixi run -e lt-host deepep-test-intranode`: install into pixi's prefix, activate it (the
    deepep-env package's activate.d applies the host overlay), run the manifest's command there."""
    from deepep_env.install.installer import read_marker

    host = {"DEEPEP_ENV_HOST_ROOT": str(host_tree("gcp-b200")), "DEEPEP_ENV_PLATFORM": "gcp-b200"}
    # `deepep-env …` as a new process (the task runs commands in subprocesses anyway)
    r = cli_subprocess("task", "deepep-test-intranode", "-e", "lt-host", "--project", proj.root,
                       "--", "--num-processes", "2", env=dict(os.environ, **host), cwd=proj.root)
    assert r.returncode == 0, r.stderr
    out = _last_json(r.stdout)
    prefix = proj.prefix_for("lt-host")
    assert prefix == proj.root / ".pixi" / "envs" / "lt-host"   # pixi's layout: no second prefix
    assert out["test"] == "intranode"
    assert out["argv"] == ["--num-processes", "2"]               # pixi-style extra arguments
    assert out["conda_prefix"] == str(prefix)                    # the test ran from the installed prefix
    assert out["pixi_environment_name"] == "lt-host"
    assert out["spec_env"]["NCCL_NVLS_ENABLE"] == "0"            # the feature's activation.env
    assert read_marker(prefix)["env"] == "lt-host"               # installed from pixi.lock first
    # The host overlay came from the environment's own activation, and is `deepep-env overlay`'s.
    ov = cli_subprocess("overlay", "--root", host["DEEPEP_ENV_HOST_ROOT"], "--platform", "gcp-b200",
                        "--prefix", prefix, "-f", "json", env=dict(os.environ, PYTHONPATH=str(REPO)), check=True)
    want = {k: v for k, v in json.loads(ov.stdout)["env"].items() if v is not None}
    assert want["NVSHMEM_IB_GID_INDEX"] == "3" and "DEEP_EP_DEVICE_TO_HCA_MAPPING" in want
    assert {k: out["environ"].get(k) for k in want} == want
    assert "_DEEPEP_ENV_UNDO" in out["environ"]                  # deactivate.d can put it all back
    # the manifest's command names no host path: the activation resolves the spec's (host) python
    assert 'deepep-test-intranode (lt-host): "$DEEPEP_ENV_PYTHON" $CONDA_PREFIX/share/deep-ep/tests/test_intranode.py' \
        in r.stderr
    assert out["python"] == sys.executable                       # the spec's interpreter ran the test
    # The run wrote its test record, bound to the lock digest, and `verified` shows it (issue 28).
    (rec,) = (proj.root / "verified" / "lt-host").glob("*-intranode-*.json")
    data = json.loads(rec.read_text())
    assert data["passed"] and data["args"] == ["--num-processes", "2"] and data["host"]["platform"] == "gcp-b200"
    assert "record verified/lt-host/" in r.stderr
    v = cli_subprocess("verified", "--json", "--project", proj.root, cwd=proj.root, check=True)
    (cell,) = json.loads(v.stdout)["cells"]
    assert (cell["env"], cell["test"], cell["status"], cell["matches_lock"]) == ("lt-host", "intranode", "pass", True)
    # A second run re-uses the install (no-op) and runs the low-latency test.
    r = cli_subprocess("task", "deepep-test-low-latency", "-e", "lt-host", "--project", proj.root, cwd=proj.root)
    assert r.returncode == 0, r.stderr
    assert "installed" not in r.stderr and _last_json(r.stdout)["test"] == "low_latency"


def test_activate_uses_the_installed_prefix(proj):
    r = cli_subprocess("install", "lt-host", "--project", proj.root, cwd=proj.root)
    assert r.returncode == 0, r.stderr
    prefix = proj.prefix_for("lt-host")
    env = dict(os.environ, PYTHONPATH=str(REPO), DEEPEP_ENV_PREFIX=str(prefix))
    a = cli_subprocess("activate", "lt-host", "--shell", "bash", env=env, cwd=proj.root, timeout=120)
    assert a.returncode == 0, a.stderr
    assert str(prefix) in a.stdout and "CONDA_PREFIX" in a.stdout


def test_plan_is_the_manifest_definition(proj, capsys):
    rc, out, err = cli_in_process(capsys, "task", "deepep-test-intranode", "-e", "lt-host", "--json",
                                  "--project", proj.root)
    assert rc == 0, err
    plan = json.loads(out)
    m = tomllib.loads(proj.pixi_toml.read_text())
    tasks = m["feature"]["lt-host"]["tasks"]
    assert [s["name"] for s in plan["steps"]] == ["deepep-test-intranode"]
    assert [s["cmd"] for s in plan["steps"]] == [tasks["deepep-test-intranode"]["cmd"]]
    assert plan["prefix"] == str(proj.prefix_for("lt-host")) and plan["environment"] == "lt-host"


def test_listing_and_errors(proj, capsys):
    rc, out, _ = cli_in_process(capsys, "task", "--project", proj.root, "--json")
    assert rc == 0 and "deepep-test-internode" in json.loads(out)["lt-conda"]
    assert "deepep-test-internode" not in json.loads(out)["lt-host"]
    rc, _, err = cli_in_process(capsys, "task", "deepep-test-intranode", "--project", proj.root)
    assert rc == 2 and "several environments" in err and "lt-conda, lt-host" in err
    rc, _, err = cli_in_process(capsys, "task", "deepep-test-internode", "--dry-run", "--project", proj.root)
    assert rc == 0  # only lt-conda has it: chosen without -e
    rc, _, err = cli_in_process(capsys, "task", "nope", "-e", "lt-host", "--project", proj.root)
    assert rc == 2 and "has no task 'nope'" in err
    rc, _, err = cli_in_process(capsys, "task", "deepep-test-intranode", "-e", "nope", "--project", proj.root)
    assert rc == 2 and "unknown pixi environment 'nope'" in err


def test_failing_task_propagates_its_exit_status(proj, capsys):
    text = proj.pixi_toml.read_text()
    text += '\n[feature.lt-host.tasks.fails]\ncmd = "echo $GREETING && exit 3"\nenv = { GREETING = "hi-$PIXI_ENVIRONMENT_NAME" }\n'
    proj.pixi_toml.write_text(text)
    r = cli_subprocess("task", "fails", "-e", "lt-host", "--project", proj.root, cwd=proj.root)
    assert r.returncode == 3
    assert "hi-lt-host" in r.stdout and "failed (exit 3)" in r.stderr
