"""GPU→HCA mapping and GID index: from topology and GID tables, never from names."""
from __future__ import annotations

import pytest

from deepep_env.platform import probe_host
from deepep_env.platform.facts import Gid, Gpu, Nic, Port
from deepep_env.platform.topology import gid_index, gpu_nic_affinity, link_level, mapping_string
from platform_fixtures import make_hosts

SEED_000_MAPPING = "0:mlx5_0:1,1:mlx5_1:1,2:mlx5_2:1,3:mlx5_3:1,4:mlx5_4:1,5:mlx5_5:1,6:mlx5_6:1,7:mlx5_7:1"


def _expected_by_position(names):
    """GPU k ↔ the k-th NIC in PCI order (2 GPUs + 2 NICs per switch, in that order)."""
    return ",".join(f"{k}:{names[k]}:1" for k in range(8))


@pytest.mark.parametrize(
    "host,mapping,gid,status",
    [
        ("gcp-b200", SEED_000_MAPPING, 3, "ok"),
        # Scrambled names: the mapping follows the PCIe switches, not the name order.
        ("gcp-b200-scrambled", _expected_by_position(make_hosts.SCRAMBLED), 3, "ok"),
        ("gcp-b200-rocep", _expected_by_position(make_hosts.ROCEP), 3, "ok"),
        # Another GID table: only RoCE v2 entries, IPv4 at index 1.
        ("gcp-b200-gid1", _expected_by_position(make_hosts.SCRAMBLED[::-1]), 1, "ok"),
        # mlx5_3's port is down: GPU3 shares mlx5_2, its switch neighbour.
        ("gcp-b200-port-down", SEED_000_MAPPING.replace("3:mlx5_3:1", "3:mlx5_2:1"), 3, "ok"),
        ("gcp-b200-no-rocev2", SEED_000_MAPPING, None, "none"),
        ("gcp-b200-gid-disagree", SEED_000_MAPPING, None, "disagree"),
        # 4 NICs for 8 GPUs, one per switch; the far management NIC (no IPv4 GID) is never used.
        ("h20-roce", "0:mlx5_0:1,1:mlx5_0:1,2:mlx5_1:1,3:mlx5_1:1,4:mlx5_2:1,5:mlx5_2:1,6:mlx5_3:1,7:mlx5_3:1", 5, "ok"),
        ("h100-ib", SEED_000_MAPPING, None, "infiniband"),
        ("gke-a4", SEED_000_MAPPING, 3, "ok"),
        ("h200x8-nvlink", "", None, "no-ports"),
    ],
)
def test_mapping_and_gid_index(host_tree, host, mapping, gid, status):
    f = probe_host(host_tree(host), environ={})
    assert mapping_string(f.affinity) == mapping
    assert (f.gid.index, f.gid.status) == (gid, status)


def test_port_down_is_a_finding_not_partial(host_tree):
    f = probe_host(host_tree("gcp-b200-port-down"), environ={})
    assert any("mlx5_3" in x and "DOWN" in x for x in f.findings)
    assert not f.partial


def test_gid_disagreement_names_the_ports(host_tree):
    f = probe_host(host_tree("gcp-b200-gid-disagree"), environ={})
    assert "mlx5_5:1→[5]" in f.gid.reason and "mlx5_0:1→[3]" in f.gid.reason


# -- synthetic topologies ---------------------------------------------------------------------
def gpu(i, chain, numa=0):
    return Gpu(bdf=chain[-1], cuda_index=i, model="NVIDIA H100", model_source="driver", device_id="0x2330", numa_node=numa, pci_chain=tuple(chain))


def nic(name, chain, numa=0, state="ACTIVE", gids=()):
    port = Port(number=1, state=state, phys_state="LinkUp", link_layer="Ethernet", rate="400", gids=tuple(gids))
    return Nic(hca=name, bdf=chain[-1], numa_node=numa, pci_chain=tuple(chain), ports=(port,))


def test_levels():
    g = ("pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0")
    assert link_level(g, ("pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:01.0", "0000:04:00.0"), 0, 0) == "PIX"
    assert link_level(g, ("pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:01.0", "0000:05:00.0", "0000:06:00.0", "0000:07:00.0"), 0, 0) == "PXB"
    assert link_level(g, ("pci0000:00", "0000:00:02.0", "0000:08:00.0"), 0, 0) == "PHB"
    assert link_level(g, ("pci0000:80", "0000:80:01.0", "0000:81:00.0"), 0, 0) == "NODE"
    assert link_level(g, ("pci0000:80", "0000:80:01.0", "0000:81:00.0"), 0, 1) == "SYS"


def test_equally_near_nics_are_used_once_before_reuse():
    # 8 GPUs and 4 NICs all on one root complex (a VM): every NIC is equally near.
    gpus = [gpu(i, ("pci0000:00", f"0000:00:{i + 8:02x}.0")) for i in range(8)]
    nics = [nic(n, ("pci0000:00", f"0000:00:{b:02x}.0")) for n, b in (("z", 0x14), ("a", 0x13), ("m", 0x12), ("b", 0x11))]
    entries, _, _ = gpu_nic_affinity(gpus, nics)
    # PCI order of the NICs is b (11), m (12), a (13), z (14): names do not matter.
    assert [e.hca for e in entries] == ["b", "m", "a", "z", "b", "m", "a", "z"]
    assert all(e.level == "PHB" for e in entries)


def test_nearest_beats_pci_order_and_numa_breaks_root_ties():
    gpus = [gpu(0, ("pci0000:00", "0000:00:01.0", "0000:01:00.0"), numa=0), gpu(1, ("pci0000:80", "0000:80:01.0", "0000:81:00.0"), numa=1)]
    nics = [
        nic("far0", ("pci0000:40", "0000:40:01.0", "0000:41:00.0"), numa=1),
        nic("near0", ("pci0000:20", "0000:20:01.0", "0000:21:00.0"), numa=0),
    ]
    entries, matrix, _ = gpu_nic_affinity(gpus, nics)
    assert [(e.hca, e.level) for e in entries] == [("near0", "NODE"), ("far0", "NODE")]
    assert matrix["0000:01:00.0"] == {"far0": "SYS", "near0": "NODE"}


def test_down_nics_and_no_gpus():
    gpus = [gpu(0, ("pci0000:00", "0000:00:01.0"))]
    assert gpu_nic_affinity(gpus, [nic("x", ("pci0000:00", "0000:00:02.0"), state="DOWN")])[0] == ()
    assert gpu_nic_affinity([], [nic("x", ("pci0000:00", "0000:00:02.0"))])[0] == ()


def _gid(i, ipv4=None, t="RoCE v2"):
    return Gid(index=i, gid="x", type=t, ndev="eth0", ipv4=ipv4)


def test_gid_rule_uses_common_index_and_never_guesses():
    a = nic("a", ("pci0000:00", "0000:00:02.0"), gids=[_gid(1), _gid(3, "10.0.0.1"), _gid(5, "10.0.1.1")])
    b = nic("b", ("pci0000:00", "0000:00:03.0"), gids=[_gid(5, "10.0.2.1"), _gid(2, "10.0.2.1", "IB/RoCE v1")])
    c = nic("c", ("pci0000:00", "0000:00:04.0"), gids=[_gid(3, "10.0.3.1")])
    assert gid_index([a, b], ()).index == 5  # 5 is RoCE v2 IPv4 on both ports
    assert gid_index([b, c], ()).status == "disagree"
    assert gid_index([a, c], ()).index == 3
    assert gid_index([nic("d", ("pci0000:00", "0000:00:05.0"), gids=[_gid(0)])], ()).status == "none"
