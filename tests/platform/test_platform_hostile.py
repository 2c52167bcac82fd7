"""Adversarial hosts (tests/fixtures/hosts/hostile.py): topologies and GID tables unlike GCP's.

Each host carries the answer a correct reading of its PCIe tree gives, worked out by hand in the
fixture; the probes must reach it through real sysfs trees (relative and absolute symlinks).
"""
from __future__ import annotations

import json
import random

import pytest

from cli_runner import cli_subprocess
from deepep_env.platform import probe_host
from deepep_env.platform.hosttree import build_host_tree
from deepep_env.platform.probing import chain_from_path
from deepep_env.platform.topology import mapping_string
from platform_fixtures import REPO, no_traceback

import importlib.util
import sys

_spec = importlib.util.spec_from_file_location("hostile_hosts", REPO / "tests" / "fixtures" / "hosts" / "hostile.py")
hostile = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
sys.modules.setdefault("hostile_hosts", hostile)
_spec.loader.exec_module(hostile)  # type: ignore[union-attr]

CATALOGUE = hostile.catalogue()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    cache: dict = {}

    def get(name: str, desc=None):
        if name not in cache:
            cache[name] = build_host_tree(desc if desc is not None else CATALOGUE[name][0], base / name)
        return cache[name]

    return get


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_mapping_and_gid_index(built, name):
    desc, want = CATALOGUE[name]
    f = probe_host(built(name), environ={})
    assert mapping_string(f.affinity) == want["mapping"]
    assert (f.gid.index, f.gid.status) == (want["gid"], want["status"]), f.gid.reason
    if "levels" in want:
        assert {e.level for e in f.affinity} == want["levels"]
    if "gpu_bdfs" in want:
        assert [g.bdf for g in f.gpus] == want["gpu_bdfs"]
    assert [g.cuda_index for g in f.gpus] == list(range(len(f.gpus)))
    assert not f.partial, f.warnings


def test_leaf_switch_beats_root_switch_and_the_matrix_says_why(built):
    f = probe_host(built("leaf-vs-root"), environ={})
    row = f.topology[f.gpus[0].bdf]
    # GPU0's own leaf NIC is PIX; the lower-addressed NIC on the root switch is PXB; the NICs of the
    # other complex on NUMA 0 are NODE, those on NUMA 1 SYS.
    assert row["mlx5_4"] == "PIX" and row["mlx5_9"] == "PXB" and row["mlx5_11"] == "PXB"
    assert row["mlx5_6"] == "NODE" and row["mlx5_7"] == "SYS"
    # The root-switch NICs (mlx5_9, mlx5_6, mlx5_8, mlx5_13) are never used.
    assert not {"mlx5_9", "mlx5_6", "mlx5_8", "mlx5_13"} & {e.hca for e in f.affinity}


def test_pix_beats_pxb_under_the_same_common_switch(built):
    f = probe_host(built("sixteen-nics"), environ={})
    e0 = f.affinity[0]
    assert e0.level == "PIX" and e0.candidates == (e0.hca,)
    lower = [n.hca for n in f.nics][0]  # the lower-addressed NIC of GPU0's leaf, one switch deeper
    assert f.topology[f.gpus[0].bdf][lower] == "PXB" and e0.hca != lower


def test_shared_nics_each_used_once_before_reuse(built):
    f = probe_host(built("shared-nics"), environ={})
    first, second = [e.hca for e in f.affinity[:4]], [e.hca for e in f.affinity[4:]]
    assert len(set(first)) == 4 and first == second
    assert list(f.affinity[0].candidates) == ["rocep200s0", "ibp12s0", "irdma0", "rocep25s0"]  # PCI order


