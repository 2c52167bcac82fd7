"""Issue 27: doctor checks for this year's field failures (shared/research/2026-11-landscape.md §1.3),
each tripped by a fixture host or prefix that reproduces it, each quiet on the fixed one."""
from __future__ import annotations

import pytest

from doctor_fixtures import (build_host, cx8_gpu_fabric_rails, headerless_nvshmem, make_prefix, make_torch_venv,
                             make_v2_prefix, nvshmem_with_plugins, ofed_2410, ofed_2510_libmlx5, problems, v2_comm_reuse,
                             v2_elastic_ctor)
from test_deepep_v2_runtime import fake_cuda
from test_doctor_checks import doctor, find, quiet


@pytest.fixture
def v2(tmp_path):
    """A gcp-b200 host with a CUDA 13 toolkit and a pip-torch venv whose NCCL is torch's 2.28.9."""
    def make(*faults, base="gcp-b200", venv_kw=None, cuda_kw=None):
        root = build_host(tmp_path / "h", base, *faults)
        venv = make_torch_venv(tmp_path / "venv", pip_nccl="2.28.9", **(venv_kw or {}))
        fake_cuda(root / "opt/cuda-13.0", **(cuda_kw or {}))
        (root / "home/u").mkdir(parents=True)
        return root, venv, {"PATH": "/usr/bin", "HOME": "/home/u", "CUDA_HOME": "/opt/cuda-13.0"}
    return make


def _doctor(root, pfx, environ, **kw):
    return doctor(root, None, prefix=pfx, environ=environ, cwd=str(root), **kw)


# -- 1. NCCL downgraded below the build's (DeepEP #710) ----------------------------------------------------
def test_torch_nccl_preloaded_ahead_is_a_downgrade(tmp_path, v2):
    root, venv, environ = v2()
    pfx = make_v2_prefix(tmp_path / "pfx", python_executable=str(venv / "bin/python3"), platforms=("gcp-b200",))
    torch_nccl = venv / "lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"
    r = _doctor(root, pfx, {**environ, "LD_PRELOAD": str(torch_nccl)})
    f = find(r, "deepep-v2.nccl-downgraded")
    assert f.severity == "error" and "NCCL 2.28.9" in f.title and "2.30.7" in f.title and "#710" in f.title
    assert "nvidia-nccl-cu13==2.30.7" in f.fix
    # through `deepep-env run` alone the env's NCCL loads: quiet, and said so
    r = _doctor(root, pfx, environ)
    quiet(r, "deepep-v2.nccl-downgraded")
    assert any(c.startswith("deepep-v2.nccl-version: loads NCCL 2.30.7") for c in r.confirmed)


def test_run_older_than_build_from_2_31_is_a_downgrade(tmp_path, v2):
    """From 2.31 a newer runtime is fine (DeepEP #688), an older one never."""
    root, venv, environ = v2()
    pfx = make_v2_prefix(tmp_path / "pfx", nccl="2.32.3", lib_version="2.31.2", python_executable=str(venv / "bin/python3"))
    r = _doctor(root, pfx, environ)
    assert find(r, "deepep-v2.nccl-downgraded").severity == "error"
    quiet(r, "deepep-v2.nccl-build-mismatch", "deepep-v2.nccl-too-old")
    pfx2 = make_v2_prefix(tmp_path / "pfx2", nccl="2.31.2", lib_version="2.32.3", python_executable=str(venv / "bin/python3"))
    quiet(_doctor(root, pfx2, environ), "deepep-v2.nccl-downgraded", "deepep-v2.nccl-build-mismatch")


