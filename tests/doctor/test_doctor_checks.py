"""Every doctor check on a fixture where it fires and one where it stays quiet (issue 7).

Host trees are the platform fixtures (tests/fixtures/hosts/make_hosts.py) with seed faults stacked
on them (tests/doctor_fixtures.py); environments are passed explicitly, never this process's.
"""
from __future__ import annotations

import pytest

from deepep_env.doctor import run_doctor
from doctor_fixtures import (
    REPO,
    build_host,
    gib_plugin,
    gke_libibverbs,
    h200_capture_tree,
    ids,
    make_prefix,
    no_driver_keys,
    no_peermem,
    old_doca_on_614,
    old_driver,
    problems,
)


def doctor(root, env=None, environ=None, **kw):
    kw.setdefault("cwd", str(root))
    if env is not None:
        kw.setdefault("project", str(REPO))
    return run_doctor(env, root=root, environ=environ or {}, **kw)


def find(report, id_):
    hits = [f for f in report.findings if f.id == id_]
    assert hits, f"{id_} not reported; got {sorted(ids(report))}"
    return hits[0]


def quiet(report, *id_list):
    for i in id_list:
        assert i not in ids(report), f"{i} fired: {[f.title for f in report.findings if f.id == i]}"


# -- healthy hosts ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["gcp-b200", "gcp-b200-scrambled", "gcp-b200-gid1", "h20-roce", "h100-ib"])
def test_healthy_fixture_hosts_have_no_findings(tmp_path, name):
    r = doctor(build_host(tmp_path / "h", name))
    assert problems(r) == [] and r.exit_code(strict=True) == 0


