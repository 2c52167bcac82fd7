"""Real multi-"node" launches on loopback, through the rendered commands themselves.

Each node is a process group on this machine; the test program is the stand-in
(tests/fixtures/launch/standin.py), which — like DeepEP's tests — spawns its own per-GPU processes
and joins them at tcp://MASTER_ADDR:MASTER_PORT (gloo when torch is installed, else sockets).
`deepep-env run` is replaced by a fake that only sets CONDA_PREFIX to a prefix holding the
stand-in as share/deep-ep/tests/test_*.py, so the default rendering runs unmodified.
"""
from __future__ import annotations

import shlex

import yaml
import pytest

from cli_runner import cli_argv, cli_in_process
from deepep_env.launch import LaunchOptions, plan_launch, render
from launch_fixtures import (
    BACKENDS, REPO, STANDIN, assert_launch_ok, env_info, free_port, kubelet_env, kubelet_expand, make_fake_node, run_all,
    shell_blocks, standin_args,
)

NLOCAL = 2  # "GPUs" per node: processes the stand-in spawns itself, as DeepEP's tests do


@pytest.fixture
def node(tmp_path):
    return make_fake_node(tmp_path)


def cli_render(capsys, tmp_path, *argv) -> str:
    out = tmp_path / "rendered"
    rc, _, err = cli_in_process(capsys, "launch", "--project", REPO, "--output", out, "--no-preflight", *argv)
    assert rc == 0, err
    return out.read_text()


@pytest.mark.parametrize("backend", BACKENDS)
def test_shell_blocks_launch_two_nodes(capsys, tmp_path, node, backend):
    port = free_port()
    args = standin_args(node.out, nodes=2, addr="127.0.0.1", port=port, backend=backend, nlocal=NLOCAL)
    text = cli_render(capsys, tmp_path, "gke-a4", "internode", "--nodes", "2", "--target", "shell",
                      "--master-addr", "127.0.0.1", "--master-port", str(port), "--gpus-per-node", str(NLOCAL),
                      "--export", "GLOO_SOCKET_IFNAME=lo", "--", *args)
    blocks = shell_blocks(text)
    assert len(blocks) == 2
    procs = run_all([(["bash", "-c", block], node.environ()) for block in blocks])
    res = assert_launch_ok(procs, node.out, nodes=2, nlocal=NLOCAL, addr="127.0.0.1", port=port, args=args,
                           run_env="gke-a4", prefix=node.prefix, backend=backend)
    assert all(r["exports"]["GLOO_SOCKET_IFNAME"] == "lo" for r in res)


def test_shell_blocks_take_master_addr_from_the_node(tmp_path, node):
    """Without --master-addr the same blocks run once MASTER_ADDR is exported on each node."""
    port = free_port()
    args = standin_args(node.out, nodes=2, addr="127.0.0.1", port=port, backend="socket", nlocal=NLOCAL)
    r = render(plan_launch(env_info(), LaunchOptions(test="internode", nodes=2, target="shell", master_port=port,
                                                     gpus_per_node=NLOCAL, test_args=tuple(args))))
    procs = run_all([(["bash", "-c", b], node.environ(MASTER_ADDR="127.0.0.1")) for b in shell_blocks(r.text)])
    assert_launch_ok(procs, node.out, nodes=2, nlocal=NLOCAL, addr="127.0.0.1", port=port, args=args, prefix=node.prefix)


def test_substituted_runner_and_program(tmp_path, node):
    """The hidden --runner/--python/--program: plain python running the stand-in, no `deepep-env run`."""
    import sys

    port = free_port()
    args = standin_args(node.out, nodes=2, addr="127.0.0.1", port=port, backend="socket", nlocal=NLOCAL)
    r = render(plan_launch(env_info(), LaunchOptions(
        test="low-latency", nodes=2, target="shell", master_addr="127.0.0.1", master_port=port, gpus_per_node=NLOCAL,
        test_args=tuple(args), runner=(), python=sys.executable, program=str(STANDIN))))
    assert r.plan.argv[0] == "bash"
    env = node.environ()
    env["PATH"] = env["PATH"].split(":", 1)[1]  # no fake deepep-env, no fake python
    procs = run_all([(["bash", "-c", b], env) for b in shell_blocks(r.text)])
    assert_launch_ok(procs, node.out, nodes=2, nlocal=NLOCAL, addr="127.0.0.1", port=port, args=args, run_env=None)