def test_far_gpus_do_not_take_first_pick(built):
    f = probe_host(built("numa-orphans"), environ={})
    assert [e.level for e in f.affinity] == ["PHB"] * 4 + ["SYS"] * 4
    f = probe_host(built("lonely-gpu"), environ={})
    assert [(e.cuda_index, e.hca, e.level) for e in f.affinity] == [(0, "mlx5_b", "NODE"), (1, "mlx5_b", "PIX"), (2, "mlx5_a", "PIX")]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_mapping_follows_topology_under_any_naming(built, seed):
    """Rename the NICs of the leaf/root host at random: the mapping keeps its positions."""
    desc, want = hostile.leaf_vs_root()
    old = [e.split(":")[1] for e in want["mapping"].split(",")]
    pool = [f"mlx5_{i}" for i in range(4, 16)] + ["rocep9s0", "ibp200s0"]
    random.Random(seed).shuffle(pool)
    rename: dict[str, str] = {}

    def walk(nodes):
        for n in nodes:
            if "rdma" in n:
                n["rdma"]["hca"] = rename.setdefault(n["rdma"]["hca"], pool[len(rename)])
            walk(n.get("children", []))

    for c in desc["pci"]:
        walk(c["devices"])
    f = probe_host(built(f"renamed-{seed}", desc), environ={})
    assert mapping_string(f.affinity) == ",".join(f"{k}:{rename[h]}:1" for k, h in enumerate(old))


def test_dual_port_uses_the_active_port_and_its_gid_table(built):
    f = probe_host(built("dual-port"), environ={})
    assert {e.port for e in f.affinity} == {2}
    assert all(d["port"] == 2 and d["qualifying"] == [5] for d in f.gid.per_port)
    # Port 1 is DOWN and would have said 3: it must not be read into the answer.
    assert any(p.number == 1 and not p.active for n in f.nics for p in n.ports)


def test_port_2_down_keeps_port_1(built, tmp_path):
    desc, _ = hostile.dual_port()

    def walk(nodes):
        for n in nodes:
            if "rdma" in n:
                p1, p2 = n["rdma"]["ports"]
                p1["state"], p2["state"] = "4: ACTIVE", "1: DOWN"
            walk(n.get("children", []))

    for c in desc["pci"]:
        walk(c["devices"])
    f = probe_host(build_host_tree(desc, tmp_path / "h"), environ={})
    assert {e.port for e in f.affinity} == {1} and f.gid.index == 3


def test_gid_reports_name_the_ports(built):
    f = probe_host(built("gid-one-missing"), environ={})
    assert "mlx5_1:1" in f.gid.reason and "mlx5_0:1" not in f.gid.reason
    f = probe_host(built("gid-disagree"), environ={})
    assert "mlx5_2:1→[5]" in f.gid.reason and "mlx5_0:1→[3]" in f.gid.reason
    f = probe_host(built("gid-bonded"), environ={})
    gids = {g.index: g for g in f.nics[0].ports[0].gids}
    assert gids[7].ndev == "bond0" and gids[7].ipv4 == "10.0.0.2"
    assert 2 not in gids and 7 not in {i for i, g in gids.items() if g.ipv4 is None}  # zero slot skipped


def test_no_driver_gpus_from_pci_only(built, tmp_path):
    desc, want = hostile.no_driver()
    f = probe_host(build_host_tree(desc, tmp_path / "nd"), environ={})
    assert [g.bdf for g in f.gpus] == want["gpu_bdfs"]  # audio function and NVSwitch left out
    assert all(g.model == "NVIDIA H200" and g.model_source == "pci-id" for g in f.gpus)
    assert not f.driver.loaded and any("proc/driver/nvidia" in w for w in f.warnings)


def test_short_class_code_is_read_as_16_bits(tmp_path):
    desc, _ = hostile.no_driver()
    for c in desc["pci"]:
        for br in c["devices"]:
            for n in br.get("children", []):
                n["class"] = {"0x030000": "0x0300", "0x030200": "0x0302", "0x040300": "0x0403"}.get(n["class"], n["class"])
    f = probe_host(build_host_tree(desc, tmp_path / "short"), environ={})
    assert len(f.gpus) == 4


def test_chain_starts_at_the_root_complex_wherever_it_sits():
    vmbus = "sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/0001-0002/pci7870:00/7870:00:00.0"
    assert chain_from_path(vmbus, "7870:00:00.0") == ("pci7870:00", "7870:00:00.0")
    arm = "sys/devices/platform/3b000000.pcie/pci0009:00/0009:00:00.0/0009:01:00.0"
    assert chain_from_path(arm, "0009:01:00.0") == ("pci0009:00", "0009:00:00.0", "0009:01:00.0")
    vmd = "sys/devices/pci0000:00/0000:00:0e.0/pci10000:00/10000:00:02.0/10000:01:00.0"
    assert chain_from_path(vmd, "10000:01:00.0")[0] == "pci0000:00" and len(chain_from_path(vmd, "10000:01:00.0")) == 5


