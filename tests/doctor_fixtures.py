"""Fixtures for the doctor tests: faulty variants of the platform fixture hosts, installed-env
prefixes, pip-torch venvs and real (minimal) ELF shared objects.

Hosts come from tests/fixtures/hosts/make_hosts.py (the platform helper's descriptions, laid out
by deepep_env.platform.hosttree as real sysfs/procfs trees); each fault is one small edit of a
description, named after the seed failure it reproduces, so several can be stacked on one host.
"""
from __future__ import annotations

import copy
import os
import importlib.util
import json
import struct
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

import pytest

from cli_runner import cli_in_process
from deepep_env.platform.hosttree import build_host_tree

REPO = Path(__file__).resolve().parents[1]
HOSTS_DIR = REPO / "tests" / "fixtures" / "hosts"
FIXTURES = REPO / "tests" / "fixtures" / "doctor"
PR466_REVISION = "8a07e7e7ed57cfc63005f670d64d410cb30b061b"
V2_REVISION = "dd758caf451848bd150e1046af3d0a73e5fff38d"  # DeepEP 2.1.0


def make_hosts():
    """tests/fixtures/hosts/make_hosts.py as a module (it is a script, not a package)."""
    name = "make_hosts"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HOSTS_DIR / "make_hosts.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


# -- faults: each edits a host description in place ---------------------------------------------
def old_doca_on_614(desc: dict) -> None:
    """Seed 000 §4 problem 3: DOCA-OFED 3.0.0 on kernel 6.14."""
    mh = make_hosts()
    desc["files"]["proc/sys/kernel/osrelease"] = "6.14.0-1021-gcp"
    desc["files"]["var/lib/dpkg/status"] = mh.dpkg_status({"doca-ofed": "3.0.0-058000", "rdma-core": "2504mlnx56-1.2504061"})
    desc["files"]["sys/module/mlx5_core/version"] = "25.04-0.6.0"


def no_peermem(desc: dict) -> None:
    mh = make_hosts()
    desc["files"]["proc/modules"] = mh.proc_modules(["nvidia_uvm", "nvidia", "mlx5_ib", "ib_uverbs", "ib_core", "mlx5_core"])


def no_driver_keys(desc: dict) -> None:
    """Seed 003: EnableStreamMemOPs 0 and no PeerMappingOverride."""
    desc["files"]["proc/driver/nvidia/params"] = make_hosts().nvidia_params(0, "")


def old_driver(desc: dict) -> None:
    desc["files"]["proc/driver/nvidia/version"] = make_hosts().driver_version("570.86.10")


def gke_libibverbs(desc: dict) -> None:
    """Seed 002: rdmav57 libibverbs under /usr/local/nvidia/lib64 beside the system's rdmav34."""
    desc["files"].update({
        "usr/local/nvidia/lib64/libibverbs.so.1.14.56.0": "",
        "usr/local/nvidia/lib64/libibverbs/libmlx5-rdmav57.so": "",
        "usr/local/nvidia/lib64/libmlx5.so.1.25.56.0": "",
    })
    desc.setdefault("symlinks", {})["usr/local/nvidia/lib64/libibverbs.so.1"] = "libibverbs.so.1.14.56.0"


def gib_plugin(desc: dict) -> None:
    desc["files"]["usr/local/gib/lib64/libnccl-net.so"] = ""
    desc["files"]["usr/local/gib/configs/tuner_config_a4.txtpb"] = "# tuner\n"


def seed000_shadow_copy(desc: dict, with_pr466: bool = False) -> None:
    """Seed 000 §4 problem 1: an unpatched deep_ep copied to /opt/deepep/python (on PYTHONPATH)."""
    desc["files"]["opt/deepep/python/deep_ep/__init__.py"] = "from .buffer import Buffer\n"
    desc["files"]["opt/deepep/python/deep_ep/buffer.py"] = buffer_py(with_pr466)
    desc["files"]["opt/deepep/nvshmem/lib/libnvshmem_host.so.3"] = ""


def ofed_2410(desc: dict) -> None:
    """DeepEP #628: MLNX_OFED 24.10, whose libmlx5 (ABI 1.24) lacks the MLX5_1.25 dmabuf symbols NCCL Gin needs."""
    mh = make_hosts()
    desc["files"]["var/lib/dpkg/status"] = mh.dpkg_status({"mlnx-ofed-kernel-dkms": "24.10.OFED.24.10.0.7.0.1-1",
                                                           "rdma-core": "2410mlnx54-1.2410068"})
    desc["files"]["sys/module/mlx5_core/version"] = "24.10-0.7.0"
    desc["files"]["usr/lib/x86_64-linux-gnu/libmlx5.so.1.24.54.0"] = ""
    desc.setdefault("symlinks", {})["usr/lib/x86_64-linux-gnu/libmlx5.so.1"] = "libmlx5.so.1.24.54.0"


