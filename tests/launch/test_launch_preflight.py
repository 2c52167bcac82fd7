"""Every launch target renders preflight → test → record (issue 28); the CLI turns it on by default."""
from __future__ import annotations

import shlex

import pytest
import yaml

from cli_runner import cli_in_process
from launch_fixtures import REPO, env_info, kubelet_expand

from deepep_env.base.errors import UserError
from deepep_env.launch import K8sOptions, LaunchOptions, plan_launch, render
from deepep_env.launch.preflight import node_script


def _plan(target: str, **kw):
    return plan_launch(env_info(), LaunchOptions(test="internode", nodes=2, target=target, preflight=True,
                                                 test_args=("--num-tokens", "128"), **kw))


def _order(script: str) -> list[int]:
    return [script.index(s) for s in (" admit gke-a4 ", " doctor gke-a4 ", " fleet report ", '"$@" 2>&1 | tee', " record gke-a4 --test internode")]


@pytest.mark.parametrize("target", ["shell", "slurm", "k8s"])
def test_every_target_runs_preflight_then_test_then_record(target):
    p = _plan(target, k8s=K8sOptions(shared_pvc="fleet"))
    assert p.command[:2] == ("bash", "-c") and p.command[3:] == ("deepep-node", *p.argv)
    script = p.command[2]
    order = _order(script)
    assert order == sorted(order)
    assert "-- --num-tokens 128" in script                   # the record keeps the test's arguments
    r = render(p)
    if target == "k8s":
        job = list(yaml.safe_load_all(r.text))[1]
        c = job["spec"]["template"]["spec"]["containers"][0]
        assert [kubelet_expand(w, {}) for w in c["command"]] == list(p.command)   # reaches bash as written
        assert {"name": "deepep-env-shared", "mountPath": "/deepep-env-shared"} in c["volumeMounts"]
        assert {"name": "deepep-env-shared", "persistentVolumeClaim": {"claimName": "fleet"}} in \
            job["spec"]["template"]["spec"]["volumes"]
        (run_id,) = [e for e in c["env"] if e["name"] == "DEEPEP_ENV_RUN_ID"]
        assert "controller-uid" in run_id["valueFrom"]["fieldRef"]["fieldPath"]
        assert 'dir="/deepep-env-shared/${DEEPEP_ENV_RUN_ID:?}"; n=2;' in script
    elif target == "slurm":
        assert shlex.join(p.command) in r.text.replace(" \\\n  ", " ")
        assert '/deepep-preflight/${SLURM_JOB_ID:?run this through sbatch}"' in script
    else:
        assert r.text.count(" fleet report ") == 4 and "Preflight (each node, before the test)" in r.text


def test_k8s_without_a_shared_claim_checks_each_pod_alone():
    p = _plan("k8s")
    assert 'dir="/tmp/deepep-preflight"; n=1;' in p.command[2]
    assert any("without --shared-pvc" in n for n in render(p).notes)


def test_without_preflight_the_test_runs_bare():
    p = plan_launch(env_info(), LaunchOptions(test="internode", nodes=2, target="shell"))
    assert p.command == p.argv and not p.node_argv


def test_shared_dir_and_timeout_are_checked():
    with pytest.raises(UserError, match="not a usable folder"):
        _plan("shell", shared_dir='/a"b')
    with pytest.raises(UserError, match="not a timeout"):
        _plan("shell", preflight_timeout=0)
    script = node_script(env="e", test="t", test_args=(), nodes=3, folder="/x", tool=("my tool",), timeout=5)
    assert "'my tool' doctor e " in script and "deadline=$((SECONDS + 5))" in script and " -- " not in script
    assert "'my tool' admit e --root \"${DEEPEP_ENV_HOST_ROOT:-/}\" --json --no-write > " in script


def test_no_admit_leaves_the_admission_out():
    assert " admit gke-a4 " not in _plan("shell", admit=False).command[2]
    assert "--no-admit skips it" in " ".join(render(_plan("shell")).text.split())


def test_cli_renders_preflight_by_default(capsys):
    rc, out, err = cli_in_process(capsys, "launch", "gke-a4", "internode", "-n", "2", "--project", REPO, "--json")
    assert rc == 0, err
    import json

    d = json.loads(out)
    assert d["preflight"] is True and " fleet report " in d["command"][2] and " admit gke-a4 " in d["command"][2]
    rc, out, _ = cli_in_process(capsys, "launch", "gke-a4", "internode", "-n", "2", "--project", REPO, "--json",
                                "--no-admit")
    assert " admit gke-a4 " not in json.loads(out)["command"][2]
    rc, out, _ = cli_in_process(capsys, "launch", "gke-a4", "internode", "-n", "2", "--project", REPO, "--json",
                                "--no-preflight")
    d = json.loads(out)
    assert d["preflight"] is False and d["command"] == d["argv"]


def test_k8s_preflight_manifests_validate_strictly():
    kv = pytest.importorskip("kubernetes_validate")
    for doc in yaml.safe_load_all(render(_plan("k8s", k8s=K8sOptions(shared_pvc="fleet"))).text):
        kv.validate(doc, kv.latest_version(), strict=True)
