"""The launcher's sbatch script on a real Slurm (issue 57): `deepep-env launch … --target slurm` renders
it, `sbatch` submits it to a slurmctld with two slurmd (tests/slurm_fixtures.py, .ci/setup-slurm.sh),
and the job's preflight (doctor on each node into the shared folder under $SLURM_SUBMIT_DIR, the fleet
report and fleet.html), the test and `deepep-env record` all run for real. The test program is a
stand-in (tests/fixtures/launch/slurm_standin.py): no GPU, DeepEP's launcher contract, DeepEP-shaped
case lines. Each node's host is a captured host tree (the TaskProlog points DEEPEP_ENV_HOST_ROOT at it).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_runner import cli_in_process
from launch_fixtures import FIXTURES, REPO, free_port, node_tool
from slurm_fixtures import NODES, PARTITION, ROOTS_VAR, SlurmCluster, slurm  # noqa: F401  (the fixture)
from verify_fixtures import make_project

from deepep_env.launch.slurm import MASTER_ADDR_LINES

ENV = "h200-nvlink"
STANDIN = FIXTURES / "slurm_standin.py"


def _roots(host_tree, tmp_path: Path, hosts: tuple[str, ...]) -> Path:
    roots = tmp_path / "roots"
    for node, host in zip(NODES, hosts):
        shutil.copytree(host_tree(host), roots / node, symlinks=True)
    return roots


def _render(capsys, tmp_path: Path, proj: Path, port: int, *test_args: str) -> Path:
    out = tmp_path / "submit"
    out.mkdir()
    rc, _, err = cli_in_process(
        capsys, "launch", ENV, "internode", "--nodes", str(len(NODES)), "--target", "slurm", "--project", str(proj),
        "--partition", PARTITION, "--time", "5", "--master-port", str(port), "--preflight-timeout", "60",
        "--runner", "", "--python", sys.executable, "--program", str(STANDIN), "--tool", str(node_tool(tmp_path)),
        "--output", str(out), "--", *test_args)
    assert rc == 0, err
    (script,) = out.glob("*.sbatch")
    return script


def _submit(slurm: SlurmCluster, capsys, tmp_path: Path, host_tree, hosts: tuple[str, ...], *test_args: str):
    proj = make_project(tmp_path / "proj")
    roots = _roots(host_tree, tmp_path, hosts)
    script = _render(capsys, tmp_path, proj, free_port(), "--out", str(tmp_path / "seen"), *test_args)
    env = slurm.environ(PYTHONPATH=str(REPO), DEEPEP_ENV_PROJECT=str(proj), **{ROOTS_VAR: str(roots)})
    job_id = slurm.sbatch(script, script.parent, env)
    t0 = time.monotonic()
    fields = slurm.wait(job_id)
    output = script.parent / f"{script.stem}-{job_id}.out"
    assert output.is_file(), f"no {output.name} in the submit folder\n{slurm.logs()}"
    return job_id, fields, output.read_text(), script.parent, proj, time.monotonic() - t0


def test_slurm_runs_preflight_test_and_record_on_two_nodes(slurm, capsys, tmp_path, host_tree):
    job_id, job, text, submit, proj, _ = _submit(slurm, capsys, tmp_path, host_tree, ("gcp-b200", "gcp-b200"))
    assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0"), text
    # --nodes=2 --ntasks-per-node=1 --gpus-per-node=8 --exclusive, as Slurm granted them:
    assert (job["NumNodes"], job["NumTasks"], job["OverSubscribe"]) == ("2", "2", "NO"), job
    assert job.get("TresPerNode") == "gres:gpu:8", job
    assert "fleet: PASS: 2 of 2 node(s)" in text and text.count("[testing] Running with") == 4
    run = submit / "deepep-preflight" / job_id                   # the shared folder under $SLURM_SUBMIT_DIR
    assert sorted(p.name for p in run.glob("node-*.json")) == ["node-0.json", "node-1.json"]
    assert (run / "fleet.html").is_file()
    for rank in (0, 1):
        assert "... passed" in (run / f"test-{rank}.log").read_text()
    seen = {r: json.loads((tmp_path / "seen" / f"rank-{r}.json").read_text()) for r in (0, 1)}
    for rank, node in enumerate(NODES):
        s = seen[rank]
        assert (s["RANK"], s["SLURM_NODEID"], s["SLURM_PROCID"], s["SLURMD_NODENAME"]) == (str(rank),) * 3 + (node,)
        assert s["WORLD_SIZE"] == "2" and s["SLURM_JOB_ID"] == job_id
        assert s["SLURM_GPUS_ON_NODE"] == "8"                        # --gpus-per-node=8 through GRES
        assert s["DEEPEP_ENV_HOST_ROOT"].endswith(f"/roots/{node}")
    assert seen[0]["MASTER_ADDR"] == seen[1]["MASTER_ADDR"]
    recs = [json.loads(p.read_text()) for p in sorted((proj / "verified" / ENV).glob("*.json"))]
    assert len(recs) == 2 and all(r["test"] == "internode" and r["passed"] and r["exit_code"] == 0 for r in recs)
    assert {r["host"]["node"] for r in recs} == set(NODES)


def test_slurm_a_failing_doctor_stops_the_job_with_exit_3_and_no_record(slurm, capsys, tmp_path, host_tree):
    job_id, job, text, submit, proj, _ = _submit(slurm, capsys, tmp_path, host_tree,
                                                 ("gcp-b200", "gcp-b200-port-down"))
    assert (job["JobState"], job["ExitCode"]) == ("FAILED", "3:0"), text
    # The batch step's report: the stopping node's own lines can be lost when srun kills the step.
    assert "first node that would break the job: node-1" in text, text
    assert f"the preflight stopped the test ({submit}/deepep-preflight/{job_id}/fleet.html; srun exited" in text
    run = submit / "deepep-preflight" / job_id
    assert sorted(p.name for p in run.glob("node-*.json")) == ["node-0.json", "node-1.json"]
    assert (run / "fleet.html").is_file() and not list(run.glob("test-*.log"))
    assert not (tmp_path / "seen").exists() and "[testing]" not in text     # the test never started
    assert not (proj / "verified").exists()


def test_slurm_a_test_failing_on_one_node_fails_the_job(slurm, capsys, tmp_path, host_tree):
    """--kill-on-bad-exit: node 1's test exits 1 at once; node 0's would run 120 s but is stopped."""
    job_id, job, text, submit, proj, took = _submit(slurm, capsys, tmp_path, host_tree, ("gcp-b200", "gcp-b200"),
                                                    "--fail-rank", "1", "--wait", "120")
    assert job["JobState"] == "FAILED" and job["ExitCode"] != "0:0", text
    assert took < 100 and not (tmp_path / "seen" / "rank-0.done").exists()
    assert "... failed" in (submit / "deepep-preflight" / job_id / "test-1.log").read_text()
    recs = [json.loads(p.read_text()) for p in (proj / "verified" / ENV).glob("*.json")]
    assert recs and not any(r["passed"] for r in recs)


# -- what the real run taught the renderer (no Slurm needed) -------------------------------------

@pytest.mark.parametrize("scontrol, want", [({"FAKE_NODEADDR_n0": "10.0.0.7"}, "10.0.0.7"),   # NodeAddr != name
                                            ({}, "n0"),                                       # NodeAddr = name
                                            ({"FAKE_SCONTROL_NODE": "hidden"}, "n0")])        # node info hidden
def test_slurm_master_addr_is_node_0s_nodeaddr(scontrol, want):
    """The real run: NodeName=n0 NodeAddr=127.0.0.1 gave MASTER_ADDR=n0, which node 1 could not resolve.
    The script now asks for node 0's NodeAddr (what Slurm itself connects to), else keeps the name."""
    script = "set -euo pipefail\n" + "\n".join(MASTER_ADDR_LINES) + '\necho "$MASTER_ADDR"\n'
    env = dict(os.environ, PATH=f"{FIXTURES / 'bin'}{os.pathsep}{os.environ['PATH']}", SLURM_JOB_NODELIST="n0,n1",
               **scontrol)
    p = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=30)
    assert (p.returncode, p.stdout) == (0, want + "\n"), p.stderr


