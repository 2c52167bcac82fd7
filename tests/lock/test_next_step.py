"""Every suggestion for an environment that is not installed names a step the tool then runs (issue 40.6):
plan's lock row, doctor's env.not-installed, install's refusal and pixi.toml's comments ask one module."""
from __future__ import annotations

import os

from cli_runner import cli_subprocess
from deepep_env.base.project import find_project
from deepep_env.lock.next_step import next_step
from platform_fixtures import REPO, no_traceback

ENV = {**os.environ, "DEEPEP_ENV_PROJECT": str(REPO)}


def test_each_state_gets_the_command_that_moves_it():
    project = find_project(str(REPO))
    locked = next_step(project, "h200-nvlink")               # on this machine: after what it lacks (test_lock_is_enough)
    assert locked.state == "locked" and locked.command.endswith("deepep-env install h200-nvlink")
    seed = next_step(project, "gcp-b200-seed")                   # NVSHMEM 3.5.19's source is not pinned here
    assert seed.state == "unpinned" and seed.command == "deepep-env fetch gcp-b200-seed --from DIR"
    assert "source nvshmem" in seed.why and "build" not in seed.command
    assert next_step(project, "h200-nvlink-ptx").command == \
        "deepep-env build h200-nvlink-ptx && deepep-env lock h200-nvlink-ptx"


def test_install_doctor_activate_and_plan_agree_on_the_step_and_fetch_accepts_it(tmp_path):
    inst = cli_subprocess("install", "gcp-b200-seed", env=ENV)
    no_traceback(inst)
    assert inst.returncode == 2 and len(inst.stderr.strip().splitlines()) == 1
    assert "`deepep-env fetch gcp-b200-seed --from DIR` first" in inst.stderr and "deepep-env install" not in inst.stderr
    doc = cli_subprocess("doctor", "gcp-b200-seed", "--demo-host", "gcp-b200-demo", env=ENV)
    assert "`deepep-env fetch gcp-b200-seed --from DIR`" in doc.stdout and "then `deepep-env build gcp-b200-seed" in doc.stdout
    act = cli_subprocess("activate", "gcp-b200-seed", "--demo-host", "gcp-b200-demo", env=ENV)
    assert act.returncode == 2 and len(act.stderr.strip().splitlines()) == 1
    assert "`deepep-env fetch gcp-b200-seed --from DIR` first" in act.stderr and "run `deepep-env install" not in act.stderr
    plan = cli_subprocess("plan", "gcp-b200-seed", "--json", env=ENV)
    assert '"hint": "deepep-env fetch gcp-b200-seed --from DIR"' in plan.stdout
    # the suggested command exists as written: with an empty DIR it says what is missing, no usage error
    (tmp_path / "d").mkdir()
    fetch = cli_subprocess("fetch", "gcp-b200-seed", "--from", str(tmp_path / "d"), "--source-cache", str(tmp_path / "c"), env=ENV)
    no_traceback(fetch)
    assert fetch.returncode != 0 and "see `" not in fetch.stderr and "nvshmem" in fetch.stderr
