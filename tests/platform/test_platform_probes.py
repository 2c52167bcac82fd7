"""Probes read only under the root, follow sysfs links inside it, and degrade to partial facts."""
from __future__ import annotations

import json
import os

import pytest

from deepep_env.base.errors import UserError
from deepep_env.platform import detect, probe_host
from deepep_env.platform.hosttree import build_host_tree
from deepep_env.platform.probes_gpu import parse_registry_dwords
from deepep_env.platform.probes_rdma import parse_gid
from deepep_env.platform.probing import chain_from_path
from deepep_env.platform.rootfs import RootFS
from platform_fixtures import CAPTURE_ROOT, make_hosts


# -- the root-confined reader -----------------------------------------------------------------
def test_rootfs_reroots_absolute_links_and_clamps_dotdot(tmp_path):
    (tmp_path / "inside").mkdir()
    (tmp_path / "inside" / "secret").write_text("tree's own\n")
    (tmp_path / "a").mkdir()
    os.symlink("/inside", tmp_path / "a" / "abs")  # absolute: means <root>/inside
    os.symlink("../../../../../../inside", tmp_path / "a" / "up")  # .. stops at the root
    os.symlink("/etc/passwd", tmp_path / "a" / "passwd")  # the host's file must not be read
    fs = RootFS(tmp_path)
    assert fs.read_text("a/abs/secret") == "tree's own\n"
    assert fs.read_text("a/up/secret") == "tree's own\n"
    with pytest.raises(OSError):
        fs.read_text("a/passwd")  # <root>/etc/passwd does not exist
    assert fs.read_attr("a/passwd") is None


def test_rootfs_symlink_loop_is_an_error_not_a_hang(tmp_path):
    os.symlink("b", tmp_path / "a")
    os.symlink("a", tmp_path / "b")
    fs = RootFS(tmp_path)
    assert fs.resolve("a") is None
    assert fs.read_attr("a/x") is None


def test_final_symlink_in_a_read_is_resolved_inside_root(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "real").write_text("42\n")
    os.symlink("/real", tmp_path / "d" / "attr")
    assert RootFS(tmp_path).read_attr("d/attr") == "42"


# -- parsers ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text,gid,ipv4",
    [
        ("0000:0000:0000:0000:0000:ffff:0a80:0002", "0000:0000:0000:0000:0000:ffff:0a80:0002", "10.128.0.2"),
        ("::ffff:10.0.0.1", "0000:0000:0000:0000:0000:ffff:0a00:0001", "10.0.0.1"),
        ("fe80:0000:0000:0000:0200:5eff:fe00:0001", "fe80:0000:0000:0000:0200:5eff:fe00:0001", None),
        ("0000:0000:0000:0000:0000:0000:0000:0000", None, None),
        ("garbage", None, None),
        ("", None, None),
    ],
)
def test_parse_gid(text, gid, ipv4):
    assert parse_gid(text) == (gid, ipv4)


def test_registry_dwords():
    assert parse_registry_dwords('"PeerMappingOverride=1;RmFoo=0x2"') == {"PeerMappingOverride": "1", "RmFoo": "0x2"}
    assert parse_registry_dwords('""') == {}


def test_chain_from_path_stops_at_the_function():
    real = "sys/devices/pci0000:0c/0000:0c:01.0/0000:0d:00.0/0000:0e:02.0/0000:11:00.0"
    assert chain_from_path(real, "0000:11:00.0") == ("pci0000:0c", "0000:0c:01.0", "0000:0d:00.0", "0000:0e:02.0", "0000:11:00.0")
    assert chain_from_path(real + "/infiniband/mlx5_0", "0000:11:00.0")[-1] == "0000:11:00.0"


