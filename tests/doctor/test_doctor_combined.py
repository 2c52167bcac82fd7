"""Several seed faults on one host at once (issue 7, "Checked by"): every planted fault is reported by
its finding id in ONE doctor run, nothing fires that was not planted, and the healthy hosts (the
fixture ones, the real H200 capture with its env.txt, a GKE A4 pod with seed 002's fix and the gIB
job env) stay at zero findings even with --strict.

Each scenario lists what it plants next to the id (and severity) that must report it; the expected
maps are exact, so a false alarm fails as loudly as a miss.
"""
from __future__ import annotations

import json


from deepep_env.doctor import run_doctor
from doctor_fixtures import (
    doctor_cli,
    REPO,
    buffer_py,
    build_host,
    gib_plugin,
    gke_libibverbs,
    h200_capture_tree,
    make_hosts,
    make_prefix,
    make_torch_venv,
    no_driver_keys,
    no_peermem,
    old_doca_on_614,
    old_driver,
)

GKE_REVISION = "0c984e256bb83c901741a9bab6f9c3b9eadd7421"  # env_specs/gke-a4.toml
H20_REVISION = "29d31c095796f3c8ece47ee9cdcc167051bbeed9"  # env_specs/h20-roce.toml


def write_env_file(path, env: dict) -> str:
    path.write_text("".join(f"export {k}={v}\n" for k, v in env.items()))
    return str(path)


def by_id(findings) -> dict[str, str]:
    """id → severity; an id may repeat (env.home-missing per variable) but with one severity."""
    out: dict[str, str] = {}
    for f in findings:
        sev, fid = (f["severity"], f["id"]) if isinstance(f, dict) else (f.severity, f.id)
        assert out.setdefault(fid, sev) == sev, f"{fid} reported as {out[fid]} and {sev}"
    return out


def assert_exactly(got: dict[str, str], want: dict[str, str]) -> None:
    missing = {k: v for k, v in want.items() if k not in got}
    extra = {k: v for k, v in got.items() if k not in want}
    wrong = {k: (got[k], v) for k, v in want.items() if k in got and got[k] != v}
    assert not (missing or extra or wrong), f"missed: {missing}; not planted: {extra}; severity (got, want): {wrong}"


def assert_evidence(findings_json) -> None:
    for f in findings_json:
        assert f["evidence"], f["id"]
        for e in f["evidence"]:
            assert ("file" in e or "var" in e) and e["value"] != "", (f["id"], e)
        assert f["fix"] and f["title"], f["id"]


def doctor(root, env=None, environ=None, **kw):
    kw.setdefault("cwd", str(root))
    if env is not None:
        kw.setdefault("project", str(REPO))
    return run_doctor(env, root=root, environ=environ or {}, **kw)


# -- faults not in doctor_fixtures ----------------------------------------------------------------
def gdrcopy_installed(desc: dict) -> None:
    desc["files"]["opt/gdrcopy/lib/libgdrapi.so.2"] = ""


def patched_source_tree(desc: dict) -> None:
    """Seed 000 §4.1: the DeepEP checkout with PR #466 applied sits in /opt/deepep/DeepEP; the
    module actually installed was copied before the patch. The checkout must not fool doctor."""
    desc["files"]["opt/deepep/DeepEP/deep_ep/__init__.py"] = "from .buffer import Buffer\n"
    desc["files"]["opt/deepep/DeepEP/deep_ep/buffer.py"] = buffer_py(True)
    desc["files"]["opt/deepep/DeepEP/setup.py"] = "# DeepEP\n"


def seed002_provider_fix(desc: dict) -> None:
    """Seed 002's fix: the rdmav57 provider copied into the system provider directory."""
    desc["files"]["usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav57.so"] = ""


def gcp_kitchen_sink(tmp_path):
    """GCP B200 with rocep* names and rocep48s0 (NIC 3) DOWN, seed 002's /usr/local/nvidia copy,
    DOCA-OFED 3.0.0 on 6.14, no peermem, no driver keys, GDRCopy, the gIB plugin, the patched
    DeepEP checkout."""
    mh = make_hosts()
    desc = mh.gcp_b200("gcp-b200-kitchen-sink", names=mh.ROCEP, port_states={3: "1: DOWN"})
    for fault in (gke_libibverbs, old_doca_on_614, no_peermem, no_driver_keys, gdrcopy_installed, gib_plugin, patched_source_tree):
        fault(desc)
    from deepep_env.platform.hosttree import build_host_tree

    return build_host_tree(desc, tmp_path / "h")


