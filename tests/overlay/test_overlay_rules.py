"""Each overlay rule fires on a host where its fact holds and stays quiet (with a note) elsewhere."""
from __future__ import annotations

import pytest

from deepep_env.base.errors import UserError
from deepep_env.host.context import overlay_context, read_host
from deepep_env.overlay import known_vars
from deepep_env.overlay.changes import PrependPath, Set, Unset
from deepep_env.overlay.rules import RULES, build_overlay, competing_nvshmem, default_site_dirs, hca_family
from deepep_env.platform import detect
from deepep_env.platform.profiles import load_profiles
from platform_fixtures import fake_prefix


def ov(host_tree, host, platform=None, **kw):
    d = detect(host_tree(host), platform=platform, environ={})
    kw.setdefault("site_dirs", [])
    return build_overlay(d.facts, d.platform, **kw)


def rules_that_fired(o):
    return {c.rule for c in o.changes}


def notes_of(o, rule):
    return [n for n in o.notes if n.rule == rule]


# (rule, host where it fires, host where it stays quiet, profile to force on the quiet host)
CASES = [
    ("ibgda-transport", "gcp-b200", "h200x8-nvlink", "gcp-b200"),
    ("nic-handler-gpu", "gcp-b200", "h200x8-nvlink", "gcp-b200"),
    ("hca-prefix", "gcp-b200-rocep", "h200x8-nvlink", "gcp-b200"),
    ("cuda-vmm-off", "gcp-b200", "h20-roce", None),
    ("nic-pe-mapping", "gcp-b200", "h200x8-nvlink", "gcp-b200"),
    ("device-hca-mapping", "gcp-b200-scrambled", "h200x8-nvlink", "gcp-b200"),
    ("gid-index", "gcp-b200", "gcp-b200-no-rocev2", None),
    ("no-remote-transport", "h200x8-nvlink", "gcp-b200", None),
    ("gke-library-paths", "gke-a4", "gcp-b200", "gke-a4"),
    ("gib-nccl", "gke-a4", "gke-a4-no-gib", None),
    ("unset-comm-nonblocking", "gke-a4", "gke-a4-no-gib", None),
    ("rdmav-drivers", "gke-a4", "gke-a4-no-gib", None),
    ("efa-gin", "aws-p5en", "gcp-b200", "aws-efa"),
]


@pytest.mark.parametrize("rule,fires_on,quiet_on,force", CASES, ids=[c[0] for c in CASES])
def test_rule_fires_and_stays_quiet(host_tree, rule, fires_on, quiet_on, force):
    fired = ov(host_tree, fires_on)
    assert rule in rules_that_fired(fired)
    for c in fired.changes:
        if c.rule == rule:
            assert c.fact, f"{rule} change without a fact"
    quiet = ov(host_tree, quiet_on, platform=force)
    assert rule not in rules_that_fired(quiet)
    if rule in load_profiles()[quiet.platform].rules:  # applied but quiet: it must say why
        assert notes_of(quiet, rule), f"{rule} stayed quiet without saying why"


def test_every_rule_is_covered():
    # nccl-preload, deepep-jit-cache and no-gin-transport (DeepEP 2.x prefixes): tests/doctor/test_deepep_v2_runtime.py
    v2 = {"nccl-preload", "deepep-jit-cache", "no-gin-transport"}
    assert {c[0] for c in CASES} | {"driver-keys", "nvshmem-preload"} | v2 == set(RULES)