# -- 2. NVSHMEM layout class vs the DeepEP build (#707, #764, PR #696) -------------------------------------
def test_torch_215_nvshmem_37_next_to_a_345_build(tmp_path, v2):
    root, venv, environ = v2(venv_kw={"pip_nvshmem_version": "3.7.2"})
    pfx = make_v2_prefix(tmp_path / "pfx", python_executable=str(venv / "bin/python3"))
    f = find(_doctor(root, pfx, environ), "nvshmem.layout-mismatch")
    assert f.severity == "error" and "NVSHMEM 3.7.2" in f.title and "3.4.5" in f.title and "#696" in f.title
    # same class: quiet, confirmed
    pfx2 = make_v2_prefix(tmp_path / "pfx2", python_executable=str(venv / "bin/python3"), nvshmem_version="3.6.5")
    r = _doctor(root, pfx2, environ)
    quiet(r, "nvshmem.layout-mismatch")
    assert any(c.startswith("nvshmem.layout: loads NVSHMEM 3.7.2") for c in r.confirmed)


# -- 3. Gin capability: libmlx5 MLX5_1.25, OFED 24.10 (#628) -----------------------------------------------
def test_ofed_2410_libmlx5_has_no_gin(tmp_path, v2):
    root, venv, environ = v2(ofed_2410)
    pfx = make_v2_prefix(tmp_path / "pfx", python_executable=str(venv / "bin/python3"), platforms=("gcp-b200",))
    f = find(_doctor(root, pfx, environ), "deepep-v2.gin-mlx5-old")
    assert f.severity == "error" and "MLX5_1.25" in f.title and "#628" in f.title and "25.x" in f.fix


def test_libmlx5_125_has_gin(tmp_path, v2):
    root, venv, environ = v2(ofed_2510_libmlx5)
    pfx = make_v2_prefix(tmp_path / "pfx", python_executable=str(venv / "bin/python3"), platforms=("gcp-b200",))
    r = _doctor(root, pfx, environ)
    quiet(r, "deepep-v2.gin-mlx5-old")
    assert any("exports MLX5_1.25" in c for c in r.confirmed)


# -- 4. PyTorch's lazily created communicator reused (#726) -------------------------------------------------
def test_comm_reuse_on_by_default_warns(tmp_path, v2):
    root, venv, environ = v2()
    pfx = v2_comm_reuse(make_v2_prefix(tmp_path / "pfx", python_executable=str(venv / "bin/python3")))
    f = find(_doctor(root, pfx, environ), "deepep-v2.nccl-comm-reuse")
    assert f.severity == "warning" and "ncclTeamWorld" in f.title and "#726" in f.title and "run time" in f.title
    assert "device_id" in f.fix and "EP_REUSE_NCCL_COMM=0" in f.fix
    assert f.evidence[0].var == "EP_REUSE_NCCL_COMM" and f.evidence[1].file.endswith("deep_ep/utils/comm.py")
    # set to 1 from outside the spec (a launcher): still the risky default
    assert find(_doctor(root, pfx, {**environ, "EP_REUSE_NCCL_COMM": "1"}), "deepep-v2.nccl-comm-reuse")
    # off: DeepEP creates its own communicator
    r = _doctor(root, pfx, {**environ, "EP_REUSE_NCCL_COMM": "0"})
    quiet(r, "deepep-v2.nccl-comm-reuse")
    assert any("creates its own communicator" in c for c in r.confirmed)


def test_comm_reuse_deliberate_or_guarded_is_quiet(tmp_path, v2):
    root, venv, environ = v2()
    py = str(venv / "bin/python3")
    r = _doctor(root, v2_comm_reuse(make_v2_prefix(tmp_path / "pfx", python_executable=py,
                                                   spec_env={"EP_REUSE_NCCL_COMM": "1"})), environ)
    quiet(r, "deepep-v2.nccl-comm-reuse")
    assert any("set deliberately by the env spec" in c for c in r.confirmed)
    # a revision that checks the pointer, and a copy without utils/comm.py: nothing to say
    quiet(_doctor(root, v2_comm_reuse(make_v2_prefix(tmp_path / "pfx2", python_executable=py), guarded=True), environ),
          "deepep-v2.nccl-comm-reuse")
    quiet(_doctor(root, make_v2_prefix(tmp_path / "pfx3", python_executable=py), environ), "deepep-v2.nccl-comm-reuse")


