"""Issue 17: what a DeepEP 2.x env needs at run time — the overlay rules (one NCCL per process, the JIT
cache) and doctor's deepep-v2 family — on fake prefixes, fake pip-torch venvs and fixture hosts.

The failure the first GPU run hit is the centre of it: pip PyTorch dlopens its own NCCL 2.28.9 by path
(torch/__init__.py _preload_cuda_deps), DeepEP 2.x linked NCCL 2.30.7, and `import deep_ep` aborted
with "Duplicate NCCL runtime" (deep_ep/__init__.py check_nccl_so)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepep_env.overlay.changes import PrependPath, Set
from deepep_env.overlay.rules import build_overlay, default_site_dirs
from deepep_env.overlay.rules_v2 import competing_nccl, rule_record
from deepep_env.platform import detect
from doctor_fixtures import build_host, make_prefix, make_torch_venv, make_v2_prefix, problems
from test_doctor_checks import doctor, find, quiet

V2_IDS = ("deepep-v2.jit-nvcc-missing", "deepep-v2.jit-cuobjdump-missing", "deepep-v2.jit-nvcc-too-old",
          "deepep-v2.nccl-duplicate", "deepep-v2.nccl-root-missing")


def fake_cuda(dest: Path, version: str = "13.0.88", tools=("nvcc", "cuobjdump"), cccl: bool = True) -> Path:
    (dest / "bin").mkdir(parents=True)
    if cccl:  # CUDA 13 keeps CCCL under include/cccl (DeepEP #568)
        (dest / "include/cccl/cuda/std").mkdir(parents=True)
        (dest / "include/cccl/cuda/std/tuple").write_text("// cccl\n")
    for t in tools:
        (dest / "bin" / t).write_text("#!/bin/sh\n")
        (dest / "bin" / t).chmod(0o755)
    (dest / "version.json").write_text(json.dumps({"cuda_nvcc": {"version": version}}))
    return dest


def ov(host_tree, host, prefix, environ, site_dirs=None):
    d = detect(host_tree(host), environ={})
    return build_overlay(d.facts, d.platform, prefix=str(prefix), environ=environ,
                         site_dirs=site_dirs if site_dirs is not None else default_site_dirs("/nonexistent-root", str(prefix)))


# -- overlay ------------------------------------------------------------------------------------------------
def test_nccl_preload_fires_for_a_v2_prefix_with_another_nccl_about(host_tree, tmp_path):
    venv = make_torch_venv(tmp_path / "venv", pip_nccl="2.28.9")
    pfx = make_v2_prefix(tmp_path / "pfx", python_executable=str(venv / "bin/python3"))
    sites = default_site_dirs("/nonexistent-root", str(pfx)) + [str(venv / "lib/python3.12/site-packages")]
    o = ov(host_tree, "h200x8-nvlink", pfx, {"HOME": str(tmp_path / "home")}, sites)
    (pre,) = [c for c in o.changes if c.rule == "nccl-preload"]
    assert isinstance(pre, PrependPath) and pre.entries == (str(pfx / "lib/libnccl.so.2"),)
    assert "check_nccl_so" in pre.fact and "venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2" in pre.fact
    # the env's own torch-preload link is not a competitor: it is the env's NCCL
    assert competing_nccl([str(pfx / "lib/python3.12/site-packages")], str(pfx / "lib/libnccl.so.2")) == []


def test_nccl_preload_is_quiet_without_a_competitor_or_for_v1(host_tree, tmp_path):
    pfx = make_v2_prefix(tmp_path / "pfx")
    o = ov(host_tree, "h200x8-nvlink", pfx, {"HOME": "/home/u"})
    assert "LD_PRELOAD" not in o.env() and any("no other NCCL" in n.message for n in o.notes if n.rule == "nccl-preload")
    v1 = make_prefix(tmp_path / "v1")
    o = ov(host_tree, "gcp-b200", v1, {"HOME": "/home/u"})
    assert not [c for c in o.changes if c.rule in ("nccl-preload", "deepep-jit-cache")]
    assert {n.rule for n in o.notes} >= {"nccl-preload", "deepep-jit-cache"} and rule_record(str(v1), "nccl-preload") is None


def test_jit_cache_goes_to_the_user_cache_per_build(host_tree, tmp_path):
    pfx = make_v2_prefix(tmp_path / "pfx")
    env = ov(host_tree, "h200x8-nvlink", pfx, {"HOME": "/home/u"}).env()
    assert env["EP_JIT_CACHE_DIR"] == "/home/u/.cache/deepep-env/jit/deep-ep-h4329f5c41c_0"
    env = ov(host_tree, "h200x8-nvlink", pfx, {"HOME": "/home/u", "XDG_CACHE_HOME": "/scratch/c"}).env()
    assert env["EP_JIT_CACHE_DIR"] == "/scratch/c/deepep-env/jit/deep-ep-h4329f5c41c_0"


def test_jit_cache_keeps_a_chosen_one_and_says_when_there_is_no_home(host_tree, tmp_path):
    pfx = make_v2_prefix(tmp_path / "pfx")
    o = ov(host_tree, "h200x8-nvlink", pfx, {"HOME": "/home/u", "EP_JIT_CACHE_DIR": "/shared/jit"})
    assert not [c for c in o.changes if c.rule == "deepep-jit-cache"]
    o = ov(host_tree, "h200x8-nvlink", pfx, {})
    (note,) = [n for n in o.notes if n.rule == "deepep-jit-cache"]
    assert note.level == "warning" and "./.deep_ep" in note.message
    d = detect(host_tree("h200x8-nvlink"), environ={})
    o = build_overlay(d.facts, d.platform, prefix=str(pfx), environ={"HOME": "/home/u"}, site_dirs=[],
                      spec_env={"EP_JIT_CACHE_DIR": "/fast/jit"})
    (c,) = [c for c in o.changes if isinstance(c, Set) and c.name == "EP_JIT_CACHE_DIR"]
    assert c.rule == "spec-env" and c.value == "/fast/jit"


def test_ep_variables_are_known_names(host_tree, tmp_path):
    from deepep_env.base.errors import UserError
    from deepep_env.overlay import known_vars

    for name in ("EP_JIT_CACHE_DIR", "EP_NCCL_ROOT_DIR", "EP_REUSE_NCCL_COMM", "NCCL_GIN_CROSS_NIC", "NCCL_GIN_ENABLE"):
        known_vars.check_name(name)
    with pytest.raises(UserError) as e:
        known_vars.check_name("NCCL_GIN_ENABLED")
    assert "NCCL_GIN_ENABLE" in str(e.value)


# -- doctor -------------------------------------------------------------------------------------------------
@pytest.fixture
def v2_host(tmp_path):
    """A pip-torch host venv (NCCL 2.28.9, as the GPU machine's), a DeepEP 2.x env using it, a toolkit."""
    root = build_host(tmp_path / "h", "gcp-b200")
    venv = make_torch_venv(tmp_path / "venv", pip_nccl="2.28.9")
    fake_cuda(root / "opt/cuda-13.0")                  # host paths are read under the host tree
    (root / "home/u").mkdir(parents=True)
    environ = {"PATH": "/usr/bin", "HOME": "/home/u", "CUDA_HOME": "/opt/cuda-13.0"}
    return root, venv, environ


def _doctor(root, pfx, environ, **kw):
    return doctor(root, None, prefix=pfx, environ=environ, cwd=str(root), **kw)


def test_doctor_clean_through_deepep_env_run(tmp_path, v2_host):
    root, venv, environ = v2_host
    pfx = make_v2_prefix(tmp_path / "pfx", python_executable=str(venv / "bin/python3"), platforms=("gcp-b200",))
    r = _doctor(root, pfx, environ)
    assert not [p for p in problems(r) if "deepep" in p], problems(r)
    conf = "\n".join(r.confirmed)
    assert f"one NCCL 2.30.7 in the process, {pfx}/lib/libnccl.so" in conf
    assert "deepep-v2.jit: nvcc and cuobjdump" in conf and "CUDA 13.0" in conf
    assert ".cache/deepep-env/jit/deep-ep-h4329f5c41c_0 is writable" in conf
    env = r.context["environment"]
    assert "overlay rule nccl-preload" in env["LD_PRELOAD"]["source"]
    assert env["EP_JIT_CACHE_DIR"]["source"].startswith("overlay rule deepep-jit-cache")


def test_doctor_predicts_duplicate_nccl_runtime(tmp_path, v2_host):
    """The scouting run: torch's own NCCL by path next to the env's (no link in the env's site-packages)."""
    root, venv, environ = v2_host
    pfx = make_v2_prefix(tmp_path / "pfx", link=False, python_executable=str(venv / "bin/python3"), platforms=("gcp-b200",))
    f = find(_doctor(root, pfx, environ), "deepep-v2.nccl-duplicate")
    assert f.severity == "error" and "Duplicate NCCL runtime" in f.title
    assert str(venv / "lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2") in f.title


def test_doctor_finds_torchs_nccl_first_when_preload_points_elsewhere(tmp_path, v2_host):
    root, venv, environ = v2_host
    pfx = make_v2_prefix(tmp_path / "pfx", link=False, python_executable=str(venv / "bin/python3"))
    r = doctor(root, None, prefix=pfx, environ={**environ, "EP_SUPPRESS_NCCL_CHECK": "1"}, cwd=str(root))
    assert find(r, "deepep-v2.nccl-check-suppressed").severity == "warning"


@pytest.mark.parametrize("kw,fid", [
    ({"lib_version": "2.28.9", "nccl": "2.28.9"}, "deepep-v2.nccl-too-old"),
    ({"nccl": "2.30.4"}, "deepep-v2.nccl-build-mismatch"),
    ({"envs_root": "/nonexistent/nccl"}, "deepep-v2.nccl-root-missing"),
])
def test_doctor_nccl_version_and_root(tmp_path, v2_host, kw, fid):
    root, venv, environ = v2_host
    pfx = make_v2_prefix(tmp_path / "pfx", python_executable=str(venv / "bin/python3"), **kw)
    assert find(_doctor(root, pfx, environ), fid).severity == "error"


def test_doctor_jit_toolchain(tmp_path, v2_host):
    root, venv, environ = v2_host
    pfx = make_v2_prefix(tmp_path / "pfx", python_executable=str(venv / "bin/python3"))
    (root / "opt/empty-cuda").mkdir(parents=True)
    r = _doctor(root, pfx, {**environ, "CUDA_HOME": "/opt/empty-cuda"})
    assert find(r, "deepep-v2.jit-nvcc-missing").severity == "error" and find(r, "deepep-v2.jit-cuobjdump-missing")
    fake_cuda(root / "opt/cuda-12.2", version="12.2.140")
    assert "12.3" in find(_doctor(root, pfx, {**environ, "CUDA_HOME": "/opt/cuda-12.2"}), "deepep-v2.jit-nvcc-too-old").title
    # `which nvcc` when CUDA_HOME is unset (deep_ep/__init__.py find_cuda_home)
    env = {k: v for k, v in environ.items() if k != "CUDA_HOME"}
    r = _doctor(root, pfx, {**env, "PATH": "/opt/cuda-13.0/bin:/usr/bin"})
    quiet(r, *V2_IDS[:3])
    assert any(c.startswith("deepep-v2.jit: nvcc and cuobjdump in /opt/cuda-13.0") for c in r.confirmed)


def test_doctor_jit_cache(tmp_path, v2_host):
    root, venv, environ = v2_host
    pfx = make_v2_prefix(tmp_path / "pfx", python_executable=str(venv / "bin/python3"))
    assert find(_doctor(root, pfx, {**environ, "EP_JIT_CACHE_DIR": str(pfx / "jit")}), "deepep-v2.jit-cache-in-prefix")
    (root / "srv").mkdir()
    (root / "srv/a-file").write_text("")
    f = find(_doctor(root, pfx, {**environ, "EP_JIT_CACHE_DIR": "/srv/a-file/jit"}), "deepep-v2.jit-cache-unwritable")
    assert f.severity == "error" and "/srv/a-file is not a writable folder" in f.title
    env = {k: v for k, v in environ.items() if k != "HOME"}
    assert find(_doctor(root, pfx, env), "deepep-v2.jit-cache-relative").severity == "warning"


def test_doctor_gin_knobs(tmp_path, v2_host):
    root, venv, environ = v2_host
    pfx = make_v2_prefix(tmp_path / "pfx", python_executable=str(venv / "bin/python3"), platforms=("gcp-b200",))
    assert find(_doctor(root, pfx, {**environ, "NCCL_GIN_ENABLE": "0"}), "deepep-v2.gin-disabled").severity == "error"
    r = _doctor(root, pfx, {**environ, "NCCL_GIN_ENABLE": "0", "EP_DISABLE_GIN": "1"})
    quiet(r, "deepep-v2.gin-disabled")
    assert find(r, "deepep-v2.gin-off-internode").severity == "warning"   # gcp-b200 has RDMA NICs


def test_v1_env_is_not_checked_as_v2(tmp_path, v2_host):
    root, venv, environ = v2_host
    r = _doctor(root, make_prefix(tmp_path / "pfx"), environ)
    assert not [f for f in r.findings if f.id.startswith("deepep-v2.")]


def test_v2_extension_is_deep_ep_C(tmp_path, v2_host):
    root, venv, environ = v2_host
    pfx = make_v2_prefix(tmp_path / "pfx", python_executable=str(venv / "bin/python3"))
    quiet(_doctor(root, pfx, environ), "deepep.extension-missing")
    next((pfx / "lib/python3.12/site-packages/deep_ep").glob("_C*.so")).unlink()
    f = find(_doctor(root, pfx, environ), "deepep.extension-missing")
    assert "_C*.so" in f.title and "deep_ep_cpp" not in f.title


def test_elastic_buffer_feature_is_checked_in_the_installed_copy(tmp_path, v2_host):
    root, venv, environ = v2_host
    pfx = make_v2_prefix(tmp_path / "pfx", python_executable=str(venv / "bin/python3"))
    r = _doctor(root, pfx, environ)
    assert any(c.startswith("deepep.elastic-buffer: present") for c in r.confirmed)
    (pfx / "lib/python3.12/site-packages/deep_ep/buffers/elastic.py").write_text("class Other:\n    pass\n")
    assert find(_doctor(root, pfx, environ), "deepep.elasticbuffer-missing").severity == "error"


def test_no_device_hca_mapping_for_a_v2_env(host_tree, tmp_path):
    """DeepEP 2.x reads no DEEP_EP_DEVICE_TO_HCA_MAPPING (PR #466 is a V1 API): the overlay does not
    set it, and doctor does not require PR #466 of a V2 module."""
    o = ov(host_tree, "gcp-b200", make_v2_prefix(tmp_path / "v2", platforms=("gcp-b200",)), {"HOME": "/home/u"})
    assert "DEEP_EP_DEVICE_TO_HCA_MAPPING" not in o.env()
    assert any("does not read it" in n.message for n in o.notes if n.rule == "device-hca-mapping")
    assert "DEEP_EP_DEVICE_TO_HCA_MAPPING" in ov(host_tree, "gcp-b200", make_prefix(tmp_path / "v1"), {}).env()


# -- issue 38: a host where NCCL can have no Gin transport ----------------------------------------------------
# Measured on 4xH200 without RDMA NICs: tests/elastic/test_ep.py --num-processes 4 dies in every rank with
# nccl.cu:87's assertion; with EP_DISABLE_GIN=1 it passes. The overlay sets it there (rule no-gin-transport),
# never on a host with ACTIVE RDMA ports; doctor's deepep-v2.gin-unavailable catches the other direction.
def _gin_change(o):
    return next((c for c in o.changes if isinstance(c, Set) and c.name == "EP_DISABLE_GIN"), None)


def test_no_gin_transport_on_the_captured_nvlink_host_sets_ep_disable_gin(host_tree, tmp_path):
    o = ov(host_tree, "h200x8-nvlink", make_v2_prefix(tmp_path / "pfx"), {"HOME": "/home/u"})
    c = _gin_change(o)
    assert c is not None and c.value == "1" and c.rule == "no-gin-transport"
    assert "no RDMA NIC with an ACTIVE port" in c.fact and "nccl.cu:87" in c.fact
    assert o.env()["EP_DISABLE_GIN"] == "1"


def test_active_rdma_ports_keep_gin_and_v1_envs_are_left_alone(host_tree, tmp_path):
    for host in ("gcp-b200", "h100-ib", "aws-p5en"):   # RoCE, InfiniBand, EFA with aws-ofi-nccl: Gin is there
        o = ov(host_tree, host, make_v2_prefix(tmp_path / host, platforms=(host,)), {"HOME": "/home/u"})
        assert _gin_change(o) is None, host
        (note,) = [n for n in o.notes if n.rule == "no-gin-transport"]
        assert "ACTIVE port" in note.fact and "left unset" in note.message
    o = ov(host_tree, "h200x8-nvlink", make_prefix(tmp_path / "v1", platforms=("nvlink",)), {})
    assert _gin_change(o) is None and any("not a DeepEP 2.x env" in n.message for n in o.notes if n.rule == "no-gin-transport")


def test_efa_without_aws_ofi_nccl_has_no_gin_plugin(tmp_path):
    from doctor_fixtures import make_hosts
    from deepep_env.platform.hosttree import build_host_tree

    root = build_host_tree(make_hosts().aws_p5en("aws-p5en-no-ofi", ofi_nccl=False), tmp_path / "h")
    d = detect(root, environ={})
    o = build_overlay(d.facts, d.platform, prefix=str(make_v2_prefix(tmp_path / "pfx", platforms=("aws-efa",))),
                      environ={"HOME": "/home/u"}, site_dirs=[])
    c = _gin_change(o)
    assert c is not None and "no aws-ofi-nccl" in c.fact


@pytest.mark.parametrize("mine", ["0", "1", "", "4294967296"])
def test_a_users_own_ep_disable_gin_is_kept_and_said(host_tree, tmp_path, mine):
    """Issue 52.9: the overlay never silently replaces the user's EP_DISABLE_GIN (0 included); it keeps it and
    says, as a warning, what DeepEP 2.x does with Gin on and no transport."""
    o = ov(host_tree, "h200x8-nvlink", make_v2_prefix(tmp_path / "pfx"), {"HOME": "/home/u", "EP_DISABLE_GIN": mine})
    assert _gin_change(o) is None
    (note,) = [n for n in o.notes if n.rule == "no-gin-transport"]
    assert note.level == "warning" and f"EP_DISABLE_GIN={mine!r} is kept" in note.message
    assert o.apply({"EP_DISABLE_GIN": mine})["EP_DISABLE_GIN"] == mine


def test_the_spec_env_still_wins_over_the_gin_rule(host_tree, tmp_path):
    d = detect(host_tree("h200x8-nvlink"), environ={})
    o = build_overlay(d.facts, d.platform, prefix=str(make_v2_prefix(tmp_path / "pfx")), environ={"HOME": "/home/u"},
                      site_dirs=[], spec_env={"EP_DISABLE_GIN": "0"})
    c = _gin_change(o)
    assert c is not None and (c.rule, c.value) == ("spec-env", "0")


@pytest.fixture
def nvlink_v2(tmp_path):
    """The captured 8xH200 (no RDMA NIC) with a toolkit under its tree, and a pip-torch venv."""
    root = build_host(tmp_path / "h", "h200x8-nvlink")
    venv = make_torch_venv(tmp_path / "venv", pip_nccl="2.28.9")
    fake_cuda(root / "opt/cuda-13.0")
    (root / "home/u").mkdir(parents=True)
    return root, venv, {"PATH": "/usr/bin", "HOME": "/home/u", "CUDA_HOME": "/opt/cuda-13.0"}


def test_doctor_gin_unavailable_names_the_assertion_and_the_fix(tmp_path, nvlink_v2):
    root, venv, environ = nvlink_v2
    py = str(venv / "bin/python3")
    pfx = make_v2_prefix(tmp_path / "pfx", python_executable=py, spec_env={"EP_DISABLE_GIN": "0"})
    f = find(_doctor(root, pfx, environ), "deepep-v2.gin-unavailable")
    assert f.severity == "error" and "nccl.cu:87" in f.title and "NCCL_GIN_TYPE_NONE" in f.title
    assert "railedGinType" in f.title and "8 ranks" in f.title and "EP_DISABLE_GIN=1" in f.fix
    assert any("no RDMA NIC with an ACTIVE port" in e.value for e in f.evidence)
    # through deepep-env: the overlay's EP_DISABLE_GIN=1 (at most an info for processes started outside it)
    r = _doctor(root, make_v2_prefix(tmp_path / "pfx2", python_executable=py), environ)
    assert all(x.severity == "info" for x in r.findings if x.id == "deepep-v2.gin-unavailable")
    assert r.context["environment"]["EP_DISABLE_GIN"]["source"].startswith("overlay rule no-gin-transport")
    pfx3 = make_v2_prefix(tmp_path / "pfx3", python_executable=py)
    quiet(_doctor(root, pfx3, {**environ, "EP_DISABLE_GIN": "1"}), "deepep-v2.gin-unavailable")


def test_doctor_gin_unavailable_stays_quiet_with_active_rdma_ports(tmp_path, v2_host):
    root, venv, environ = v2_host                        # gcp-b200: ACTIVE RoCE ports
    pfx = make_v2_prefix(tmp_path / "pfx", python_executable=str(venv / "bin/python3"), platforms=("gcp-b200",),
                         spec_env={"EP_DISABLE_GIN": "0"})
    quiet(_doctor(root, pfx, environ), "deepep-v2.gin-unavailable")


def test_doctor_gin_unavailable_stays_quiet_for_one_rank(tmp_path, nvlink_v2):
    def one_gpu(desc):
        gpus = [d for c in desc["pci"] for d in c["devices"] if d["vendor"] == "0x10de" and d["class"].startswith("0x03")]
        for c in desc["pci"]:
            c["devices"] = [d for d in c["devices"] if d not in gpus[1:]]
        for g in gpus[1:]:   # and from the driver's own list
            desc["files"] = {k: v for k, v in desc["files"].items() if f"/gpus/{g['bdf']}/" not in k}
    root1 = build_host(tmp_path / "one", "h200x8-nvlink", one_gpu)
    _, venv, environ = nvlink_v2
    pfx = make_v2_prefix(tmp_path / "pfx1", python_executable=str(venv / "bin/python3"), spec_env={"EP_DISABLE_GIN": "0"})
    fake_cuda(root1 / "opt/cuda-13.0")
    quiet(_doctor(root1, pfx, environ), "deepep-v2.gin-unavailable")   # one GPU, one rank: no Gin needed


@pytest.mark.parametrize("value,off", [("1", True), (" 2", True), ("-1", True), ("0", False), ("", False),
                                       ("true", False), ("yes", False), ("00", False)])
def test_ep_disable_gin_is_read_as_deepep_reads_it(value, off, tmp_path, nvlink_v2):
    """csrc/utils/system.hpp get_env: sscanf("%d"); a word leaves the int unset, so it is not a way to turn Gin off."""
    root, venv, environ = nvlink_v2
    pfx = make_v2_prefix(tmp_path / "pfx", python_executable=str(venv / "bin/python3"), spec_env={"EP_DISABLE_GIN": value})
    fired = "deepep-v2.gin-unavailable" in {f.id for f in _doctor(root, pfx, environ).findings if f.severity == "error"}
    assert fired is not off


@pytest.mark.parametrize("value, as_c_int", [
    ("1", 1), ("0", 0), (" \t+7x", 7), ("-1", -1), ("00000000001", 1), ("4294967296", 0), ("4294967297", 1),
    ("2147483648", -2147483648), ("9" * 400, -1), ("-" + "9" * 400, 0), ("\uff11", None), ("\u00a01", None),
    ("\u0661", None), ("true", None), ("", None), ("+", None), ("1" + "\u0661", 1),
])
def test_ep_disable_gin_is_read_as_deepeps_sscanf_reads_it(value, as_c_int):
    """Issue 52.8: doctor read Unicode digits and no 32-bit wrap; DeepEP's sscanf("%d") reads ASCII into an int."""
    from deepep_env.doctor.checks_deepep_v2 import c_int

    assert c_int(value) == as_c_int