def test_gcp_b200_overlay_is_seed_000_plus_facts(host_tree):
    env = ov(host_tree, "gcp-b200").env()
    assert env["NVSHMEM_REMOTE_TRANSPORT"] == "ibgda"
    assert env["NVSHMEM_IBGDA_NIC_HANDLER"] == "gpu"
    assert env["NVSHMEM_HCA_PREFIX"] == "mlx5"
    assert env["NVSHMEM_IB_GID_INDEX"] == "3"
    assert env["NVSHMEM_DISABLE_CUDA_VMM"] == "1"
    assert env["NVSHMEM_ENABLE_NIC_PE_MAPPING"] == "1"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert env["DEEP_EP_DEVICE_TO_HCA_MAPPING"].startswith("0:mlx5_0:1,1:mlx5_1:1,")
    # DeepEP's Buffer sets these itself (field notes §3): the overlay leaves them alone.
    for name in known_vars.DEEPEP_OVERWRITES:
        assert name not in env
    assert "NVSHMEM_HCA_LIST" not in env and "NVSHMEM_HCA_PE_MAPPING" not in env


def test_gid_rule_reports_instead_of_guessing(host_tree):
    for host, word in (("gcp-b200-gid-disagree", "disagree"), ("gcp-b200-no-rocev2", "no RoCE v2")):
        o = ov(host_tree, host)
        assert "NVSHMEM_IB_GID_INDEX" not in o.env()
        (note,) = notes_of(o, "gid-index")
        assert note.level == "warning" and word in note.message
    ib = ov(host_tree, "h100-ib")
    assert "NVSHMEM_IB_GID_INDEX" not in ib.env()
    assert "InfiniBand" in notes_of(ib, "gid-index")[0].message


def test_driver_keys(host_tree):
    assert [n.level for n in notes_of(ov(host_tree, "h20-roce"), "driver-keys")] == ["info"]
    (warn,) = notes_of(ov(host_tree, "h20-roce-no-keys"), "driver-keys")
    assert warn.level == "warning" and "EnableStreamMemOPs=0" in warn.fact
    # The GPU NIC handler checks the same keys (NVIDIA/nvshmem #23, #34).
    assert any(n.level == "warning" for n in notes_of(ov(host_tree, "h20-roce-no-keys", platform="gcp-b200"), "nic-handler-gpu"))


def test_gke_overlay(host_tree):
    o = ov(host_tree, "gke-a4")
    env = o.env()
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64:/usr/local/nvidia/lib:/usr/local/gib/lib64"  # seed 002's order
    assert env["TORCH_NCCL_USE_COMM_NONBLOCKING"] is None
    assert env["NCCL_NET"] == "gIB" and env["NCCL_TUNER_CONFIG_PATH"].endswith("tuner_config_a4.txtpb")
    # rdma-core appends "-rdmav57.so" to an absolute RDMAV_DRIVERS entry (libibverbs/dynamic_driver.c).
    assert env["RDMAV_DRIVERS"] == "/usr/local/nvidia/lib64/libibverbs/libmlx5"
    assert any("rdmav34, rdmav57" in n.message for n in o.notes)
    assert isinstance(next(c for c in o.changes if c.name == "TORCH_NCCL_USE_COMM_NONBLOCKING"), Unset)


def test_rdmav_rule_warns_when_the_provider_is_missing(tmp_path):
    from deepep_env.platform.hosttree import build_host_tree
    from platform_fixtures import make_hosts

    root = build_host_tree(make_hosts.gke_a4("x", gib=False, nvidia_provider=False), tmp_path / "h")
    d = detect(root, environ={})
    o = build_overlay(d.facts, d.platform, site_dirs=[])
    assert "RDMAV_DRIVERS" not in o.env()
    (note,) = [n for n in notes_of(o, "rdmav-drivers") if n.level == "warning"]
    assert "libmlx5.so.1.25.56.0" in note.message


def test_hca_family():
    assert [hca_family(n) for n in ("mlx5_3", "mlx5_bond_0", "rocep145s0", "ibp12s0", "irdma0")] == ["mlx5", "mlx5_bond", "rocep", "ibp", "irdma"]


