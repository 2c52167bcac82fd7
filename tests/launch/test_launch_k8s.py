"""Kubernetes rendering: strict offline validation (kubernetes-validate) and the structure seed 001
needs — Indexed Job + headless Service, hostNetwork, GPU/RDMA resources, GKE A4 networks/mounts."""
from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
import yaml

kubernetes_validate = pytest.importorskip("kubernetes_validate")

from deepep_env.launch import K8sOptions, LaunchOptions, plan_launch, render  # noqa: E402
from deepep_env.launch.k8s import COMPLETION_INDEX_FIELD, k8s_escape  # noqa: E402
from launch_fixtures import AWKWARD_ARGS, env_info, kubelet_env, kubelet_expand  # noqa: E402

# GKE 1.33 is seed 001's node version; the newest bundled schema catches removals.
K8S_VERSIONS = ("1.33.0", kubernetes_validate.latest_version())
PLATFORM_ENVS = {
    "gke-a4": env_info("gke-a4", ("gke-a4",)),
    "h20-roce": env_info("h20-roce", ("h20-roce",), env=(("NVSHMEM_QP_DEPTH", "1024"),)),
    "gcp-b200": env_info("gcp-b200", ("gcp-b200",)),
    "nvlink": env_info("h200-nvlink", ("nvlink",), env=(("NCCL_NVLS_ENABLE", "0"),)),
}


def k8s(nodes, env="gke-a4", test="internode", **kw):
    k8s_opts = kw.pop("k8s", K8sOptions())
    return render(plan_launch(PLATFORM_ENVS[env], LaunchOptions(test=test, nodes=nodes, target="k8s", k8s=k8s_opts, **kw)))


def parsed(r):
    docs = [d for d in yaml.safe_load_all(r.text) if d is not None]
    assert docs == [json.loads(json.dumps(m)) for m in r.manifests]  # the text is the data
    return docs


def pod_of(docs):
    job = next(d for d in docs if d["kind"] == "Job")
    return job, job["spec"]["template"], job["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("nodes", [2, 4])
@pytest.mark.parametrize("env", sorted(PLATFORM_ENVS))
@pytest.mark.parametrize("security", ["privileged", "capabilities"])
def test_manifests_validate_strictly(nodes, env, security):
    test = "low-latency"
    r = k8s(nodes, env=env, test=test, test_args=tuple(AWKWARD_ARGS),
            k8s=K8sOptions(security=security, namespace="ml", node_selector=(("cloud.google.com/gke-nodepool", "a4"),)))
    for doc in parsed(r):
        for version in K8S_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)


def test_strict_validation_is_really_strict():
    job = copy.deepcopy(parsed(k8s(2))[1])
    job["spec"]["template"]["spec"]["hostNetwrok"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, K8S_VERSIONS[-1], strict=True)