# -- whole hosts ------------------------------------------------------------------------------
def test_gcp_b200_facts(host_tree):
    f = probe_host(host_tree("gcp-b200"), environ={})
    assert [g.model for g in f.gpus] == ["NVIDIA B200"] * 8
    assert [g.cuda_index for g in f.gpus] == list(range(8))
    assert [g.bdf for g in f.gpus] == sorted(g.bdf for g in f.gpus)
    assert f.gpus[0].pci_chain == ("pci0000:0c", "0000:0c:01.0", "0000:0d:00.0", "0000:0e:00.0", "0000:0f:00.0")
    assert f.gpus[4].numa_node == 1
    assert [n.hca for n in f.nics] == [f"mlx5_{i}" for i in range(8)]
    port = f.nics[0].ports[0]
    assert port.active and port.link_layer == "Ethernet" and port.rate.startswith("400")
    assert [g.index for g in port.gids] == [0, 1, 2, 3]  # 12 empty slots skipped
    assert port.gids[3].type == "RoCE v2" and port.gids[3].ipv4 == "10.128.0.2"
    assert port.gids[3].ndev == "enp17s0"
    assert port.counters == {"port_xmit_data": 0, "port_rcv_data": 0}
    assert f.nics[0].netdevs == ("enp17s0",)
    assert f.driver.version == "580.126.09" and f.driver.flavor == "open"
    assert f.driver.enable_stream_memops == 1 and f.driver.peer_mapping_override == 1
    assert f.module_loaded("nvidia_peermem") and f.module_loaded("mlx5_ib")
    assert f.dmi["sys_vendor"] == "Google"
    assert f.kernel == "6.14.0-1021-gcp"
    assert f.os_release["VERSION_ID"] == "24.04"
    assert f.ofed.mlx5_core_version == "25.10-1.2.8" and f.ofed.doca_ofed == "3.2.1-104000"
    assert {(c.dir, c.name) for c in f.libraries if c.kind == "provider"} == {("/usr/lib/x86_64-linux-gnu/libibverbs", "libmlx5-rdmav34.so")}
    assert not f.kubernetes.in_pod and not f.kubernetes.gke
    assert f.warnings == () and not f.partial


def test_gke_markers_and_library_copies(host_tree):
    f = probe_host(host_tree("gke-a4"), environ={})
    assert f.kubernetes.in_pod and f.kubernetes.gke
    provs = {(c.dir, c.rdmav) for c in f.libraries if c.kind == "provider"}
    assert provs == {("/usr/lib/x86_64-linux-gnu/libibverbs", 34), ("/usr/local/nvidia/lib64/libibverbs", 57)}
    verbs = {(c.dir, c.version) for c in f.libraries if c.kind == "libibverbs" and c.version}
    assert ("/usr/local/nvidia/lib64", "1.14.56.0") in verbs and ("/usr/lib/x86_64-linux-gnu", "1.14.50.0") in verbs
    link = next(c for c in f.libraries if c.name == "libibverbs.so.1" and c.dir == "/usr/local/nvidia/lib64")
    assert link.link_target == "libibverbs.so.1.14.56.0"
    assert f.paths["/usr/local/gib"] and f.paths["/usr/local/nvidia/lib64"]


def test_kubernetes_env_marker_only_from_given_environ(host_tree):
    root = host_tree("gcp-b200")
    assert probe_host(root, environ={"KUBERNETES_SERVICE_HOST": "10.0.0.1"}).kubernetes.in_pod
    # A captured tree is not this process: without an explicit environ, ours is not consulted.
    os.environ["KUBERNETES_SERVICE_HOST"] = "10.0.0.1"
    try:
        assert not probe_host(root).kubernetes.in_pod
    finally:
        del os.environ["KUBERNETES_SERVICE_HOST"]


def test_h200_capture_read_directly_and_as_proper_tree(host_tree):
    tree = probe_host(host_tree("h200x8-nvlink"), environ={})
    assert len(tree.gpus) == 8 and tree.nics == ()
    assert tree.gpus[0].bdf == "0000:00:06.0" and tree.gpus[7].bdf == "0000:00:0d.0"
    assert tree.gpus[0].pci_chain == ("pci0000:00", "0000:00:06.0")
    assert tree.gpus[0].numa_node is None  # sysfs says -1
    assert tree.driver.version == "580.159.04" and tree.driver.enable_stream_memops == 0
    assert tree.driver.peer_mapping_override is None
    assert not tree.module_loaded("nvidia_peermem")
    assert tree.dmi == {}
    assert any("dmi" in w for w in tree.warnings)  # partial: no DMI on that VM
    if CAPTURE_ROOT.is_dir():  # the raw capture (no symlinks, _realpath files) reads the same
        raw = probe_host(CAPTURE_ROOT, environ={})
        assert [(g.bdf, g.model, g.pci_chain) for g in raw.gpus] == [(g.bdf, g.model, g.pci_chain) for g in tree.gpus]
        assert any("_realpath" in w for w in raw.warnings)


def test_nvidia_smi_order_matches_capture():
    if not CAPTURE_ROOT.is_dir():
        pytest.skip("../shared capture not present")
    f = probe_host(CAPTURE_ROOT, environ={})
    rows = (CAPTURE_ROOT.parent / "nvidia-smi-gpus.csv").read_text().splitlines()[1:]
    smi = [r.split(", ")[2].lower()[4:] for r in rows]  # 00000000:00:06.0 → 0000:00:06.0
    assert [g.bdf for g in f.gpus] == smi


# -- bad and partial roots --------------------------------------------------------------------
def test_bad_roots_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="not a directory"):
        probe_host(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="not a directory"):
        probe_host(tmp_path / "file")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="not a host tree") as ei:
        probe_host(tmp_path / "empty")
    assert ei.value.exit_code == 2