KITCHEN_ENV = {
    "NVSHMEM_IBGDA_NIC_HANDLER": "cpu",  # hangs on GCP B200 (seed 000 §4.2)
    "LD_PRELOAD": "/opt/gdrcopy/lib/libgdrapi.so.2",  # the cpu handler's GDRCopy; no NVSHMEM preload
    "TORCH_NCCL_USE_COMM_NONBLOCKING": "1",  # with gIB (seed 002 §3)
    "NCCL_NET": "gIB",
    "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64:/usr/local/gib/lib64",  # rdmav57 before the system's rdmav34
    "RDMAV_DRIVERS": "/usr/local/nvidia/lib64/libibverbs",  # a directory (seed 002's value)
    "NVSHMEM_HOME": "/opt/deepep/nvshmem",  # absent
    "NVSHMEM_IB_GID_INDEX": "2",  # IPv4 but RoCE v1
    "NVSHMEM_HCA_PREFIX": "mlx5",  # devices are rocep*
    "NVSHMEM_DISABLED_GDRCOPY": "1",  # misspelt
}


# -- 1: GCP B200, every fault of the brief, the env installed, through the CLI ---------------------
def test_gcp_b200_every_seed_fault_at_once_with_the_env_installed(tmp_path, capsys, clean_env):
    root = gcp_kitchen_sink(tmp_path)
    venv = make_torch_venv(tmp_path / "venv")  # pip torch + nvidia-nvshmem 3.4.5
    pfx = make_prefix(tmp_path / "pfx", python="host", python_executable=str(venv / "bin/python3"), pr466=False)
    env_file = write_env_file(tmp_path / "env.txt", {**KITCHEN_ENV, "PATH": "/usr/bin:/bin"})
    code, out, _ = doctor_cli(capsys, "gcp-b200", "--root", root, "--prefix", pfx, "--project", REPO, "--env-file", env_file, "--json")
    data = json.loads(out)
    assert code == 2 == data["exit_code"]
    assert_exactly(by_id(data["findings"]), {
        # the installed module lacks PR #466; the patched checkout in /opt/deepep/DeepEP is not imported
        "deepep.pr466-missing": "error",
        # `deepep-env run` sets gpu; the driver lacks the keys gpu needs
        "nic-handler.driver-keys": "error",
        "host.ofed-kernel": "error",
        "host.ofed-version": "error",  # the same DOCA 3.0.0 against the spec's >=3.2.1
        "host.peermem-missing": "error",  # the spec lists it
        "host.port-down": "error",
        "lib.ibverbs-conflict": "error",
        "lib.rdmav-drivers": "error",
        "env.home-missing": "error",
        "nccl.gib-nonblocking": "error",  # the gcp-b200 overlay does not unset it
        "env.unknown-name": "warning",
        "nic-handler.gdrcopy-preload": "warning",
        # what the overlay fixes, still hit by a launcher that bypasses `deepep-env run`
        "nic-handler.cpu-on-gcp-b200": "info",
        "host.hca-prefix": "info",
        "host.gid-index": "info",
        "nvshmem.host-mismatch": "info",
    })
    assert_evidence(data["findings"])
    f = {x["id"]: x for x in data["findings"]}
    assert f["deepep.pr466-missing"]["evidence"][0]["file"] == str(pfx / "lib/python3.12/site-packages/deep_ep/buffer.py")
    assert "/opt/deepep/DeepEP" not in json.dumps(f["deepep.pr466-missing"])
    assert {e.get("file") for e in f["host.ofed-kernel"]["evidence"]} >= {"/var/lib/dpkg/status", "/proc/sys/kernel/osrelease"}
    assert f["host.port-down"]["evidence"][0] == {"file": "/sys/class/infiniband/rocep48s0/ports/1/state", "value": "DOWN"}
    assert "PeerMappingOverride: absent" in f["nic-handler.driver-keys"]["evidence"][0]["value"]
    assert {e.get("file") for e in f["lib.ibverbs-conflict"]["evidence"]} >= {
        "/usr/local/nvidia/lib64/libibverbs.so.1", "/usr/lib/x86_64-linux-gnu/libibverbs.so.1"}
    assert f["host.gid-index"]["evidence"][1]["value"].startswith("IB/RoCE v1")
    assert "nvidia/nvshmem/lib/libnvshmem_host.so.3" in f["nvshmem.host-mismatch"]["evidence"][0]["file"]
    assert any(e.get("var") == "NVSHMEM_DISABLED_GDRCOPY" and e["value"] == "1" for e in f["env.unknown-name"]["evidence"])
    assert data["context"]["environment"]["NVSHMEM_IBGDA_NIC_HANDLER"]["value"] == "gpu"