def ofed_2510_libmlx5(desc: dict) -> None:
    """The fix: OFED 25.x, libmlx5 ABI 1.25 (MLX5_1.25 exported)."""
    desc["files"]["usr/lib/x86_64-linux-gnu/libmlx5.so.1.25.58.0"] = ""
    desc.setdefault("symlinks", {})["usr/lib/x86_64-linux-gnu/libmlx5.so.1"] = "libmlx5.so.1.25.58.0"


def cx8_gpu_fabric_rails(desc: dict, bad_from: int = 4) -> None:
    """NVIDIA/nvshmem #33, InferenceX PR #2525: B300 ConnectX-8 NICs (MT4131); NICs ``bad_from``.. are
    GPU-fabric rails with link-local GIDs only (no RoCE v2 IPv4 GID): "Unable to create ah"."""
    mh = make_hosts()
    k = 0
    for cplx in desc["pci"]:
        for node in _walk(cplx.get("devices", [])):
            rdma = node.get("rdma")
            if not rdma:
                continue
            node["device"] = "0x1023"
            rdma["attrs"]["hca_type"] = "MT4131"
            if k >= bad_from:
                nd = rdma.get("netdev")
                for p in rdma["ports"]:
                    p["gids"] = [[mh.linklocal_gid(k), mh.ROCE_V1, nd], [mh.linklocal_gid(k), mh.ROCE_V2, nd]]
            k += 1


def headerless_nvshmem(desc: dict, root: str = "opt/venv/lib/python3.12/site-packages/flashinfer/data/nvshmem") -> None:
    """srt-slurm PR #242: FlashInfer's bundled NVSHMEM: the library, no include/nvshmem.h."""
    desc["files"][f"{root}/lib/libnvshmem_host.so.3"] = ""
    desc["files"][f"{root}/lib/nvshmem_bootstrap_uid.so.3"] = ""


def with_counters(desc: dict) -> None:
    """Non-zero starting counters, so a 'bump' is visible as a delta."""
    for cplx in desc["pci"]:
        for node in _walk(cplx.get("devices", [])):
            rdma = node.get("rdma")
            if rdma:
                for p in rdma["ports"]:
                    p["counters"] = {"port_xmit_data": 1000, "port_rcv_data": 1000}


def _walk(nodes: list) -> Iterable[dict]:
    for n in nodes:
        yield n
        yield from _walk(n.get("children", []))


def host_desc(base: str, *faults: Callable[[dict], None], **kw: Any) -> dict:
    """A platform fixture host (make_hosts.HOSTS name, or a builder with kwargs) plus faults."""
    mh = make_hosts()
    if kw:
        builders = {"gcp-b200": mh.gcp_b200, "gke-a4": mh.gke_a4, "h20-roce": mh.h20_roce}
        desc = builders[base](**kw)
    else:
        desc = copy.deepcopy(mh.HOSTS[base]())
    for f in faults:
        f(desc)
    return desc


def build_host(dest: Path, base: str, *faults: Callable[[dict], None], **kw: Any) -> Path:
    return build_host_tree(host_desc(base, *faults, **kw), dest)


def h200_capture_tree(dest: Path, capture: Path) -> Path:
    """The real 8x H200 capture, turned into a proper tree by the platform helper's converter."""
    return build_host_tree(make_hosts().from_capture(capture), dest)