# -- NVSHMEM preload ---------------------------------------------------------------------------
def test_competing_nvshmem_is_a_function_over_paths(tmp_path):
    sp = tmp_path / "site-packages"
    (sp / "nvidia" / "nvshmem" / "lib").mkdir(parents=True)
    assert competing_nvshmem([str(sp)]) == []
    (sp / "nvidia" / "nvshmem" / "lib" / "libnvshmem_host.so.3").write_bytes(b"")
    assert competing_nvshmem([str(tmp_path / "nowhere"), str(sp)]) == [str(sp / "nvidia/nvshmem/lib/libnvshmem_host.so.3")]


def test_preload_fires_only_with_a_competitor_and_the_file(host_tree, tmp_path):
    prefix = fake_prefix(tmp_path / "p", pip_nvshmem=True)
    o = ov(host_tree, "gcp-b200", prefix=str(prefix), site_dirs=default_site_dirs("/nonexistent-root", str(prefix)))
    (pre,) = [c for c in o.changes if c.rule == "nvshmem-preload"]
    assert isinstance(pre, PrependPath) and pre.name == "LD_PRELOAD"
    assert pre.entries == (str(prefix / "lib" / "libnvshmem_host.so.3"),)
    assert "nvidia/nvshmem/lib/libnvshmem_host.so.3" in pre.fact
    # No other NVSHMEM anywhere: no preload.
    quiet = fake_prefix(tmp_path / "q", pip_nvshmem=False)
    o = ov(host_tree, "gcp-b200", prefix=str(quiet), site_dirs=default_site_dirs("/nonexistent-root", str(quiet)))
    assert "LD_PRELOAD" not in o.env() and notes_of(o, "nvshmem-preload")
    # A competitor but the env has no NVSHMEM of its own: never point at a missing file.
    none = fake_prefix(tmp_path / "r", nvshmem=False)
    o = ov(host_tree, "gcp-b200", prefix=str(none), site_dirs=default_site_dirs("/nonexistent-root", str(none)))
    assert "LD_PRELOAD" not in o.env()


def test_preload_finds_the_hosts_pip_nvshmem_under_root(host_tree, tmp_path):
    from deepep_env.platform.hosttree import build_host_tree
    from platform_fixtures import make_hosts

    desc = make_hosts.gcp_b200()
    desc["files"]["usr/local/lib/python3.12/dist-packages/nvidia/nvshmem/lib/libnvshmem_host.so.3"] = ""
    root = build_host_tree(desc, tmp_path / "h")
    prefix = fake_prefix(tmp_path / "p", pip_nvshmem=False)
    o = overlay_context(read_host(root, environ={}), str(prefix)).overlay
    assert o.env()["LD_PRELOAD"] == str(prefix / "lib" / "libnvshmem_host.so.3")


# -- names and spec env ------------------------------------------------------------------------
def test_typos_are_rejected():
    with pytest.raises(UserError, match="NVSHMEM_DISABLE_GDRCOPY") as ei:
        known_vars.check_name("NVSHMEM_DISABLED_GDRCOPY")
    assert ei.value.exit_code == 2
    for bad in ("NCCL_IB_GID_IDX", "DEEP_EP_DEVICE_TO_HCA_MAP", "RDMAV_DRIVER", "1BAD", "A-B", "X=Y", ""):
        with pytest.raises(UserError):
            known_vars.check_name(bad)
    for good in ("NVSHMEM_DISABLE_GDRCOPY", "NCCL_IB_GID_INDEX", "DEEP_EP_DEVICE_TO_HCA_MAPPING", "RDMAV_DRIVERS",
                 "NVSHMEM_QP_DEPTH", "LD_PRELOAD", "TORCH_NCCL_USE_COMM_NONBLOCKING", "NCCL_NVLS_ENABLE"):
        known_vars.check_name(good)


def test_every_name_a_rule_or_profile_can_emit_is_known(host_tree):
    for host in ("gcp-b200", "gke-a4", "h20-roce", "h100-ib", "h200x8-nvlink"):
        for c in ov(host_tree, host).changes:
            assert known_vars.is_known(c.name), c.name
    for p in load_profiles().values():
        for name in p.env:
            assert known_vars.is_known(name), name