# -- 2: the same host, no env: what the hand-written scripts of seed 000 leave ---------------------
def test_gcp_b200_seed_faults_host_only(tmp_path):
    root = gcp_kitchen_sink(tmp_path)
    # seed 000's unified-env.sh on this host: the unpatched copy on PYTHONPATH, the mapping written
    # for mlx5_* names on a host whose devices are rocep*
    seed000_shadow_copy_root = root / "opt/deepep/python/deep_ep"
    seed000_shadow_copy_root.mkdir(parents=True)
    (seed000_shadow_copy_root / "__init__.py").write_text("from .buffer import Buffer\n")
    (seed000_shadow_copy_root / "buffer.py").write_text(buffer_py(False))
    env = {**KITCHEN_ENV, "PYTHONPATH": "/opt/deepep/python",
           "DEEP_EP_DEVICE_TO_HCA_MAPPING": ",".join(f"{i}:mlx5_{i}:1" for i in range(8))}
    r = doctor(root, environ=env)
    assert r.exit_code() == 2 and not r.overlay_applied
    assert_exactly(by_id(r.findings), {
        "deepep.pr466-missing": "error",  # the mapping variable requires it of what PYTHONPATH imports
        "deepep.extension-missing": "error",  # a copied deep_ep/ without deep_ep_cpp*.so
        "nic-handler.cpu-on-gcp-b200": "error",
        "nic-handler.driver-keys": "error",  # gpu is the fix, and gpu needs the keys
        "nic-handler.gdrcopy-preload": "warning",
        "host.ofed-kernel": "error",
        "host.peermem-missing": "warning",  # no spec: a warning on a host with active RDMA NICs
        "host.port-down": "error",
        "host.hca-prefix": "error",
        "host.hca-mapping": "error",  # mlx5_* do not exist here
        "host.gid-index": "error",  # not hidden behind the wrong prefix
        "lib.ibverbs-conflict": "error",
        "lib.rdmav-drivers": "error",
        "env.home-missing": "error",
        "env.unknown-name": "warning",
        "nccl.gib-nonblocking": "error",
    })
    gid = next(f for f in r.findings if f.id == "host.gid-index")
    assert "rocep17s0:1 (IB/RoCE v1)" in gid.title and gid.fix.startswith("set NVSHMEM_IB_GID_INDEX=3")
    mapping = next(f for f in r.findings if f.id == "host.hca-mapping")
    assert "mlx5_0 does not exist" in mapping.title


# -- 3: a GKE A4 pod: seed 002's job env plus topology and module faults --------------------------
def test_gke_a4_pod_with_several_faults(tmp_path):
    mh = make_hosts()
    desc = mh.gke_a4("gke-a4-faults", port_states={5: "1: DOWN"}, gid_tables={2: mh.v6_first_gids})
    for fault in (no_peermem, old_driver):
        fault(desc)
    from deepep_env.platform.hosttree import build_host_tree

    root = build_host_tree(desc, tmp_path / "h")
    pfx = make_prefix(tmp_path / "pfx", "gke-a4-seed", platforms=["gke-a4"], require=(), revision=GKE_REVISION)
    env = {
        "PATH": "/usr/bin:/bin",
        # seed 002's job YAML, as it was before the fix
        "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64:/usr/local/nvidia/lib:/usr/local/gib/lib64",
        "RDMAV_DRIVERS": "/usr/local/nvidia/lib64/libibverbs",
        "TORCH_NCCL_USE_COMM_NONBLOCKING": "0",
        "NVSHMEM_HOME": "/opt/deepep/nvshmem",
        "GDRCOPY_HOME": "/opt/deepep/gdrcopy",
        "LD_PRELOAD": "/opt/deepep/nvshmem/lib/libnvshmem_host.so.3",
        "NCCL_NET": "gIB",
        # and a hand-made NIC selection
        "NVSHMEM_HCA_LIST": "mlx5_0:1,mlx5_5:1",
        "NVSHMEM_HCA_PE_MAPPING": "mlx5_0:1:4",
    }
    r = doctor(root, "gke-a4-seed", prefix=pfx, environ=env)
    assert r.exit_code() == 2
    assert_exactly(by_id(r.findings), {
        "host.port-down": "error",
        "host.peermem-missing": "error",
        "host.driver-version": "error",
        "host.hca-list": "error",  # mlx5_5:1 is DOWN
        "host.hca-list-and-pe-mapping": "error",
        "lib.ibverbs-conflict": "error",  # no rdmav57 provider in the system dir: not fixed
        "lib.rdmav-drivers": "info",  # the overlay names the provider file; spawned children may not get it
        "env.home-missing": "error",
        "env.preload-missing": "error",
        "nccl.gib-nonblocking": "info",  # the gke-a4 overlay unsets it
    })
    homes = sorted(e.var for f in r.findings if f.id == "env.home-missing" for e in f.evidence)
    assert homes == ["GDRCOPY_HOME", "NVSHMEM_HOME"]


