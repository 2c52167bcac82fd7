"""Rendering launches: structure for 2 and 4 nodes on every target, determinism, input errors, CLI."""
from __future__ import annotations

import json
import shlex
import subprocess

import pytest
import yaml

from cli_runner import cli_in_process
from deepep_env.base.errors import UserError
from deepep_env.launch import TESTS, K8sOptions, LaunchOptions, plan_launch, render
from deepep_env.launch.model import DEFAULT_TESTS_DIR
from deepep_env.launch.shell import MASTER_ADDR_REQUIRED
from launch_fixtures import AWKWARD_ARGS, REPO, env_info, shell_blocks

TARGETS = ("k8s", "slurm", "shell")


def rendered(target, nodes, test="internode", env=None, **kw):
    return render(plan_launch(env or env_info(), LaunchOptions(test=test, nodes=nodes, target=target, **kw)))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("nodes", [2, 4])
def test_every_target_carries_deepep_meaning_of_the_variables(target, nodes):
    r = rendered(target, nodes, test_args=("--num-tokens", "2048"))
    assert r.plan.world_size == nodes
    assert [n["rank"] for n in r.nodes] == list(range(nodes))
    for n in r.nodes:
        v = n["variables"]
        assert v["WORLD_SIZE"] == str(nodes)  # nodes, not processes (not torchrun's meaning)
        assert v["RANK"] == str(n["rank"])
        assert v["MASTER_PORT"] == "8361"
    # one command per node, identical on every node, running DeepEP's script through `deepep-env run`
    argv = list(r.plan.argv)
    assert argv[:4] == ["deepep-env", "run", "gke-a4", "--"]
    assert argv[4:6] == ["bash", "-c"]
    assert f'"{DEFAULT_TESTS_DIR}/test_internode.py" "$@"' in argv[6]
    assert argv[7:] == ["deepep-internode", "--num-tokens", "2048"]
    assert "torchrun" not in r.text.replace("not torchrun's meanings", "").replace("do not wrap this in torchrun", "")
    assert f"on {nodes} node(s)" in r.text.splitlines()[1 if target == "slurm" else 0]


@pytest.mark.parametrize("target", TARGETS)
def test_rendering_is_deterministic(target):
    a = rendered(target, 4, test="low-latency", test_args=tuple(AWKWARD_ARGS))
    b = rendered(target, 4, test="low-latency", test_args=tuple(AWKWARD_ARGS))
    assert a.text == b.text and a.to_dict() == b.to_dict()
    json.dumps(a.to_dict())  # serialisable


@pytest.mark.parametrize("test,script", [("internode", "test_internode.py"), ("low-latency", "test_low_latency.py"),
                                         ("intranode", "test_intranode.py")])
def test_test_names_map_to_deepep_scripts(test, script):
    nodes = 1 if test == "intranode" else 2
    r = rendered("shell", nodes, test=test, master_addr="10.0.0.1")
    assert TESTS[test].script == script
    assert f"/share/deep-ep/tests/{script}" in r.plan.argv[6]
    assert r.plan.argv[7] == f"deepep-{test}"


@pytest.mark.parametrize("test,nodes", [("internode", 1), ("intranode", 2), ("low-latency", 0)])
def test_node_counts_the_tests_cannot_run_are_refused(test, nodes):
    with pytest.raises(UserError) as e:
        rendered("shell", nodes, test=test)
    assert e.value.field == "--nodes"


@pytest.mark.parametrize("kw,field", [
    ({"test": "bogus"}, "TEST"),
    ({"target": "mpirun"}, "--target"),
    ({"master_port": 0}, "--master-port"),
    ({"master_addr": "a b"}, "--master-addr"),
    ({"name": "Bad_Name"}, "--name"),
    ({"name": "x" * 53}, "--name"),
    ({"platform": "gcp-b200"}, "--platform"),
    ({"exports": (("RANK", "1"),)}, "--export"),
    ({"exports": (("1BAD", "1"),)}, "--export"),
    ({"gpus_per_node": 0}, "--gpus-per-node"),
])
def test_bad_input_is_one_user_error(kw, field):
    args = {"test": "internode", "nodes": 2, "target": "shell", **kw}
    with pytest.raises(UserError) as e:
        render(plan_launch(env_info(), LaunchOptions(**args)))
    assert e.value.field == field
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("kw,field", [
    ({"namespace": "Not_A_Namespace"}, "--namespace"),
    ({"rdma_resource": "bad resource"}, "--rdma-resource"),
    ({"gke_rdma_nics": 99}, "--gke-rdma-nics"),
    ({"service": "9svc"}, "--service"),
    ({"image": "has space"}, "--image"),
])
def test_bad_k8s_options_are_user_errors(kw, field):
    with pytest.raises(UserError) as e:
        rendered("k8s", 2, k8s=K8sOptions(**kw))
    assert e.value.field == field