# -- ELF --------------------------------------------------------------------------------------------
def make_elf(needed: Sequence[str] = (), runpath: Sequence[str] = (), rpath: Sequence[str] = (),
             soname: Optional[str] = None, payload: bytes = b"") -> bytes:
    """A minimal but valid ELF64 little-endian shared object: header, PT_LOAD + PT_DYNAMIC, a
    dynamic string table and a dynamic section. Enough for readelf -d and ld.so's parser."""
    strtab = b"\0"
    offs = {}

    def add(s: str) -> int:
        nonlocal strtab
        if s not in offs:
            offs[s] = len(strtab)
            strtab += s.encode() + b"\0"
        return offs[s]

    dyn = [(1, add(n)) for n in needed]
    if soname:
        dyn.append((14, add(soname)))
    if rpath:
        dyn.append((15, add(":".join(rpath))))
    if runpath:
        dyn.append((29, add(":".join(runpath))))
    ehsize, phentsize, phnum = 64, 56, 2
    str_off = ehsize + phentsize * phnum
    dyn_off = (str_off + len(strtab) + 7) & ~7
    dyn.append((5, str_off))  # DT_STRTAB (vaddr == offset: one PT_LOAD at 0)
    dyn.append((10, len(strtab)))  # DT_STRSZ
    dyn.append((0, 0))
    dynbytes = b"".join(struct.pack("<qQ", t, v) for t, v in dyn)
    total = dyn_off + len(dynbytes) + len(payload)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    header = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, ehsize, 0, 0, ehsize, phentsize, phnum, 64, 0, 0)
    ph_load = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, total, total, 0x1000)
    ph_dyn = struct.pack("<IIQQQQQQ", 2, 6, dyn_off, dyn_off, dyn_off, len(dynbytes), len(dynbytes), 8)
    body = header + ph_load + ph_dyn + strtab
    body += b"\0" * (dyn_off - len(body))
    return body + dynbytes + payload


# -- an installed env -------------------------------------------------------------------------------
def buffer_py(with_pr466: bool = True) -> str:
    lines = [
        "import os",
        "",
        "",
        "class Buffer:",
        "    def __init__(self, group, num_nvl_bytes=0, num_rdma_bytes=0):",
        "        os.environ['NVSHMEM_DISABLE_P2P'] = '0'",
    ]
    if with_pr466:
        lines += [
            "        self._setup_device_hca_mapping()",
            "",
            "    def _setup_device_hca_mapping(self):",
            "        mapping = os.environ.get('DEEP_EP_DEVICE_TO_HCA_MAPPING')",
        ]
    return "\n".join(lines) + "\n"


def make_prefix(
    dest: Path,
    env: str = "gcp-b200",
    *,
    platforms: Sequence[str] = ("gcp-b200",),
    python: str = "conda",
    python_version: str = "3.12",
    python_executable: Optional[str] = None,
    pr466: bool = True,
    record: bool = True,
    require: Sequence[str] = ("pr-466",),
    revision: str = PR466_REVISION,
    extension: bool = True,
    nvshmem: bool = True,
    link_nvshmem: bool = True,
    extension_needed: Sequence[str] = (),
    spec_env: Optional[dict] = None,
    marker: bool = True,
) -> Path:
    """A prefix as `deepep-env install` leaves it (the parts doctor reads)."""
    site = dest / "lib" / f"python{python_version}" / "site-packages"
    pkg = site / "deep_ep"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .buffer import Buffer\n")
    (pkg / "buffer.py").write_text(buffer_py(pr466))
    if record:
        (pkg / "_deepep_env_build.json").write_text(json.dumps({
            "format": "deepep-env/deep-ep-build/v1", "revision": revision, "build_string": "h0",
            "torch_cuda_arch_list": "10.0", "disable_aggressive_ptx_instrs": 1, "require": list(require)}))
    if extension:
        needed = list(extension_needed) + (["libnvshmem_host.so.3"] if link_nvshmem else []) + ["libc.so.6"]
        (site / "deep_ep_cpp.cpython-312-x86_64-linux-gnu.so").write_bytes(make_elf(needed, runpath=["$ORIGIN/../.."]))
    if nvshmem:
        (dest / "lib" / "libnvshmem_host.so.3").write_bytes(make_elf(soname="libnvshmem_host.so.3", payload=b"env-built nvshmem 3.5.19"))
    (dest / "bin").mkdir(parents=True, exist_ok=True)
    if marker:
        (dest / "conda-meta").mkdir(parents=True, exist_ok=True)
        py: dict[str, Any] = {"provider": python, "version": python_version}
        py["executable"] = python_executable or (str(dest / "bin" / "python") if python == "conda" else "/usr/bin/python3")
        (dest / "conda-meta" / "deepep-env.json").write_text(json.dumps({
            "format": "deepep-env/prefix/v1", "env": env, "platforms": list(platforms), "python": py,
            "spec_env": dict(spec_env or {})}))
    return dest