@pytest.mark.parametrize("srun_rc, stopped, want", [(143, True, 3), (1, False, 1), (0, False, 0)])
def test_slurm_job_exits_3_when_a_node_s_preflight_stopped(tmp_path, srun_rc, stopped, want):
    """The real run: node 0's preflight exited 3, --kill-on-bad-exit terminated node 1 (143) and the job
    ended ExitCode=143:0. The stopped node leaves a mark in the shared folder; the script says 3."""
    from deepep_env.launch import LaunchOptions, plan_launch, render
    from launch_fixtures import env_info

    script = tmp_path / "job.sbatch"
    script.write_text(render(plan_launch(env_info(), LaunchOptions(test="internode", nodes=2, target="slurm",
                                                                   preflight=True))).text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mark = tmp_path / "deepep-preflight" / "7" / "preflight-stopped"
    (bin_dir / "srun").write_text("#!/bin/bash\n" + (f"mkdir -p {mark.parent}; : > {mark}\n" if stopped else "")
                                  + f"exit {srun_rc}\n")
    (bin_dir / "srun").chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{FIXTURES / 'bin'}{os.pathsep}{os.environ['PATH']}",
               SLURM_NNODES="2", SLURM_JOB_NODELIST="n0,n1", SLURM_JOB_ID="7", SLURM_SUBMIT_DIR=str(tmp_path))
    p = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30)
    assert p.returncode == want, p.stderr
    assert ("/deepep-preflight/7/fleet.html; srun exited 143); exit 3" in p.stderr) == stopped