@pytest.mark.parametrize("kw,field", [
    ({"partition": "p\ntouch PW"}, "--partition"),
    ({"partition": "gpu debug"}, "--partition"),
    ({"partition": "-x"}, "--partition"),
    ({"account": "a\ntouch PW"}, "--account"),
    ({"account": "a;b"}, "--account"),
    ({"time": "1\ntouch PW"}, "--time"),
    ({"time": "2 hours"}, "--time"),
    ({"time": "1:2:3:4"}, "--time"),
])
def test_bad_slurm_options_never_reach_the_script(kw, field):
    """Issue 39.2: a newline in --partition/--account/--time became a command of the sbatch script."""
    from deepep_env.launch import SlurmOptions

    with pytest.raises(UserError) as e:
        rendered("slurm", 2, slurm=SlurmOptions(**kw))
    assert e.value.field == field and "\n" not in str(e.value)


@pytest.mark.parametrize("kw", [{"partition": "gpu,debug"}, {"account": "ml-team.a"}, {"time": "30"},
                                {"time": "1-02:00:00"}, {"time": "UNLIMITED"}, {"time": "00:30:00"}])
def test_usual_slurm_options_are_accepted(kw):
    from deepep_env.launch import SlurmOptions

    r = rendered("slurm", 2, slurm=SlurmOptions(**kw))
    (value,) = kw.values()
    assert f"={value}\n" in r.text
    subprocess.run(["bash", "-n", "-c", r.text], check=True)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kw,field", [
    ({"master_addr": "$(touch PW)"}, "--master-addr"),
    ({"master_addr": "node\n0"}, "--master-addr"),
    ({"shared_dir": "$(touch PW)"}, "--shared-dir"),
    ({"shared_dir": "/a`touch PW`"}, "--shared-dir"),
    ({"shared_dir": "/a}b"}, "--shared-dir"),
    ({"shared_dir": "/a\nb"}, "--shared-dir"),
])
def test_every_target_refuses_code_in_an_address_or_folder(target, kw, field):
    with pytest.raises(UserError) as e:
        rendered(target, 2, preflight=True, **kw)
    assert e.value.field == field


def test_a_shared_folder_may_name_variables_of_the_node():
    r = rendered("slurm", 2, preflight=True, shared_dir="${SCRATCH}/pf-$USER", master_addr="fe80::1")
    assert 'dir="${SCRATCH}/pf-$USER/' in r.plan.command[2]


@pytest.mark.parametrize("kw,field", [
    ({"shared_pvc": "Bad Claim"}, "--shared-pvc"),
    ({"node_selector": (("pool", "a\nb"),)}, "--node-selector"),
    ({"gke_gvnic_network": "$(x)"}, "--gke-gvnic-network"),
    ({"gke_rdma_network_prefix": "rdma\n"}, "--gke-rdma-network-prefix"),
    ({"image": "img:1\x1b[2J"}, "--image"),
])
def test_k8s_options_that_land_in_the_manifest_are_checked(kw, field):
    with pytest.raises(UserError) as e:
        rendered("k8s", 2, preflight=True, k8s=K8sOptions(**kw))
    assert e.value.field == field


def test_spec_env_and_exports_are_set_on_every_node_but_nothing_from_this_host():
    env = env_info("h20-roce", ("h20-roce",), env=(("NVSHMEM_QP_DEPTH", "1024"),))
    for target in TARGETS:
        r = rendered(target, 2, env=env, exports=(("FOO", "a b"),))
        for n in r.nodes:
            assert n["variables"]["NVSHMEM_QP_DEPTH"] == "1024"
            assert n["variables"]["FOO"] == "a b"
        # the overlay is computed on each node by `deepep-env run`, never rendered here
        for host_var in ("NVSHMEM_HCA_LIST", "NVSHMEM_IB_GID_INDEX", "DEEP_EP_DEVICE_TO_HCA_MAPPING", "LD_PRELOAD"):
            assert host_var not in r.text


def test_shell_blocks_are_one_command_per_node():
    r = rendered("shell", 4, master_addr="10.0.0.1", master_port=9000, test_args=("--num-tokens", "2048"))
    blocks = shell_blocks(r.text)
    assert len(blocks) == 4
    for rank, block in enumerate(blocks):
        words = shlex.split(block.replace("\\\n", " "))  # shlex keeps backslash-newline; sh drops it
        assert words[:4] == ["MASTER_ADDR=10.0.0.1", "MASTER_PORT=9000", "WORLD_SIZE=4", f"RANK={rank}"]
        assert words[4:] == list(r.plan.argv)
        subprocess.run(["bash", "-n", "-c", block], check=True)
    assert "# ---- node 0 of 4: RANK=0 (rendezvous host" in r.text