def test_healthy_gcp_b200_with_its_installed_env(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200")
    r = doctor(root, "gcp-b200", prefix=make_prefix(tmp_path / "pfx"), environ={"PATH": "/usr/bin"})
    assert r.overlay_applied and r.findings == () and r.exit_code(strict=True) == 0
    # the effective environment says where each value came from
    env = r.context["environment"]
    assert env["NVSHMEM_IBGDA_NIC_HANDLER"]["value"] == "gpu"
    assert env["NVSHMEM_IBGDA_NIC_HANDLER"]["source"].startswith("overlay rule nic-handler-gpu")


def test_real_h200_capture_raises_no_false_alarm(tmp_path, shared_dir):
    """EnableStreamMemOPs 0, no peermem, no NICs, no DMI, CUDA_HOME not in the capture: all fine."""
    root = h200_capture_tree(tmp_path / "h200", shared_dir / "hosts" / "h200x8-nvlink")
    captured_env = dict(line.split("=", 1) for line in (shared_dir / "hosts/h200x8-nvlink/env.txt").read_text().splitlines() if "=" in line)
    for environ in (captured_env, {**captured_env, "NVSHMEM_IBGDA_NIC_HANDLER": "gpu"}):
        r = doctor(root, environ=environ)
        assert r.platform == "nvlink"
        assert problems(r) == [], problems(r)
    # the env as the spec installs it: the host's Python (/opt/torch/.venv, not in the capture)
    pfx = make_prefix(tmp_path / "pfx", "h200-nvlink", platforms=["nvlink"], python="host",
                      python_executable="/opt/torch/.venv/bin/python3")
    r = doctor(root, "h200-nvlink", environ=captured_env, prefix=pfx)
    assert problems(r) == [], problems(r)
    assert r.exit_code(strict=True) == 0 and r.context["deep_ep"]["via"].startswith("PYTHONPATH")


# -- host stack ---------------------------------------------------------------------------------------
def test_old_doca_on_kernel_614(tmp_path):
    r = doctor(build_host(tmp_path / "h", "gcp-b200", old_doca_on_614))
    f = find(r, "host.ofed-kernel")
    assert f.severity == "error" and "3.0.0" in f.title and "6.14.0-1021-gcp" in f.title
    assert {e.file for e in f.evidence} >= {"/var/lib/dpkg/status", "/proc/sys/kernel/osrelease"}
    quiet(doctor(build_host(tmp_path / "ok", "gcp-b200")), "host.ofed-kernel")  # 3.2.1 on 6.14


def test_old_doca_on_an_older_kernel_is_fine(tmp_path):
    def kernel_68(desc):
        old_doca_on_614(desc)
        desc["files"]["proc/sys/kernel/osrelease"] = "6.8.0-1025-gcp"

    quiet(doctor(build_host(tmp_path / "h", "gcp-b200", kernel_68)), "host.ofed-kernel")


def test_ofed_version_from_mlx5_core_when_dpkg_is_silent(tmp_path):
    def rpm_host(desc):
        old_doca_on_614(desc)
        del desc["files"]["var/lib/dpkg/status"]  # mlx5_core 25.04 = DOCA 3.0

    f = find(doctor(build_host(tmp_path / "h", "gcp-b200", rpm_host)), "host.ofed-kernel")
    assert "3.0.x" in f.title and f.evidence[0].file == "/sys/module/mlx5_core/version"


def test_spec_ofed_and_driver_ranges(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200", old_doca_on_614, old_driver)
    r = doctor(root, "gcp-b200", prefix=make_prefix(tmp_path / "pfx"))
    assert "doca_ofed" in find(r, "host.ofed-version").evidence[-1].value
    assert "570.86.10" in find(r, "host.driver-version").title
    quiet(doctor(build_host(tmp_path / "ok", "gcp-b200"), "gcp-b200", prefix=make_prefix(tmp_path / "p2")),
          "host.ofed-version", "host.driver-version")


def test_unknown_ofed_and_driver_are_warnings_when_the_spec_asks(tmp_path):
    def blind(desc):
        del desc["files"]["var/lib/dpkg/status"]
        del desc["files"]["sys/module/mlx5_core/version"]
        del desc["files"]["proc/driver/nvidia/version"]

    r = doctor(build_host(tmp_path / "h", "gcp-b200", blind), "gcp-b200", prefix=make_prefix(tmp_path / "pfx"))
    assert find(r, "host.ofed-unknown").severity == "warning"
    assert find(r, "host.driver-unknown").severity == "warning"


def test_peermem_missing(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200", no_peermem)
    assert find(doctor(root), "host.peermem-missing").severity == "warning"  # RDMA NICs, no spec
    assert find(doctor(root, "gcp-b200", prefix=make_prefix(tmp_path / "pfx")), "host.peermem-missing").severity == "error"


def test_module_missing_from_the_spec(tmp_path):
    from deepep_env.base.project import find_project
    from deepep_env.envspec.resolve import load_resolved

    spec = load_resolved("gcp-b200", find_project(str(REPO)))
    spec = spec.model_copy(update={"host": spec.host.model_copy(update={"kernel_modules": ["nvidia_peermem", "gdrdrv"]})})
    r = doctor(build_host(tmp_path / "h", "gcp-b200"), "gcp-b200", spec=spec, prefix=make_prefix(tmp_path / "pfx"))
    assert "gdrdrv" in find(r, "host.module-missing").title
    quiet(r, "host.peermem-missing")


def test_port_down(tmp_path):
    r = doctor(build_host(tmp_path / "h", "gcp-b200-port-down"))
    f = find(r, "host.port-down")
    assert f.severity == "error" and f.title.startswith("mlx5_3 port 1 is DOWN")
    assert f.evidence[0].file == "/sys/class/infiniband/mlx5_3/ports/1/state"


# -- rdma-config ----------------------------------------------------------------------------------------
def test_hca_prefix_matching_no_device(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200-rocep")
    f = find(doctor(root), "host.hca-prefix")  # NVSHMEM's default mlx5 vs rocep* names
    assert f.severity == "error" and "rocep" in f.fix
    assert find(doctor(root, environ={"NVSHMEM_HCA_PREFIX": "mlx5"}), "host.hca-prefix").evidence[0].source == "environment"
    quiet(doctor(root, environ={"NVSHMEM_HCA_PREFIX": "rocep"}), "host.hca-prefix")
    # with the env installed, `deepep-env run` sets the prefix: only an info for outside processes
    r = doctor(root, "gcp-b200", prefix=make_prefix(tmp_path / "pfx"), environ={"NVSHMEM_HCA_PREFIX": "mlx5"})
    assert find(r, "host.hca-prefix").severity == "info" and r.exit_code() == 0


def test_hca_list_and_pe_mapping(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200")
    r = doctor(root, environ={"NVSHMEM_HCA_LIST": "mlx5_0:1,mlx5_9", "NVSHMEM_HCA_PE_MAPPING": "mlx5_0:1:2"})
    assert "mlx5_9" in find(r, "host.hca-list").title
    find(r, "host.hca-list-and-pe-mapping")
    quiet(doctor(root, environ={"NVSHMEM_HCA_LIST": "mlx5_0:1,mlx5_1"}), "host.hca-list", "host.hca-list-and-pe-mapping")


def test_device_to_hca_mapping(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200-port-down")
    r = doctor(root, environ={"DEEP_EP_DEVICE_TO_HCA_MAPPING": "0:mlx5_0:1,1:mlx5_9:1,2:mlx5_3:1,9:mlx5_1:1"})
    t = find(r, "host.hca-mapping").title
    assert "mlx5_9 does not exist" in t and "mlx5_3 port 1 is DOWN" in t and "GPU 9 does not exist" in t
    everyone_on_0 = ",".join(f"{i}:mlx5_0:1" for i in range(8))
    far = find(doctor(build_host(tmp_path / "ok", "gcp-b200"), environ={"DEEP_EP_DEVICE_TO_HCA_MAPPING": everyone_on_0}), "host.hca-mapping-far")
    assert "GPU7→mlx5_0 is SYS" in far.title
    # the overlay's own mapping (from topology) is quiet
    r = doctor(build_host(tmp_path / "ok2", "gcp-b200-scrambled"), "gcp-b200", prefix=make_prefix(tmp_path / "pfx"))
    quiet(r, "host.hca-mapping", "host.hca-mapping-far")


def test_gid_index(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200")
    f = find(doctor(root, environ={"NVSHMEM_IB_GID_INDEX": "1"}), "host.gid-index")  # link-local RoCE v2
    assert "not IPv4-mapped" in f.title and f.fix.startswith("set NVSHMEM_IB_GID_INDEX=3")
    assert find(doctor(root, environ={"NCCL_IB_GID_INDEX": "2"}), "host.gid-index").title.startswith("NCCL_IB_GID_INDEX=2")
    quiet(doctor(root, environ={"NVSHMEM_IB_GID_INDEX": "3"}), "host.gid-index")
    # one port has its IPv4 RoCE v2 GID at 5 (a global IPv6 address first): index 3 fails there only
    f = find(doctor(build_host(tmp_path / "d", "gcp-b200-gid-disagree"), environ={"NVSHMEM_IB_GID_INDEX": "3"}), "host.gid-index")
    assert "mlx5_5:1" in f.title and "mlx5_4:1" not in f.title
    # InfiniBand needs no GID index
    quiet(doctor(build_host(tmp_path / "ib", "h100-ib"), environ={"NVSHMEM_IB_GID_INDEX": "7"}), "host.gid-index")


def test_no_rocev2_gid(tmp_path):
    f = find(doctor(build_host(tmp_path / "h", "gcp-b200-no-rocev2")), "host.gid-no-rocev2")
    assert "mlx5_0:1" in f.title
    # the H20 management NIC (no IPv4 GID, far from every GPU) is not a port in use
    quiet(doctor(build_host(tmp_path / "ok", "h20-roce")), "host.gid-no-rocev2", "host.gid-index")


# -- NIC handler ------------------------------------------------------------------------------------------
def test_cpu_handler_on_gcp_b200(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200")
    f = find(doctor(root, environ={"NVSHMEM_IBGDA_NIC_HANDLER": "cpu"}), "nic-handler.cpu-on-gcp-b200")
    assert f.severity == "error" and f.evidence[0].var == "NVSHMEM_IBGDA_NIC_HANDLER"
    quiet(doctor(root, environ={"NVSHMEM_IBGDA_NIC_HANDLER": "gpu"}), "nic-handler.cpu-on-gcp-b200")
    quiet(doctor(build_host(tmp_path / "h20", "h20-roce"), environ={"NVSHMEM_IBGDA_NIC_HANDLER": "cpu"}), "nic-handler.cpu-on-gcp-b200")


def test_handler_against_the_spec(tmp_path):
    r = doctor(build_host(tmp_path / "h", "h20-roce"), "h20-roce", prefix=make_prefix(tmp_path / "p", "h20-roce", platforms=["h20-roce"], require=()),
               environ={"NVSHMEM_IBGDA_NIC_HANDLER": "cpu"})
    assert find(r, "nic-handler.spec-mismatch").severity == "warning"


def test_gpu_handler_without_driver_keys(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200", no_driver_keys)
    for environ in ({"NVSHMEM_IBGDA_NIC_HANDLER": "gpu"}, {}):  # explicit, or auto on a platform that needs gpu
        f = find(doctor(root, environ=environ), "nic-handler.driver-keys")
        assert f.severity == "error" and f.evidence[0].file == "/proc/driver/nvidia/params"
        assert "EnableStreamMemOPs: 0" in f.evidence[0].value and "NVreg_EnableStreamMemOPs=1" in f.fix
    find(doctor(build_host(tmp_path / "h20", "h20-roce-no-keys")), "nic-handler.driver-keys")  # seed 003
    quiet(doctor(build_host(tmp_path / "ok", "gcp-b200"), environ={"NVSHMEM_IBGDA_NIC_HANDLER": "gpu"}), "nic-handler.driver-keys")
    # with the spec too: one finding for the handler, none repeated for the spec's driver_params
    r = doctor(root, "gcp-b200", prefix=make_prefix(tmp_path / "pfx"))
    assert "nic-handler.driver-keys" in ids(r) and "host.driver-param" not in ids(r)


def test_spec_driver_params_where_the_handler_does_not_matter(tmp_path, shared_dir):
    root = h200_capture_tree(tmp_path / "h200", shared_dir / "hosts" / "h200x8-nvlink")
    r = doctor(root, "gcp-b200", prefix=make_prefix(tmp_path / "pfx"))  # the wrong env for this host
    assert "EnableStreamMemOPs=1" in find(r, "host.driver-param").title
    assert find(r, "env.platform-mismatch").severity == "warning"
    quiet(r, "nic-handler.driver-keys")


def test_driver_params_unreadable(tmp_path):
    def no_params(desc):
        del desc["files"]["proc/driver/nvidia/params"]

    r = doctor(build_host(tmp_path / "h", "gcp-b200", no_params), environ={"NVSHMEM_IBGDA_NIC_HANDLER": "gpu"})
    assert find(r, "nic-handler.driver-keys-unknown").severity == "warning"


def test_gdrcopy_preloaded_with_the_gpu_handler(tmp_path):
    def gdr(desc):
        desc["files"]["opt/gdrcopy/lib/libgdrapi.so.2"] = ""

    root = build_host(tmp_path / "h", "gcp-b200", gdr)
    env = {"LD_PRELOAD": "/opt/gdrcopy/lib/libgdrapi.so.2", "NVSHMEM_IBGDA_NIC_HANDLER": "gpu"}
    assert find(doctor(root, environ=env), "nic-handler.gdrcopy-preload").severity == "warning"
    quiet(doctor(root, environ={"NVSHMEM_IBGDA_NIC_HANDLER": "gpu"}), "nic-handler.gdrcopy-preload")


# -- libraries -------------------------------------------------------------------------------------------
def test_two_libibverbs_reachable(tmp_path):
    root = build_host(tmp_path / "h", "gke-a4")
    f = find(doctor(root, environ={"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"}), "lib.ibverbs-conflict")
    assert "1.14.56.0" in f.title and "1.14.50.0" in f.title
    # the gke-a4 overlay puts /usr/local/nvidia/lib64 first: still two copies in one process
    r = doctor(root, "gke-a4", prefix=make_prefix(tmp_path / "pfx", "gke-a4", platforms=["gke-a4"], require=()))
    find(r, "lib.ibverbs-conflict")
    # not on the path now: a warning that a process adding it would mix them
    r = doctor(root)
    assert find(r, "lib.ibverbs-multiple-installed").severity == "warning"
    quiet(r, "lib.ibverbs-conflict")
    quiet(doctor(build_host(tmp_path / "ok", "gcp-b200"), environ={"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"}),
          "lib.ibverbs-conflict", "lib.ibverbs-multiple-installed")
    # the same seed-002 copy dropped on a bare GCP VM
    g = build_host(tmp_path / "g", "gcp-b200", gke_libibverbs)
    assert find(doctor(g, environ={"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"}), "lib.ibverbs-conflict").severity == "error"


def test_two_provider_abis_with_one_libibverbs(tmp_path):
    def extra_provider(desc):
        desc["files"]["usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav57.so"] = ""

    f = find(doctor(build_host(tmp_path / "h", "gcp-b200", extra_provider)), "lib.provider-mix")
    assert "rdmav34" in f.title and "rdmav57" in f.title


def test_rdmav_drivers_pointing_nowhere(tmp_path):
    root = build_host(tmp_path / "h", "gke-a4")
    f = find(doctor(root, environ={"RDMAV_DRIVERS": "/usr/local/nvidia/lib64/libibverbs"}), "lib.rdmav-drivers")  # seed 002's value
    assert "a directory" in f.title
    assert "nothing there" in find(doctor(root, environ={"RDMAV_DRIVERS": "/opt/none/libmlx5"}), "lib.rdmav-drivers").title
    quiet(doctor(root, environ={"RDMAV_DRIVERS": "/usr/local/nvidia/lib64/libibverbs/libmlx5"}), "lib.rdmav-drivers")
    quiet(doctor(build_host(tmp_path / "g", "gcp-b200"), environ={"RDMAV_DRIVERS": "mlx5"}), "lib.rdmav-drivers")


def test_preload_and_home_paths_that_do_not_exist(tmp_path):
    root = build_host(tmp_path / "h", "gke-a4")
    env = {"NVSHMEM_HOME": "/opt/deepep/nvshmem", "GDRCOPY_HOME": "/opt/deepep/gdrcopy", "CUDA_HOME": "/usr/local/nvidia",
           "LD_PRELOAD": "/opt/deepep/nvshmem/lib/libnvshmem_host.so.3", "TORCH_HOME": "/nonexistent/cache"}
    r = doctor(root, environ=env)
    homes = sorted(e.var for f in r.findings if f.id == "env.home-missing" for e in f.evidence)
    assert homes == ["GDRCOPY_HOME", "NVSHMEM_HOME"]  # seed 002; CUDA_HOME exists, TORCH_HOME is a cache
    assert "/opt/deepep/nvshmem/lib/libnvshmem_host.so.3" in find(r, "env.preload-missing").title
    quiet(doctor(root, environ={"NVSHMEM_HOME": "/usr/local/nvidia", "LD_PRELOAD": "/usr/local/nvidia/lib64/libibverbs.so.1"}),
          "env.home-missing", "env.preload-missing")


# -- NCCL ------------------------------------------------------------------------------------------------
def test_comm_nonblocking_with_gib(tmp_path):
    root = build_host(tmp_path / "h", "gke-a4")
    f = find(doctor(root, environ={"TORCH_NCCL_USE_COMM_NONBLOCKING": "0"}), "nccl.gib-nonblocking")
    assert f.severity == "error" and f.evidence[0].value == "0"
    env = {"TORCH_NCCL_USE_COMM_NONBLOCKING": "1", "NCCL_NET": "gIB", "LD_LIBRARY_PATH": "/usr/local/gib/lib64"}
    find(doctor(build_host(tmp_path / "g", "gcp-b200", gib_plugin), environ=env), "nccl.gib-nonblocking")
    quiet(doctor(build_host(tmp_path / "n", "gke-a4-no-gib"), environ={"TORCH_NCCL_USE_COMM_NONBLOCKING": "0"}), "nccl.gib-nonblocking")
    # `deepep-env run gke-a4` unsets it: info only
    r = doctor(root, "gke-a4", prefix=make_prefix(tmp_path / "pfx", "gke-a4", platforms=["gke-a4"], require=()),
               environ={"TORCH_NCCL_USE_COMM_NONBLOCKING": "0"})
    assert find(r, "nccl.gib-nonblocking").severity == "info"


def test_gib_plugin_missing(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200")
    find(doctor(root, environ={"NCCL_NET": "gIB"}), "nccl.gib-plugin-missing")
    quiet(doctor(build_host(tmp_path / "g", "gke-a4"), environ={"NCCL_NET": "gIB", "LD_LIBRARY_PATH": "/usr/local/gib/lib64"}),
          "nccl.gib-plugin-missing")


# -- env ------------------------------------------------------------------------------------------------
def test_misspelt_variables(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200")
    f = find(doctor(root, environ={"NVSHMEM_DISABLED_GDRCOPY": "1"}), "env.unknown-name")
    assert "NVSHMEM_DISABLE_GDRCOPY" in f.title and f.severity == "warning"
    find(doctor(root, environ={"DEEP_EP_DEVICE_TO_HCA_MAPPINGS": "0:mlx5_0:1"}), "env.unknown-name")
    quiet(doctor(root, environ={"NVSHMEM_DISABLE_GDRCOPY": "1", "NCCL_VERSION": "2.28.3-1", "EP_JIT_DEBUG": "1", "MY_VAR": "x"}),
          "env.unknown-name")


def test_env_not_installed_or_for_another_platform(tmp_path):
    root = build_host(tmp_path / "h", "h20-roce")
    r = doctor(root, "gcp-b200", prefix=tmp_path / "nowhere")
    assert find(r, "env.not-installed").severity == "error"
    assert "h20-roce" in find(r, "env.platform-mismatch").title
    quiet(doctor(root, "h20-roce", prefix=make_prefix(tmp_path / "p", "h20-roce", platforms=["h20-roce"], require=())),
          "env.not-installed", "env.platform-mismatch")


def test_overlay_that_cannot_be_built(tmp_path):
    pfx = make_prefix(tmp_path / "pfx", spec_env={"NVSHMEM_HCA_LIST": "mlx5_0", "NVSHMEM_HCA_PE_MAPPING": "mlx5_0:1:1"})
    r = doctor(build_host(tmp_path / "h", "gcp-b200"), prefix=pfx)
    assert find(r, "env.overlay-error").severity == "error" and r.exit_code() == 2


def test_a_crashing_check_is_a_finding_not_a_traceback(tmp_path, monkeypatch):
    import dataclasses

    from deepep_env.doctor import catalog, run

    def explode(ctx, emit):
        raise RuntimeError("boom")

    checks = [dataclasses.replace(c, fn=explode) if c.family == "nccl" else c for c in catalog.all_checks()]
    monkeypatch.setattr(run, "all_checks", lambda: checks)
    r = doctor(build_host(tmp_path / "h", "gcp-b200", old_doca_on_614))
    assert find(r, "doctor.check-failed").severity == "warning" and "boom" in find(r, "doctor.check-failed").title
    find(r, "host.ofed-kernel")  # the others ran


# -- several faults at once -----------------------------------------------------------------------------------
def test_many_faults_on_one_host_each_reported(tmp_path):
    def down(desc):
        desc["pci"] = __import__("doctor_fixtures").make_hosts().a4_pci(port_states={5: "1: DOWN"}, default_gids=__import__("doctor_fixtures").make_hosts().gcp_gids)

    root = build_host(tmp_path / "h", "gke-a4", down, old_doca_on_614, no_peermem, no_driver_keys, gib_plugin)
    env = {
        "NVSHMEM_IBGDA_NIC_HANDLER": "gpu",
        "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64:/usr/local/gib/lib64",
        "RDMAV_DRIVERS": "/usr/local/nvidia/lib64/libibverbs",
        "TORCH_NCCL_USE_COMM_NONBLOCKING": "0",
        "NVSHMEM_HOME": "/opt/deepep/nvshmem",
        "NVSHMEM_IB_GID_INDEX": "0",
        "NVSHMEM_DISABLED_GDRCOPY": "1",
        "LD_PRELOAD": "/usr/local/gib/lib64/libnccl-net.so:/opt/deepep/gdrcopy/lib/libgdrapi.so.2",
    }
    r = doctor(root, environ=env)
    want = {"host.port-down", "host.ofed-kernel", "host.peermem-missing", "nic-handler.driver-keys", "lib.ibverbs-conflict",
            "lib.rdmav-drivers", "nccl.gib-nonblocking", "env.home-missing", "host.gid-index", "env.unknown-name",
            "env.preload-missing", "nic-handler.gdrcopy-preload"}
    assert want <= ids(r), sorted(want - ids(r))
    assert r.exit_code() == 2
    for f in r.findings:
        assert f.evidence and f.fix and f.title


def test_values_from_activation_scripts_are_checked(tmp_path):
    """`deepep-env run` sources the prefix's activate.d scripts; doctor checks what they export."""
    root = build_host(tmp_path / "h", "gke-a4")
    pfx = make_prefix(tmp_path / "pfx", "gke-a4", platforms=["gke-a4"], require=())
    d = pfx / "etc/conda/activate.d"
    d.mkdir(parents=True)
    (d / "nvshmem.sh").write_text("export NVSHMEM_HOME=/opt/deepep/nvshmem\n")
    f = find(doctor(root, "gke-a4", prefix=pfx, environ={"PATH": "/usr/bin:/bin"}), "env.home-missing")
    assert f.evidence[0].source.startswith("an activation script in")
    # no bash to run them (PATH empty): a note, not a crash
    r = doctor(root, "gke-a4", prefix=pfx, environ={})
    assert any("activation scripts not applied" in n for n in r.notes)


def test_libibverbs_in_the_env_prefix_is_a_warning(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200")
    pfx = make_prefix(tmp_path / "pfx")
    (pfx / "lib" / "libibverbs.so.1.14.50.0").write_bytes(b"")
    (pfx / "lib" / "libibverbs.so.1").symlink_to("libibverbs.so.1.14.50.0")
    f = find(doctor(root, "gcp-b200", prefix=pfx), "lib.ibverbs-conflict")
    assert f.severity == "warning" and "1.14.58.0" in f.title


def test_a_path_of_this_machine_is_not_reported_missing_under_a_captured_root(tmp_path):
    """Run with --root on a machine whose own environment names its own paths (CUDA_HOME on the
    GPU box): existing here but not in the tree says nothing about the probed host."""
    root = build_host(tmp_path / "h", "gke-a4")
    here = tmp_path / "local-cuda"
    here.mkdir()
    r = doctor(root, environ={"CUDA_HOME": str(here), "NVSHMEM_HOME": str(tmp_path / "absent")})
    homes = [e.var for f in r.findings if f.id == "env.home-missing" for e in f.evidence]
    assert homes == ["NVSHMEM_HOME"]
    assert any("CUDA_HOME" in n for n in r.notes)