# -- 4: H20 RoCE, seed 003 plus GID and loader faults; the CPU handler's GDRCopy is fine here ------
def test_h20_roce_with_several_faults(tmp_path):
    mh = make_hosts()
    desc = mh.h20_roce("h20-faults", memops=0, dwords="")  # seed 003: no driver keys
    old_doca_on_614(desc)
    gdrcopy_installed(desc)
    from deepep_env.platform.hosttree import build_host_tree

    root = build_host_tree(desc, tmp_path / "h")
    env = {
        "NVSHMEM_IB_GID_INDEX": "3",  # seed 000's value; the IPv4 RoCE v2 GID is at 5 here
        "NCCL_IB_GID_INDEX": "5",  # right
        "LD_PRELOAD": "/opt/gdrcopy/lib/libgdrapi.so.2:/opt/deepep/nvshmem/lib/libnvshmem_host.so.3",
        "DEEP_EP_DEVICE_TO_HCA_MAPPINGS": "0:mlx5_0:1",  # misspelt
        "CUDA_HOME": "/usr/local/cuda-12.8",
    }
    r = doctor(root, environ=env)
    assert r.exit_code() == 2
    assert_exactly(by_id(r.findings), {
        "nic-handler.driver-keys": "error",
        "host.ofed-kernel": "error",
        "host.gid-index": "error",
        "env.preload-missing": "error",
        "env.home-missing": "error",
        "env.unknown-name": "warning",
    })
    gid = next(f for f in r.findings if f.id == "host.gid-index")
    assert gid.title.startswith("NVSHMEM_IB_GID_INDEX=3") and "set NVSHMEM_IB_GID_INDEX=5" in gid.fix
    # the CPU handler with its GDRCopy is a valid H20 setup: no handler finding, keys not needed
    r = doctor(root, environ={**env, "NVSHMEM_IBGDA_NIC_HANDLER": "cpu"})
    assert not {i for i in by_id(r.findings) if i.startswith("nic-handler.")}


# -- 5: H100 InfiniBand: provider mix, a down port, gIB without its plugin, old OFED on 6.14 -------
def test_h100_ib_with_several_faults(tmp_path):
    mh = make_hosts()
    desc = mh.h100_ib("h100-faults")
    desc["pci"] = mh.a4_pci(model="NVIDIA H100 80GB HBM3", device="0x2330", link_layer="InfiniBand",
                            default_gids=mh.ib_gids, port_states={6: "1: DOWN"})
    desc["files"].update({
        "proc/sys/kernel/osrelease": "6.14.0-1007-nvidia",
        "sys/module/mlx5_core/version": "24.10-1.1.4",  # MLNX_OFED 24.10 = DOCA 2.9
        "usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0": "",
        "usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so": "",
        "usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav57.so": "",  # no copy of its own ABI
    })
    desc.setdefault("symlinks", {})["usr/lib/x86_64-linux-gnu/libibverbs.so.1"] = "libibverbs.so.1.14.50.0"
    from deepep_env.platform.hosttree import build_host_tree

    root = build_host_tree(desc, tmp_path / "h")
    env = {"NVSHMEM_IB_GID_INDEX": "7", "NCCL_NET": "gIB", "NVSHMEM_IBGDA_NIC_HANDLER": "gpu"}
    r = doctor(root, environ=env)
    assert r.exit_code() == 2
    assert_exactly(by_id(r.findings), {
        "host.ofed-kernel": "error",
        "host.port-down": "error",
        "lib.provider-mix": "warning",
        "nccl.gib-plugin-missing": "error",
        # InfiniBand needs no GID index: NVSHMEM_IB_GID_INDEX=7 is not a fault here
    })


# -- the healthy hosts: zero findings, even --strict --------------------------------------------------
def test_healthy_gcp_b200_with_its_env_cli_strict(tmp_path, capsys, clean_env):
    root = build_host(tmp_path / "h", "gcp-b200")
    pfx = make_prefix(tmp_path / "pfx")
    code, out, _ = doctor_cli(capsys, "gcp-b200", "--root", root, "--prefix", pfx, "--project", REPO, "--strict", "--json")
    data = json.loads(out)
    assert (code, data["findings"]) == (0, []), data["findings"]