def test_proc_only_tree_is_partial(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "modules").write_text("nvidia 1 0 - Live 0x0\n")
    f = probe_host(tmp_path, environ={})
    assert f.gpus == () and f.nics == ()
    assert f.partial and any(w.startswith("sys/") for w in f.warnings)
    assert detect(tmp_path, environ={}).platform.name == "none"


def test_unreadable_files_become_warnings(tmp_path, host_tree):
    desc = make_hosts.gcp_b200()
    # Directories where files should be: reading them fails (EISDIR) even as root.
    desc["dirs"] += ["proc/driver/nvidia/params", "proc/modules", "proc/sys/kernel/osrelease"]
    for rel in ("proc/driver/nvidia/params", "proc/modules", "proc/sys/kernel/osrelease"):
        desc["files"].pop(rel)
    root = build_host_tree(desc, tmp_path / "h")
    info = root / "proc/driver/nvidia/gpus/0000:0f:00.0/information"
    info.unlink()
    info.mkdir()
    f = probe_host(root, environ={})
    text = " | ".join(f.warnings)
    assert "proc/driver/nvidia/params" in text and "proc/modules" in text and "osrelease" in text
    assert "gpus/0000:0f:00.0/information" in text
    assert f.driver.params == {} and f.modules == () and f.kernel is None
    assert f.gpus[0].model == "NVIDIA B200" and f.gpus[0].model_source == "pci-id"  # fell back on the PCI id
    assert len(f.gpus) == 8 and f.partial


def test_hostile_links_do_not_escape(tmp_path, host_tree):
    # A convincing RDMA device *outside* the root: reading it would mean the probe escaped.
    outside = tmp_path / "outside" / "mlx5_evil"
    (outside / "ports" / "1").mkdir(parents=True)
    (outside / "ports" / "1" / "state").write_text("4: ACTIVE\n")
    (outside / "ports" / "1" / "link_layer").write_text("Ethernet\n")
    desc = make_hosts.gcp_b200()
    desc["symlinks"]["sys/class/infiniband/evil"] = str(outside)  # absolute: re-rooted
    desc["symlinks"]["sys/class/infiniband/up"] = "../" * 12 + str(outside).lstrip("/")  # .. clamps at the root
    desc["symlinks"]["sys/class/dmi/id/product_name"] = "/etc/hostname"  # a host file, not the tree's
    desc["files"].pop("sys/class/dmi/id/product_name")
    root = build_host_tree(desc, tmp_path / "h")
    f = probe_host(root, environ={})
    assert {n.hca for n in f.nics} == {f"mlx5_{i}" for i in range(8)}
    assert "product_name" not in f.dmi
    text = " | ".join(f.warnings)
    assert "infiniband/evil" in text and "infiniband/up" in text


def test_rdma_device_without_pci_function(tmp_path):
    desc = make_hosts.gcp_b200()
    desc["files"].update({"sys/devices/virtual/infiniband/rxe0/ports/1/state": "4: ACTIVE",
                          "sys/devices/virtual/infiniband/rxe0/ports/1/link_layer": "Ethernet"})
    desc["symlinks"]["sys/class/infiniband/rxe0"] = "../../devices/virtual/infiniband/rxe0"
    root = build_host_tree(desc, tmp_path / "h")
    f = probe_host(root, environ={})
    rxe = f.nic("rxe0")
    assert rxe is not None and rxe.bdf is None
    assert "rxe0" not in {e.hca for e in f.affinity}
    assert any("rxe0" in x for x in f.findings)


def test_json_document_is_serialisable_and_complete(host_tree):
    d = detect(host_tree("gcp-b200"), environ={}).to_dict()
    text = json.dumps(d)
    back = json.loads(text)
    for key in ("platform", "gpus", "nics", "gpu_nic_affinity", "gid_index", "driver", "modules", "dmi",
                "kernel", "kubernetes", "libraries", "ofed", "warnings", "partial", "topology"):
        assert key in back
    assert back["gpu_nic_affinity"][0] == {
        "cuda_index": 0, "gpu": "0000:0f:00.0", "hca": "mlx5_0", "port": 1, "level": "PIX", "depth": 3,
        "candidates": ["mlx5_0", "mlx5_1"], "reason": back["gpu_nic_affinity"][0]["reason"], "unnamed": [],
    }
    assert back["nics"][0]["ports"][0]["active"] is True
    assert back["topology"]["0000:0f:00.0"]["mlx5_2"] == "NODE"
    assert back["topology"]["0000:0f:00.0"]["mlx5_4"] == "SYS"