def test_slurm_script_launches_two_nodes_with_fake_srun(capsys, tmp_path, node):
    backend = "socket"  # gloo runs once, in the shell test: 4 torch imports cost ~20 s on 2 cores
    port = free_port()
    # "Nodes" 127.0.0.1 and 127.0.0.2 (both loopback): MASTER_ADDR must be the first one.
    args = standin_args(node.out, nodes=2, addr="127.0.0.1", port=port, backend=backend, nlocal=NLOCAL)
    script = tmp_path / "job.sbatch"
    script.write_text(cli_render(capsys, tmp_path, "h20-roce", "internode", "-n", "2", "-t", "slurm",
                                 "--master-port", str(port), "--gpus-per-node", str(NLOCAL),
                                 "--export", "GLOO_SOCKET_IFNAME=lo", "--", *args))
    log = tmp_path / "srun.log"
    env = node.environ(SLURM_NNODES="2", SLURM_JOB_NODELIST="127.0.0.1,127.0.0.2", FAKE_SRUN_LOG=str(log))
    procs = run_all([(["bash", str(script)], env)])
    res = assert_launch_ok(procs, node.out, nodes=2, nlocal=NLOCAL, addr="127.0.0.1", port=port, args=args,
                           run_env="h20-roce", prefix=node.prefix, backend=backend)
    assert all(r["exports"]["NVSHMEM_QP_DEPTH"] == "1024" for r in res)  # spec env reached the tasks
    assert log.read_text().splitlines()[0] == "ntasks=2"
    assert "rendezvous 127.0.0.1:" in procs[0].stderr


def test_slurm_script_refuses_the_wrong_node_count(tmp_path, node):
    r = render(plan_launch(env_info(), LaunchOptions(test="internode", nodes=4, target="slurm")))
    script = tmp_path / "job.sbatch"
    script.write_text(r.text)
    (p,) = run_all([(["bash", str(script)], node.environ(SLURM_NNODES="2", SLURM_JOB_NODELIST="a,b"))])
    assert p.returncode == 2 and "needs 4 nodes, got 2" in p.stderr


def test_slurm_task_wrapper_refuses_two_tasks_on_a_node(tmp_path, node):
    """RANK = SLURM_NODEID is only right with one task per node; the wrapper checks SLURM_PROCID."""
    from deepep_env.launch.slurm import TASK_WRAPPER

    (p,) = run_all([(["bash", "-c", TASK_WRAPPER, "deepep-node", "true"],
                     node.environ(SLURM_NODEID="0", SLURM_PROCID="1"))])
    assert p.returncode == 2 and "one task per node" in p.stderr


def test_k8s_indexed_job_containers_on_loopback(capsys, tmp_path, node):
    """Run the Job's container command once per completion index, with the env the kubelet would
    give it (RANK from the completion-index annotation, $(…)/$$ expansion applied)."""
    port = free_port()
    args = standin_args(node.out, nodes=2, addr="127.0.0.1", port=port, backend="socket", nlocal=NLOCAL)
    text = cli_render(capsys, tmp_path, "gke-a4", "internode", "-n", "2", "-t", "k8s", "--master-addr", "127.0.0.1",
                      "--master-port", str(port), "--gpus-per-node", str(NLOCAL), "--", *args)
    job = [d for d in yaml.safe_load_all(text) if d and d["kind"] == "Job"][0]
    assert job["spec"]["completionMode"] == "Indexed"
    c = job["spec"]["template"]["spec"]["containers"][0]
    commands = []
    for index in range(job["spec"]["completions"]):
        env = kubelet_env(c, index)
        argv = [kubelet_expand(w, env) for w in c["command"]]
        commands.append((argv, node.environ(**env)))
    procs = run_all(commands)
    assert_launch_ok(procs, node.out, nodes=2, nlocal=NLOCAL, addr="127.0.0.1", port=port, args=args,
                     run_env="gke-a4", prefix=node.prefix)


def test_shell_blocks_through_the_real_deepep_env_run(capsys, tmp_path, node):
    """The same blocks with the real `deepep-env run` (overlay/activation.py) instead of the fake:
    an installed-looking prefix (conda-meta/deepep-env.json) holding the stand-in as DeepEP's test."""
    activation = pytest.importorskip("deepep_env.overlay.activation")
    import json
    import sys

    meta = node.prefix / activation.META_RELPATH
    meta.parent.mkdir(parents=True)
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    meta.write_text(json.dumps({"env": "gke-a4", "platforms": ["gke-a4"],
                                "python": {"provider": "host", "version": py}, "spec_env": {}}))
    (node.prefix / "lib" / f"python{py}" / "site-packages").mkdir(parents=True)
    (node.bin / "deepep-env").write_text(f"#!/bin/sh\nexec {shlex.join(cli_argv())} \"$@\"\n")
    port = free_port()
    args = standin_args(node.out, nodes=2, addr="127.0.0.1", port=port, backend="socket", nlocal=NLOCAL)
    text = cli_render(capsys, tmp_path, "gke-a4", "internode", "-n", "2", "--master-addr", "127.0.0.1",
                      "--master-port", str(port), "--gpus-per-node", str(NLOCAL), "--", *args)
    env = node.environ(DEEPEP_ENV_PREFIX=str(node.prefix))
    procs = run_all([(["bash", "-c", b], env) for b in shell_blocks(text)])
    assert_launch_ok(procs, node.out, nodes=2, nlocal=NLOCAL, addr="127.0.0.1", port=port, args=args,
                     run_env=None, prefix=node.prefix)
