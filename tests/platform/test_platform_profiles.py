"""Platform choice from evidence, overrides, the demo hosts, and the `detect` command."""
from __future__ import annotations

import json

import pytest

from cli_runner import cli_subprocess
from deepep_env.base.errors import UserError
from deepep_env.platform import detect
from deepep_env.platform.demo import DEMO_HOSTS, demo_description, materialize_demo_host
from deepep_env.platform.profiles import get_profile, load_profiles
from platform_fixtures import CAPTURE_ROOT, make_hosts, no_traceback


@pytest.mark.parametrize(
    "host,platform",
    [
        ("gcp-b200", "gcp-b200"),
        ("gcp-b200-rocep", "gcp-b200"),
        ("gke-a4", "gke-a4"),
        ("gke-a4-no-gib", "gke-a4"),
        ("h20-roce", "h20-roce"),
        ("h100-ib", "h100-ib"),
        ("h200x8-nvlink", "nvlink"),
    ],
)
def test_detected_platform(host_tree, host, platform):
    d = detect(host_tree(host), environ={})
    assert d.platform.name == platform and d.platform.source == "detected"
    assert d.platform.evidence[-1].endswith(platform) or platform == "nvlink"


def test_evidence_names_what_decided(host_tree):
    ev = detect(host_tree("gke-a4"), environ={}).platform.evidence
    assert "GPUs: 8x NVIDIA B200" in ev
    assert any("sys_vendor='Google'" in e for e in ev)
    assert any(e.startswith("Kubernetes: service account") for e in ev)
    ev = detect(host_tree("h200x8-nvlink"), environ={}).platform.evidence
    assert ev == ("GPUs: 8x NVIDIA H200", "no RDMA device under sys/class/infiniband")


def test_unknown_hardware_falls_back_to_generic(tmp_path):
    from deepep_env.platform.hosttree import build_host_tree

    desc = make_hosts.gcp_b200()
    desc["files"].update(make_hosts.dmi_files("Acme", "Box 9000"))
    root = build_host_tree(desc, tmp_path / "h")
    assert detect(root, environ={}).platform.name == "rdma-generic"


def test_override_and_unknown_name(host_tree):
    d = detect(host_tree("gcp-b200"), platform="nvlink", environ={})
    assert (d.platform.name, d.platform.source) == ("nvlink", "override")
    with pytest.raises(UserError) as ei:
        detect(host_tree("gcp-b200"), platform="gcp-b300")
    assert ei.value.exit_code == 2
    for name in ("gcp-b200", "gke-a4", "h20-roce", "nvlink"):
        assert name in str(ei.value)


def test_profiles_are_complete():
    from deepep_env.overlay.rules import RULES

    profiles = load_profiles()
    assert {"gcp-b200", "gke-a4", "h20-roce", "nvlink", "h100-ib", "b300", "gb200"} <= set(profiles)
    for p in profiles.values():
        assert set(p.rules) <= set(RULES), p.name
        assert p.status in ("supported", "stub")
    assert get_profile("nvlink").rules[0] == "no-remote-transport"


# -- demo hosts -------------------------------------------------------------------------------
def test_packaged_descriptions_match_the_generator():
    assert set(make_hosts.DEMO_GENERATORS) | {"h200x8-nvlink"} == set(DEMO_HOSTS)
    for name, make in make_hosts.DEMO_GENERATORS.items():
        assert demo_description(name) == json.loads(json.dumps(make())), name
    if CAPTURE_ROOT.is_dir():
        assert demo_description("h200x8-nvlink") == json.loads(json.dumps(make_hosts.from_capture()))


@pytest.mark.parametrize("name,platform", [("gcp-b200-demo", "gcp-b200"), ("gke-a4-demo", "gke-a4"),
                                           ("h20-roce-demo", "h20-roce"), ("h200x8-nvlink", "nvlink")])