# -- 5. ElasticBuffer first built inside CUDA-graph capture (sglang PR #39078) ----------------------------
def test_buffer_without_capture_check_is_said(tmp_path, v2):
    """An info finding: every 2.1.0 env has this constructor, and only the program's order decides it."""
    root, venv, environ = v2()
    py = str(venv / "bin/python3")
    f = find(_doctor(root, v2_elastic_ctor(make_v2_prefix(tmp_path / "pfx", python_executable=py)), environ),
             "deepep-v2.build-in-capture")
    assert f.severity == "info" and "DevComm setup failed" in f.title and "#39078" in f.title
    assert "before CUDA-graph capture" in f.fix
    quiet(_doctor(root, v2_elastic_ctor(make_v2_prefix(tmp_path / "pfx2", python_executable=py), capture_check=True),
                  environ), "deepep-v2.build-in-capture")
    quiet(_doctor(root, make_v2_prefix(tmp_path / "pfx3", python_executable=py), environ), "deepep-v2.build-in-capture")


# -- 6. CUDA 13 CCCL (#568) --------------------------------------------------------------------------------
def test_cuda13_without_cccl(tmp_path, v2):
    root, venv, environ = v2(cuda_kw={"cccl": False})
    pfx = make_v2_prefix(tmp_path / "pfx", python_executable=str(venv / "bin/python3"))
    f = find(_doctor(root, pfx, environ), "deepep-v2.jit-cccl-missing")
    assert f.severity == "error" and "cuda/std/tuple" in f.title and "cuda-cccl" in f.fix