def test_spec_env(host_tree):
    o = ov(host_tree, "h20-roce", spec_env={"NVSHMEM_QP_DEPTH": "1024", "NVSHMEM_HCA_PREFIX": "mlx5_bond"})
    env = o.env()
    assert env["NVSHMEM_QP_DEPTH"] == "1024"
    assert env["NVSHMEM_HCA_PREFIX"] == "mlx5_bond"  # the spec wins over the rule …
    assert any("spec-env overrides hca-prefix" in n.message for n in o.notes)  # … and says so
    with pytest.raises(UserError, match="NVSHMEM_DISABLE_GDRCOPY"):
        ov(host_tree, "h20-roce", spec_env={"NVSHMEM_DISABLED_GDRCOPY": "1"})


def test_setting_what_deepep_overwrites_is_reported(host_tree):
    o = ov(host_tree, "h200x8-nvlink", spec_env={"NVSHMEM_DISABLE_NVLS": "1", "NCCL_NVLS_ENABLE": "0"})
    notes = [n for n in o.notes if "NVSHMEM_DISABLE_NVLS" in n.message]
    assert notes and notes[0].level == "warning" and "DeepEP" in notes[0].message
    assert not [n for n in o.notes if "NCCL_NVLS_ENABLE" in n.message]


def test_never_both_hca_list_and_pe_mapping(host_tree):
    with pytest.raises(UserError, match="NVSHMEM_HCA_LIST and NVSHMEM_HCA_PE_MAPPING"):
        ov(host_tree, "gcp-b200", spec_env={"NVSHMEM_HCA_LIST": "mlx5_0", "NVSHMEM_HCA_PE_MAPPING": "mlx5_0:1:1"})
    o = ov(host_tree, "gcp-b200", spec_env={"NVSHMEM_HCA_PE_MAPPING": "mlx5_0:1:4"})
    assert "DEEP_EP_DEVICE_TO_HCA_MAPPING" not in o.env()  # PR #466 would set NVSHMEM_HCA_LIST per process
    assert notes_of(o, "device-hca-mapping")[0].level == "warning"


def test_spec_env_values_must_be_strings(host_tree):
    with pytest.raises(UserError, match="must be a string"):
        ov(host_tree, "gcp-b200", spec_env={"NVSHMEM_QP_DEPTH": 1024})


def test_every_change_has_provenance(host_tree):
    for host in ("gcp-b200", "gke-a4", "h20-roce-no-keys"):
        o = ov(host_tree, host)
        for c in list(o.changes) + list(o.notes):
            assert c.rule and c.fact
        doc = o.to_dict()
        assert all({"op", "rule", "fact"} <= set(ch) for ch in doc["changes"])
        assert all(isinstance(c, (Set, Unset, PrependPath)) for c in o.changes)


def test_efa_host_is_detected_and_gets_gin_type_5(host_tree):
    """Issue 27: AWS p5en (EFA) from a capture built of public facts: detected, NCCL Gin type 5."""
    d = detect(host_tree("aws-p5en"), environ={})
    assert d.platform.name == "aws-efa"
    assert any("EFA devices (16: rdmap17s0" in e for e in d.platform.evidence)
    env = build_overlay(d.facts, d.platform, site_dirs=[]).env()
    assert env["NCCL_GIN_TYPE"] == "5" and env["FI_PROVIDER"] == "efa" and env["NVSHMEM_REMOTE_TRANSPORT"] == "libfabric"
    assert env["LD_LIBRARY_PATH"].startswith("/opt/amazon/ofi-nccl/lib:/opt/amazon/efa/lib")
    assert "NVSHMEM_HCA_PREFIX" not in env and "DEEP_EP_DEVICE_TO_HCA_MAPPING" not in env