def test_shell_without_master_addr_demands_it_on_the_node():
    r = rendered("shell", 2)
    assert all(n["variables"]["MASTER_ADDR"] == MASTER_ADDR_REQUIRED for n in r.nodes)
    assert r.notes and "--master-addr" in r.notes[0]
    block = shell_blocks(r.text)[1]
    p = subprocess.run(["bash", "-c", block], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin"})
    assert p.returncode != 0 and "export MASTER_ADDR=<address of node 0> first" in p.stderr


@pytest.mark.parametrize("nodes", [2, 4])
def test_slurm_script_structure(nodes):
    r = rendered("slurm", nodes, test="low-latency")
    lines = r.text.splitlines()
    assert lines[0] == "#!/bin/bash"
    sb = [x for x in lines if x.startswith("#SBATCH ")]
    for want in (f"--nodes={nodes}", "--ntasks-per-node=1", "--gpus-per-node=8", "--exclusive"):
        assert f"#SBATCH {want}" in sb
    first_code = next(i for i, x in enumerate(lines) if x and not x.startswith("#"))
    assert max(i for i, x in enumerate(lines) if x.startswith("#SBATCH ")) < first_code  # sbatch stops at code
    from deepep_env.launch.slurm import MASTER_ADDR_LINES

    assert 'MASTER_NODE="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)"' in lines
    assert all(x in lines for x in MASTER_ADDR_LINES)     # node 0's NodeAddr (test_launch_slurm.py)
    assert 'export WORLD_SIZE="$SLURM_NNODES"' in lines
    srun = next(x for x in lines if x.startswith("srun "))
    assert f"--ntasks={nodes}" in srun and "--ntasks-per-node=1" in srun and "--export=ALL" in srun
    assert 'export RANK="$SLURM_NODEID"' in r.text
    subprocess.run(["bash", "-n", "-c", r.text], check=True)


def test_slurm_options_and_explicit_master_addr():
    from deepep_env.launch import SlurmOptions

    r = rendered("slurm", 2, master_addr="node-a", slurm=SlurmOptions(partition="gpu", account="ml", time="00:30:00"))
    assert "#SBATCH --partition=gpu" in r.text and "#SBATCH --account=ml" in r.text and "#SBATCH --time=00:30:00" in r.text
    assert "export MASTER_ADDR=node-a" in r.text and "scontrol" not in r.text.split("#SBATCH --time")[1]


def test_runner_python_and_program_are_substitutable():
    r = rendered("shell", 2, runner=(), python="/opt/py/bin/python3", program="/tmp/my prog.py")
    assert r.plan.argv[:2] == ("bash", "-c")
    assert r.plan.argv[2] == "exec /opt/py/bin/python3 '/tmp/my prog.py' \"$@\""
    r = rendered("shell", 2, runner=("srun-wrapper", "{env}"))
    assert r.plan.argv[:2] == ("srun-wrapper", "gke-a4")


# ---- the CLI ---------------------------------------------------------------------------------

def test_cli_prints_the_rendering_and_passes_test_args(capsys):
    rc, out, err = cli_in_process(capsys, "launch", "gke-a4", "internode", "--nodes", "4", "--target", "k8s",
                                  "--project", str(REPO), "--", "--num-tokens", "2048", "--hidden", "7168")
    assert rc == 0, err
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert [d["kind"] for d in docs] == ["Service", "Job"]
    assert docs[1]["spec"]["completions"] == 4
    assert docs[1]["spec"]["template"]["spec"]["containers"][0]["command"][-4:] == ["--num-tokens", "2048", "--hidden", "7168"]


def test_cli_json_and_output_file_and_dir(capsys, tmp_path):
    rc, out, err = cli_in_process(capsys, "launch", "h20-roce", "low-latency", "-n", "2", "-t", "slurm",
                                  "--project", str(REPO), "--output", str(tmp_path) + "/", "--json")
    assert rc == 0, err
    data = json.loads(out)
    assert data["format"] == 1 and data["target"] == "slurm" and data["world_size"] == 2
    written = tmp_path / "deepep-h20-roce-low-latency.sbatch"
    assert data["written"] == str(written) and written.read_text() == data["text"]
    assert data["exports"] == {"NVSHMEM_QP_DEPTH": "1024"}  # from env_specs/h20-roce.toml
    rc, out, err = cli_in_process(capsys, "launch", "h20-roce", "low-latency", "-n", "2", "--project", str(REPO),
                                  "--master-addr", "10.1.1.1", "--output", str(tmp_path / "x.sh"))
    assert rc == 0 and out.strip() == f"wrote {tmp_path / 'x.sh'}"
    assert "MASTER_ADDR=10.1.1.1" in (tmp_path / "x.sh").read_text()
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporaries


@pytest.mark.parametrize("argv,needle", [
    (["gke-a4", "intranode", "-n", "2"], "--nodes: intranode cannot run on 2 node(s)"),
    (["gke-a4", "alltoall", "-n", "2"], "unknown DeepEP test 'alltoall'"),
    (["no-such-env", "internode", "-n", "2"], "unknown env 'no-such-env'"),
    (["gke-a4", "internode", "-n", "2", "--export", "NOEQUALS"], "expected KEY=VALUE"),
    (["gke-a4", "internode", "-n", "2", "--security", "root"], "unknown security mode"),
])
def test_cli_errors_are_one_line_exit_2(capsys, argv, needle):
    rc, out, err = cli_in_process(capsys, "launch", *argv, "--project", str(REPO))
    assert rc == 2
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