def test_real_h200_capture_cli_strict_with_its_env_file(tmp_path, capsys, clean_env, shared_dir):
    capture = shared_dir / "hosts" / "h200x8-nvlink"
    root = h200_capture_tree(tmp_path / "h200", capture)
    env_file = capture / "env.txt"
    code, out, _ = doctor_cli(capsys, "--root", root, "--env-file", env_file, "--strict", "--json")
    data = json.loads(out)
    assert data["platform"]["name"] == "nvlink" and (code, data["findings"]) == (0, []), data["findings"]
    pfx = make_prefix(tmp_path / "pfx", "h200-nvlink", platforms=["nvlink"], python="host",
                      python_executable="/opt/torch/.venv/bin/python3")
    code, out, _ = doctor_cli(capsys, "h200-nvlink", "--root", root, "--prefix", pfx, "--project", REPO,
                              "--env-file", env_file, "--strict", "--json")
    data = json.loads(out)
    assert (code, data["findings"]) == (0, []), data["findings"]


def test_healthy_h20_roce_with_its_env(tmp_path):
    root = build_host(tmp_path / "h", "h20-roce")
    pfx = make_prefix(tmp_path / "pfx", "h20-roce", platforms=["h20-roce"], require=(), revision=H20_REVISION)
    r = doctor(root, "h20-roce", prefix=pfx, environ={"PATH": "/usr/bin:/bin"})
    assert r.findings == () and r.exit_code(strict=True) == 0
    assert r.context["environment"]["NVSHMEM_IB_GID_INDEX"]["value"] == "5"


def test_gke_a4_with_a_correct_gib_setup(tmp_path, capsys, clean_env):
    """Seed 002 after its fix: the rdmav57 provider in the system dir, the job env without
    RDMAV_DRIVERS, TORCH_NCCL_USE_COMM_NONBLOCKING unset, the libraries where they are."""
    root = build_host(tmp_path / "h", "gke-a4", seed002_provider_fix)
    job = {
        "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64:/usr/local/nvidia/lib:/usr/local/gib/lib64",
        "NCCL_NET": "gIB",
        "NCCL_IB_TC": "52",
        "NCCL_IB_ADAPTIVE_ROUTING": "1",
        "NCCL_TUNER_CONFIG_PATH": "/usr/local/gib/configs/tuner_config_a4.txtpb",
        "NVSHMEM_IBGDA_NIC_HANDLER": "gpu",
        "NVSHMEM_HCA_PREFIX": "mlx5",
        "NVSHMEM_IB_GID_INDEX": "3",
        "CUDA_HOME": "/usr/local/nvidia",
        "PATH": "/usr/bin:/bin",
    }
    env_file = write_env_file(tmp_path / "job.env", job)
    code, out, _ = doctor_cli(capsys, "--root", root, "--env-file", env_file, "--strict", "--json")
    data = json.loads(out)
    assert (code, data["findings"]) == (0, []), data["findings"]
    assert any("seed 002's fix is in place" in n for n in data["notes"])
    pfx = make_prefix(tmp_path / "pfx", "gke-a4-seed", platforms=["gke-a4"], require=(), revision=GKE_REVISION)
    code, out, _ = doctor_cli(capsys, "gke-a4-seed", "--root", root, "--prefix", pfx, "--project", REPO, "--env-file", env_file, "--strict", "--json")
    data = json.loads(out)
    assert (code, data["findings"]) == (0, []), data["findings"]
    # without the fix the same pod is seed 002's failure
    broken = build_host(tmp_path / "b", "gke-a4")
    code, out, _ = doctor_cli(capsys, "--root", broken, "--env-file", env_file, "--json")
    assert code == 2 and "lib.ibverbs-conflict" in by_id(json.loads(out)["findings"])


def test_a_system_python_env_reads_the_tree_not_this_machine(tmp_path):
    """An env on the host's /usr/bin/python3: under --root its /usr is the tree's. Reading this
    machine's /usr instead missed seed 002's conflict and raised false alarms about its paths."""
    root = build_host(tmp_path / "h", "gke-a4")
    pfx = make_prefix(tmp_path / "pfx", "gke-a4-seed", platforms=["gke-a4"], require=(), revision=GKE_REVISION,
                      python="host", python_executable="/usr/bin/python3")
    r = doctor(root, "gke-a4-seed", prefix=pfx, environ={"PATH": "/usr/bin:/bin"})
    assert_exactly(by_id(r.findings), {"lib.ibverbs-conflict": "error"})
    assert r.context["deep_ep"]["origin"] == str(pfx / "lib/python3.12/site-packages/deep_ep/__init__.py")