def make_torch_venv(dest: Path, python_version: str = "3.12", pip_nvshmem: bool = True,
                    pip_nccl: Optional[str] = None, pip_nvshmem_version: Optional[str] = None) -> Path:
    """A host venv with pip PyTorch and (optionally) pip's nvidia-nvshmem (field notes §3) and
    nvidia-nccl-cu13 of version ``pip_nccl`` (pip torch 2.11 brings 2.28.9)."""
    site = dest / "lib" / f"python{python_version}" / "site-packages"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("")
    if pip_nvshmem:
        lib = site / "nvidia" / "nvshmem" / "lib"
        lib.mkdir(parents=True)
        (lib / "libnvshmem_host.so.3").write_bytes(make_elf(soname="libnvshmem_host.so.3", payload=b"pip nvshmem 3.4.5"))
        if pip_nvshmem_version:  # torch 2.15 pins NVSHMEM 3.7 (vLLM PR #58159)
            (site / f"nvidia_nvshmem_cu13-{pip_nvshmem_version}.dist-info").mkdir()
    if pip_nccl:
        lib = site / "nvidia" / "nccl" / "lib"
        lib.mkdir(parents=True)
        (lib / "libnccl.so.2").write_bytes(make_elf(soname="libnccl.so.2", payload=f"pip nccl {pip_nccl}".encode()))
        (site / f"nvidia_nccl_cu13-{pip_nccl}.dist-info").mkdir()
    (dest / "bin").mkdir(parents=True)
    exe = dest / "bin" / "python3"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    return dest


# -- DeepEP 2.x ---------------------------------------------------------------------------------------
def make_v2_prefix(dest: Path, *, nccl: str = "2.30.7", lib_version: str = "2.30.7", envs_root: Optional[str] = None,
                   link: bool = True, engine: str = "v2", needed=("libnccl.so.2", "libnvshmem_host.so.3"),
                   marker: bool = True, python_executable: Optional[str] = None, env: str = "h200-nvlink-v2",
                   platforms: Sequence[str] = ("nvlink",), spec_env: Optional[dict] = None,
                   nvshmem_version: str = "3.4.5") -> Path:
    """A prefix as the deep-ep-v2 package + our nccl package install it (the parts verify_install and doctor read)."""
    site = dest / "lib" / "python3.12" / "site-packages"
    pkg = site / "deep_ep"
    (pkg / "buffers").mkdir(parents=True)
    (pkg / "include" / "deep_ep" / "common").mkdir(parents=True)
    (pkg / "include" / "deep_ep" / "common" / "comm.cuh").write_text("// jit\n")
    (pkg / "__init__.py").write_text("from .buffers.elastic import ElasticBuffer\n")
    (pkg / "buffers" / "elastic.py").write_text("class ElasticBuffer:\n    pass\n")
    (pkg / "envs.py").write_text("persistent_envs = dict()\n"
                                 f"persistent_envs['EP_NCCL_ROOT_DIR'] = '{envs_root or dest}'\n")
    (pkg / "_C.cpython-312-x86_64-linux-gnu.so").write_bytes(make_elf(list(needed), runpath=["$ORIGIN/../../.."]))
    (pkg / "_deepep_env_build.json").write_text(json.dumps({
        "format": "deepep-env/deep-ep-build/v1", "engine": engine, "revision": V2_REVISION, "build_string": "h4329f5c41c_0",
        "nccl": {"provider": "source", "version": nccl, "torch_preload_link": "nvidia/nccl/lib/libnccl.so.2" if link else ""},
        "nvshmem": {"provider": "pip", "version": nvshmem_version}, "require": ["elastic-buffer"]}))
    lib = dest / "lib"
    (lib / f"libnccl.so.{lib_version}").write_bytes(make_elf(soname="libnccl.so.2", payload=b"env nccl"))
    os.symlink(f"libnccl.so.{lib_version}", lib / "libnccl.so.2")
    os.symlink("libnccl.so.2", lib / "libnccl.so")
    (dest / "include").mkdir()
    (dest / "include" / "nccl.h").write_text(f"#define NCCL_VERSION_CODE {''.join(lib_version.split('.')[:1])}"
                                             f"{int(lib_version.split('.')[1]):02d}{int(lib_version.split('.')[2]):02d}\n")
    (dest / "include" / "nccl_device.h").write_text("// device api\n")
    if link:
        (site / "nvidia" / "nccl" / "lib").mkdir(parents=True)
        os.symlink("../../../../../libnccl.so.2", site / "nvidia" / "nccl" / "lib" / "libnccl.so.2")
    (dest / "bin").mkdir(exist_ok=True)
    if marker:
        (dest / "conda-meta").mkdir(parents=True, exist_ok=True)
        (dest / "conda-meta" / "deepep-env.json").write_text(json.dumps({
            "format": "deepep-env/prefix/v1", "env": env, "platforms": list(platforms),
            "python": {"provider": "host", "version": "3.12", "executable": python_executable or "/usr/bin/python3"},
            "spec_env": dict(spec_env or {})}))
    return dest