@pytest.mark.parametrize("nodes", [2, 4])
def test_kubernetes_validate_cli_accepts_the_written_file(tmp_path, nodes):
    f = tmp_path / "job.yaml"
    f.write_text(k8s(nodes).text)
    exe = [sys.executable, "-m", "kubernetes_validate"]
    p = subprocess.run([*exe, "--strict", "-k", K8S_VERSIONS[0], str(f)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(" passed for resource ") == 2


@pytest.mark.parametrize("nodes", [2, 4])
def test_indexed_job_and_headless_service(nodes):
    r = k8s(nodes, master_port=9100)
    svc, job = parsed(r)
    name = r.plan.name
    assert svc["kind"] == "Service" and svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["ports"][0]["port"] == 9100
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == nodes
    assert spec["backoffLimit"] == 0
    tmpl = spec["template"]
    # the Service selects exactly this job's pods, and the pods sit in its DNS subdomain
    assert all(tmpl["metadata"]["labels"][k] == v for k, v in svc["spec"]["selector"].items())
    assert tmpl["spec"]["subdomain"] == svc["metadata"]["name"]
    _, _, c = pod_of([svc, job])
    env = {e["name"]: e for e in c["env"]}
    assert env["MASTER_ADDR"]["value"] == f"{name}-0.{svc['metadata']['name']}"  # seed 001: <job>-0.<svc>
    assert env["MASTER_PORT"]["value"] == "9100"
    assert env["WORLD_SIZE"]["value"] == str(nodes)
    assert env["JOB_COMPLETION_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"] == COMPLETION_INDEX_FIELD
    assert env["RANK"]["value"] == "$(JOB_COMPLETION_INDEX)"  # defined before RANK, so Kubernetes expands it
    assert [e["name"] for e in c["env"]][:5] == ["MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "JOB_COMPLETION_INDEX", "RANK"]
    assert kubelet_env(c, index=3)["RANK"] == "3"
    assert c["command"][:4] == ["deepep-env", "run", "gke-a4", "--"]  # overlay computed in the pod
    assert [n["pod_hostname"] for n in r.nodes] == [f"{name}-{i}" for i in range(nodes)]


def test_pod_runs_one_per_node_on_the_host_network_with_gpus():
    job, tmpl, c = pod_of(parsed(k8s(2)))
    ps = tmpl["spec"]
    assert ps["hostNetwork"] is True and ps["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert ps["restartPolicy"] == "Never"
    anti = ps["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert anti["labelSelector"]["matchLabels"] == {"deepep-env.io/launch": job["metadata"]["name"]}
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert c["securityContext"] == {"privileged": True}
    shm = next(v for v in ps["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"] == {"medium": "Memory"}
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]


def test_gke_a4_networks_mounts_and_no_rdma_plugin():
    _, tmpl, c = pod_of(parsed(k8s(4)))
    ann = tmpl["metadata"]["annotations"]
    assert ann["networking.gke.io/default-interface"] == "eth0"
    ifaces = json.loads(ann["networking.gke.io/interfaces"])
    assert ifaces[0] == {"interfaceName": "eth0", "network": "default"}
    assert ifaces[1] == {"interfaceName": "eth1", "network": "gvnic-1"}
    assert ifaces[2:] == [{"interfaceName": f"eth{i + 2}", "network": f"rdma-{i}"} for i in range(8)]
    vols = {v["name"]: v for v in tmpl["spec"]["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    by_host = {v["hostPath"]["path"]: mounts[n] for n, v in vols.items() if "hostPath" in v}
    assert by_host == {"/home/kubernetes/bin/nvidia": "/usr/local/nvidia", "/home/kubernetes/bin/gib": "/usr/local/gib"}
    assert list(c["resources"]["limits"]) == ["nvidia.com/gpu"]  # RDMA NICs arrive via multi-network
    assert tmpl["spec"]["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-b200"}


def test_gke_network_names_are_configurable():
    o = K8sOptions(gke_gvnic_network=None, gke_rdma_network_prefix="chrisya-gke-a4-rdma-sub-", gke_rdma_nics=2,
                   gke_default_network="default")
    _, tmpl, _ = pod_of(parsed(k8s(2, k8s=o)))
    ifaces = json.loads(tmpl["metadata"]["annotations"]["networking.gke.io/interfaces"])
    assert ifaces == [{"interfaceName": "eth0", "network": "default"},
                      {"interfaceName": "eth1", "network": "chrisya-gke-a4-rdma-sub-0"},
                      {"interfaceName": "eth2", "network": "chrisya-gke-a4-rdma-sub-1"}]


def test_other_platforms_get_an_rdma_resource_and_no_gke_bits():
    _, tmpl, c = pod_of(parsed(k8s(2, env="h20-roce")))
    assert c["resources"]["limits"] == {"nvidia.com/gpu": 8, "rdma/rdma_shared_device_a": 1}
    assert "networking.gke.io/interfaces" not in tmpl["metadata"]["annotations"]
    assert not any("hostPath" in v for v in tmpl["spec"]["volumes"])
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["NVSHMEM_QP_DEPTH"] == "1024"  # spec env only
    _, _, c = pod_of(parsed(k8s(2, env="h20-roce", k8s=K8sOptions(rdma_resource="nvidia.com/hostdev"))))
    assert c["resources"]["limits"]["nvidia.com/hostdev"] == 1
    _, _, c = pod_of(parsed(k8s(2, env="h20-roce", k8s=K8sOptions(rdma_resource="none"))))
    assert list(c["resources"]["limits"]) == ["nvidia.com/gpu"]
    _, _, c = pod_of(parsed(k8s(1, env="nvlink", test="intranode")))
    assert list(c["resources"]["limits"]) == ["nvidia.com/gpu"]  # no NICs on the NVLink box


def test_capabilities_mode():
    _, _, c = pod_of(parsed(k8s(2, env="h20-roce", k8s=K8sOptions(security="capabilities"))))
    assert c["securityContext"] == {"capabilities": {"add": ["IPC_LOCK", "SYS_RESOURCE", "SYS_PTRACE"]}}
    r = k8s(2, env="gke-a4", k8s=K8sOptions(security="capabilities"))
    assert any("/dev/infiniband" in n for n in r.notes)


def test_without_host_network_dns_policy_is_cluster_first():
    _, tmpl, _ = pod_of(parsed(k8s(2, k8s=K8sOptions(host_network=False))))
    assert tmpl["spec"]["hostNetwork"] is False and tmpl["spec"]["dnsPolicy"] == "ClusterFirst"


def test_namespace_image_service_and_master_addr_options():
    r = k8s(2, master_addr="10.0.0.5", k8s=K8sOptions(namespace="ml", image="us-docker.pkg.dev/p/r/deepep:1", service="rdv"))
    svc, job = parsed(r)
    assert svc["metadata"] == {**svc["metadata"], "name": "rdv", "namespace": "ml"}
    assert job["metadata"]["namespace"] == "ml"
    _, tmpl, c = pod_of([svc, job])
    assert c["image"] == "us-docker.pkg.dev/p/r/deepep:1" and not r.notes
    assert tmpl["spec"]["subdomain"] == "rdv"
    assert next(e for e in c["env"] if e["name"] == "MASTER_ADDR")["value"] == "10.0.0.5"
    assert "kubectl apply -n ml -f" in r.text


def test_default_image_is_named_in_a_note():
    r = k8s(2)
    assert r.notes and "--image" in r.notes[0]
    assert "NOTE: --image not given" in r.text


def test_test_args_reach_the_process_verbatim_through_kubelet_expansion():
    r = k8s(2, test_args=tuple(AWKWARD_ARGS))
    _, _, c = pod_of(parsed(r))
    env = kubelet_env(c, index=0)
    got = [kubelet_expand(w, env) for w in c["command"]]
    assert got == list(r.plan.argv)
    assert got[-len(AWKWARD_ARGS):] == AWKWARD_ARGS  # "$(MASTER_ADDR)" stays literal, "$$" stays "$$"


@pytest.mark.parametrize("word", ["plain", "$HOME", "$(X)", "$$", "$$(X)", "a$", "$(", "${A}", "$$$(X)$"])
def test_k8s_escape_round_trips(word):
    assert kubelet_expand(k8s_escape(word), {"X": "expanded", "A": "a"}) == word