# -- 7. nvshmem.h from a headerless NVSHMEM (srt-slurm #242) -----------------------------------------------
def test_headerless_bundled_nvshmem(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200", headerless_nvshmem)
    bundled = "/opt/venv/lib/python3.12/site-packages/flashinfer/data/nvshmem"
    f = find(doctor(root, environ={"NVSHMEM_HOME": bundled}), "nvshmem.headers-missing")
    assert f.severity == "error" and "nvshmem.h" in f.title and "another package's bundled copy" in f.title
    (root / bundled.lstrip("/") / "include").mkdir()
    (root / bundled.lstrip("/") / "include/nvshmem.h").write_text("// full\n")
    quiet(doctor(root, environ={"NVSHMEM_HOME": bundled}), "nvshmem.headers-missing")


# -- 8. B300/CX-8 "Unable to create ah" (nvshmem #33, InferenceX #2525) ------------------------------------
def test_cx8_rails_without_routable_gid(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200", cx8_gpu_fabric_rails)
    f = find(doctor(root), "host.ah-rails")
    assert f.severity == "error" and "Unable to create ah" in f.title
    assert f.fix.startswith("NVSHMEM_HCA_LIST=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1")
    quiet(doctor(build_host(tmp_path / "ok", "gcp-b200", lambda d: cx8_gpu_fabric_rails(d, bad_from=99))), "host.ah-rails")
    quiet(doctor(build_host(tmp_path / "cx7", "gcp-b200")), "host.ah-rails")


# -- 9. EP_SUPPRESS_NCCL_CHECK deliberate vs by accident (sglang #40671) -----------------------------------
def test_suppress_nccl_check_deliberate_in_the_spec(tmp_path, v2):
    root, venv, environ = v2()
    pfx = make_v2_prefix(tmp_path / "pfx", python_executable=str(venv / "bin/python3"),
                         spec_env={"EP_SUPPRESS_NCCL_CHECK": "1"})
    r = _doctor(root, pfx, environ)
    quiet(r, "deepep-v2.nccl-check-suppressed")
    assert any("set deliberately by the env spec" in c for c in r.confirmed)
    pfx2 = make_v2_prefix(tmp_path / "pfx2", python_executable=str(venv / "bin/python3"))
    f = find(_doctor(root, pfx2, {**environ, "EP_SUPPRESS_NCCL_CHECK": "1"}), "deepep-v2.nccl-check-suppressed")
    assert f.severity == "warning" and "outside the env spec" in f.title and "[env]" in f.fix


# -- 10. NVSHMEM variables against the transport plugins (sglang #38769) -----------------------------------
def test_nvshmem_variables_are_searched_in_the_transport_plugins(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200")
    pfx = nvshmem_with_plugins(make_prefix(tmp_path / "pfx"))
    r = doctor(root, None, prefix=pfx, environ={"NVSHMEM_IB_GID_INDEX": "3", "NVSHMEM_TMA_POLICY": "1"}, cwd=str(root))
    unread = [f for f in r.findings if f.id == "nvshmem.var-unread"]
    assert any("NVSHMEM_TMA_POLICY" in f.title for f in unread)
    assert not any("NVSHMEM_IB_GID_INDEX" in f.title for f in unread)
    assert any("NVSHMEM_IB_GID_INDEX is read by nvshmem_transport_ib" in c for c in r.confirmed)
    # only the host library searched, as the reporter did, would have called it unknown
    pfx2 = nvshmem_with_plugins(make_prefix(tmp_path / "pfx2"), plugins={})
    r = doctor(root, None, prefix=pfx2, environ={"NVSHMEM_IB_GID_INDEX": "3"}, cwd=str(root))
    assert any("NVSHMEM_IB_GID_INDEX" in f.title for f in r.findings if f.id == "nvshmem.var-unread")


def test_stub_nvshmem_is_not_searched(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200")
    r = doctor(root, None, prefix=make_prefix(tmp_path / "pfx"), environ={"NVSHMEM_TMA_POLICY": "1"}, cwd=str(root))
    quiet(r, "nvshmem.var-unread")
    assert any("no NVSHMEM_* strings" in n for n in r.notes)


# -- EFA (AWS p5/p5en/p6) ----------------------------------------------------------------------------------
def test_efa_host_is_clean_through_deepep_env_run(tmp_path, v2):
    root, venv, environ = v2(base="aws-p5en")
    pfx = make_v2_prefix(tmp_path / "pfx", python_executable=str(venv / "bin/python3"), platforms=("aws-efa",))
    r = _doctor(root, pfx, environ)
    assert r.context["platform"]["name"] if isinstance(r.context.get("platform"), dict) else True
    assert not [p for p in problems(r) if "efa" in p or "host." in p], problems(r)
    env = r.context["environment"]
    assert env["NCCL_GIN_TYPE"]["value"] == "5" and "efa-gin" in env["NCCL_GIN_TYPE"]["source"]
    assert {"efa.driver: efa 3.3.0g (>= 3.3.0)", "efa.gdrdrv: gdrdrv loaded"} <= set(r.confirmed)


def test_efa_old_driver_no_gdrdrv_wrong_gin_type(tmp_path, v2):
    root, venv, environ = v2(base="aws-p5en-old-efa")
    pfx = make_v2_prefix(tmp_path / "pfx", python_executable=str(venv / "bin/python3"), platforms=("aws-efa",),
                         spec_env={"NCCL_GIN_TYPE": "3"})
    r = _doctor(root, pfx, environ)
    assert find(r, "efa.driver-too-old").severity == "error"
    assert find(r, "efa.gdrdrv-missing").severity == "error"
    assert find(r, "efa.gin-type").severity == "error"


def test_efa_without_aws_ofi_nccl(tmp_path, v2):
    root, venv, environ = v2(base="aws-p5en")
    import shutil
    shutil.rmtree(root / "opt/amazon/ofi-nccl")
    pfx = make_v2_prefix(tmp_path / "pfx", python_executable=str(venv / "bin/python3"), platforms=("aws-efa",))
    assert find(_doctor(root, pfx, environ), "efa.ofi-plugin-missing").severity == "error"


def test_no_efa_findings_elsewhere(tmp_path, v2):
    root, venv, environ = v2()
    pfx = make_v2_prefix(tmp_path / "pfx", python_executable=str(venv / "bin/python3"), platforms=("gcp-b200",))
    assert not [f for f in _doctor(root, pfx, environ).findings if f.id.startswith("efa.")]