def test_cli_detect_and_overlay_on_hostile_hosts(built):
    root = built("gb200")
    res = cli_subprocess("detect", "--root", str(root), "--json")
    no_traceback(res)
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert [g["bdf"] for g in d["gpus"]] == CATALOGUE["gb200"][1]["gpu_bdfs"]
    assert [(a["cuda_index"], a["hca"], a["port"]) for a in d["gpu_nic_affinity"]] == [(0, "mlx5_2", 1), (1, "mlx5_0", 1), (2, "mlx5_3", 1), (3, "mlx5_1", 1)]
    assert d["gid_index"]["index"] == 5

    res = cli_subprocess("overlay", "--root", str(built("sixteen-nics")), "--format", "json")
    no_traceback(res)
    env = json.loads(res.stdout)["env"]
    assert env["DEEP_EP_DEVICE_TO_HCA_MAPPING"] == CATALOGUE["sixteen-nics"][1]["mapping"]
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and env["NVSHMEM_IB_GID_INDEX"] == "3"

    res = cli_subprocess("overlay", "--root", str(built("gid-v1-only")), "--format", "json")
    no_traceback(res)
    out = json.loads(res.stdout)
    assert "NVSHMEM_IB_GID_INDEX" not in out["env"]
    assert any(n.get("rule") == "gid-index" and n.get("level") == "warning" for n in out["notes"])

    res = cli_subprocess("overlay", "--root", str(built("infiniband")), "--format", "json")
    out = json.loads(res.stdout)
    assert "NVSHMEM_IB_GID_INDEX" not in out["env"] and out["env"]["DEEP_EP_DEVICE_TO_HCA_MAPPING"]


def _relink(root, how):
    """Rewrite every symlink under ``root``: "local" → absolute path on this machine (inside the
    root), "host" → absolute path as on the captured host (``/sys/…``)."""
    import os

    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                target = os.path.normpath(os.path.join(dirpath, os.readlink(p)))
                rel = os.path.relpath(target, root)
                os.unlink(p)
                os.symlink(target if how == "local" else "/" + rel, p)


@pytest.mark.parametrize("how", ["local", "host"])
def test_absolute_links_inside_the_root(built, tmp_path, how):
    """Links written as absolute paths — the captured host's (/sys/devices/…) or this machine's
    own path into the tree ($PWD/sys/devices/…) — both stay inside the root and give the same
    answer as the relative tree."""
    desc, want = CATALOGUE["leaf-vs-root"]
    root = build_host_tree(desc, tmp_path / "t")
    _relink(str(root), how)
    f = probe_host(root, environ={})
    assert mapping_string(f.affinity) == want["mapping"] and f.gid.index == 3
    assert len(f.gpus) == 8 and not f.partial


def test_absolute_link_out_of_the_root_is_re_rooted(tmp_path):
    """A link to this machine's /sys must not be followed out of the tree."""
    import os

    from deepep_env.platform.rootfs import RootFS

    (tmp_path / "sys" / "x").mkdir(parents=True)
    (tmp_path / "sys" / "x" / "f").write_text("inside\n")
    os.symlink("/sys/x", tmp_path / "sys" / "link")
    os.symlink(str(tmp_path) + "/../../../sys/x", tmp_path / "sys" / "climb")
    fs = RootFS(tmp_path)
    assert fs.read_attr("sys/link/f") == "inside"
    assert fs.read_attr("sys/climb/f") == "inside"  # ".." stops at the root


def test_chain_without_a_root_complex_component_keeps_its_bridges():
    # A hand-made tree with no pci<domain>:<bus> directory: the bridges still make the chain.
    assert chain_from_path("sys/devices/0000:00:01.0/0000:01:00.0", "0000:01:00.0") == ("0000:00:01.0", "0000:01:00.0")
    arm = "sys/devices/platform/pcie@3b000000/pci0009:00/0009:00:00.0/0009:01:00.0"
    assert chain_from_path(arm, "0009:01:00.0")[0] == "pci0009:00"