def v2_comm_reuse(prefix: Path, guarded: bool = False) -> Path:
    """Give a V2 prefix's deep_ep the shape of 2.1.0's ``utils/comm.py`` (synthetic): with EP_REUSE_NCCL_COMM on
    (default '1', DeepEP #637) PyTorch's ``backend._comm_ptr()`` goes to ElasticBuffer unchecked (DeepEP #726)."""
    reuse = ("        ptr = backend._comm_ptr()\n        if ptr:\n            return NCCLCommHandle(ptr, False)\n" if guarded
             else "        return NCCLCommHandle(backend._comm_ptr(), False)\n")
    utils = next((prefix / "lib").glob("python3*/site-packages/deep_ep")) / "utils"
    utils.mkdir(exist_ok=True)
    (utils / "comm.py").write_text("import os\n\n\ndef get_nccl_comm_handle(group, force_new_comm=False):\n"
                                   "    backend = group._get_backend(None)\n"
                                   "    if not force_new_comm and int(os.getenv('EP_REUSE_NCCL_COMM', '1')):\n" + reuse)
    return prefix


def v2_elastic_ctor(prefix: Path, capture_check: bool = False) -> Path:
    """Give a V2 prefix's ElasticBuffer a constructor that sets up NCCL (as 2.1.0's does, synthetic), with or
    without a test for CUDA-graph capture (sglang PR #39078)."""
    guard = ("        if torch.cuda.is_current_stream_capturing():\n            raise RuntimeError('build before capture')\n"
             if capture_check else "")
    pkg = next((prefix / "lib").glob("python3*/site-packages/deep_ep"))
    (pkg / "buffers" / "elastic.py").write_text("import torch\n\nfrom ..utils.comm import get_nccl_comm_handle\n\n\n"
                                                "class ElasticBuffer:\n    def __init__(self, group):\n" + guard +
                                                "        self.nccl_comm_handle = get_nccl_comm_handle(group)\n")
    return prefix


def nvshmem_with_plugins(prefix: Path, host_strings: Sequence[str] = ("NVSHMEM_INFO", "REMOTE_TRANSPORT", "DISABLE_CUDA_VMM"),
                         plugins: Optional[dict] = None) -> Path:
    """Give ``prefix/lib`` an NVSHMEM whose host library and transport plugins carry variable-name strings
    the way nvidia-nvshmem-cu13 3.5.19's do (read 2026-11-25): names without the ``NVSHMEM_`` prefix, NUL
    terminated; ``IB_GID_INDEX``, ``HCA_PREFIX``, ``IBGDA_NIC_HANDLER`` only in the IB transport plugins
    (``nvshmem_transport_ib*.so.4``), ``REMOTE_TRANSPORT``/``DISABLE_CUDA_VMM`` in ``libnvshmem_host.so.3``
    (sglang #38769's reporter grepped only the latter)."""
    plugins = plugins if plugins is not None else {"nvshmem_transport_ibgda.so.4": ("IB_GID_INDEX", "HCA_PREFIX", "IBGDA_NIC_HANDLER"),
                                                   "nvshmem_transport_ibrc.so.4": ("IB_GID_INDEX", "HCA_PREFIX")}
    lib = prefix / "lib"
    payload = b"\0" + b"".join(n.encode() + b"\0" for n in host_strings)
    (lib / "libnvshmem_host.so.3").write_bytes(make_elf(soname="libnvshmem_host.so.3", payload=payload))
    for name, strings in plugins.items():
        (lib / name).write_bytes(make_elf(soname=name, payload=b"\0" + b"".join(n.encode() + b"\0" for n in strings)))
    return prefix


BUMP_SCRIPT = FIXTURES / "bump_counters.py"


def ids(report) -> set[str]:
    return {f.id for f in report.findings}


def problems(report) -> list[str]:
    """Findings that are not info: what a healthy host must not have."""
    return [f"{f.severity} {f.id}: {f.title}" for f in report.findings if f.severity != "info"]


@pytest.fixture
def clean_env(monkeypatch):
    """The CLI checks this process's environment (unless --env-file): make it a known, near-empty one."""
    for k in list(os.environ):
        if k not in ("PATH", "HOME", "DEEPEP_ENV_STATE", "TMPDIR", "LANG"):
            monkeypatch.delenv(k, raising=False)
    return monkeypatch


def doctor_cli(capsys, *args):
    """`deepep-env doctor ARGS` in-process (cli_runner); never a traceback."""
    res = cli_in_process(capsys, "doctor", *args)
    assert "Traceback" not in res.stdout + res.stderr, res.stderr
    return res