def test_materialize_demo_host(tmp_path, name, platform):
    root = materialize_demo_host(name, tmp_path / name)
    assert (root / "sys" / "bus" / "pci" / "devices").is_dir()
    assert detect(root, environ={}).platform.name == platform
    assert set(DEMO_HOSTS) == {"gcp-b200-demo", "gke-a4-demo", "h20-roce-demo", "h200x8-nvlink"}


def test_seed_demo_hosts_overlay_cli():
    """The seed platforms on a fresh clone (issue 51): GKE A4's pod view (gIB, /usr/local/nvidia,
    Kubernetes markers, GID 3) and H20's bonded RoCE ports."""
    gke = cli_subprocess("overlay", "--demo-host", "gke-a4-demo", check=True).stdout
    assert "overlay for platform gke-a4" in gke
    for line in ("export NCCL_NET='gIB'", "export NVSHMEM_IB_GID_INDEX='3'", "unset TORCH_NCCL_USE_COMM_NONBLOCKING",
                 "export RDMAV_DRIVERS='/usr/local/nvidia/lib64/libibverbs/libmlx5'"):
        assert line in gke
    h20 = cli_subprocess("overlay", "--demo-host", "h20-roce-demo", check=True).stdout
    assert "overlay for platform h20-roce" in h20
    assert "export NVSHMEM_HCA_PREFIX='mlx5_bond'" in h20 and "0:mlx5_bond_0:1," in h20
    assert "mlx5_4" not in h20.split("DEEP_EP_DEVICE_TO_HCA_MAPPING=")[1].splitlines()[0]


def test_materialize_refuses_bad_input(tmp_path):
    with pytest.raises(UserError, match="unknown demo host"):
        materialize_demo_host("nope", tmp_path / "x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    with pytest.raises(UserError, match="not an empty directory"):
        materialize_demo_host("gcp-b200-demo", tmp_path / "full")


# -- CLI ----------------------------------------------------------------------------------------
def test_detect_json_cli(host_tree):
    res = cli_subprocess("detect", "--root", str(host_tree("gcp-b200-scrambled")), "--json", check=True)
    doc = json.loads(res.stdout)
    for key in ("platform", "gpus", "nics", "gpu_nic_affinity"):
        assert key in doc
    assert doc["platform"]["name"] == "gcp-b200"
    assert [e["hca"] for e in doc["gpu_nic_affinity"]] == make_hosts.SCRAMBLED


def test_detect_text_cli(host_tree):
    res = cli_subprocess("detect", "--root", str(host_tree("gcp-b200-port-down")), check=True)
    assert "platform: gcp-b200 (detected" in res.stdout
    assert "GPU3 0000:2e:00.0 → mlx5_2:1  PIX" in res.stdout
    assert "mlx5_3: no ACTIVE port" in res.stdout


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--root", "/nonexistent/root"], "not a directory"),
        (["--root", "{empty}"], "not a host tree"),
        (["--root", "{host}", "--platform", "nope"], "unknown platform 'nope'"),
    ],
)
def test_detect_bad_input_exit_2(tmp_path, host_tree, args, needle):
    (tmp_path / "empty").mkdir()
    args = [a.format(empty=tmp_path / "empty", host=host_tree("gcp-b200")) for a in args]
    res = cli_subprocess("detect", *args)
    assert res.returncode == 2, res.stderr
    no_traceback(res)
    assert needle in res.stderr and res.stderr.count("\n") == 1


def test_usr_local_nvidia_alone_is_not_gke(tmp_path):
    # NVIDIA's container images create /usr/local/nvidia/lib64 too (seen on the H100 device VM):
    # only inside a pod does it mean GKE's driver mount.
    from deepep_env.platform.hosttree import build_host_tree

    desc = make_hosts.gcp_b200()
    desc["dirs"].append("usr/local/nvidia/lib64")
    root = build_host_tree(desc, tmp_path / "h")
    assert detect(root, environ={}).platform.name == "gcp-b200"
    assert detect(root, environ={"KUBERNETES_SERVICE_HOST": "10.0.0.1"}).platform.name == "gke-a4"
