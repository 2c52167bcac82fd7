"""Probes: pure functions from a root directory to :class:`~deepep_env.platform.facts.HostFacts`.

Every read goes through :class:`~deepep_env.platform.rootfs.RootFS`, so ``--root DIR`` sees DIR
exactly as Linux would see ``/`` (relative sysfs symlinks followed inside DIR, never out of it).
Nothing here runs a program or loads NVML: the sysfs path must work alone (issue 3), on a live
host as on a captured one.

A path that is missing or unreadable never raises: the fact is left empty and a line goes to
``warnings`` ("partial facts"). Only a root that is not a host tree at all (neither ``sys/`` nor
``proc/``) is a :class:`~deepep_env.base.errors.UserError`.
"""
from __future__ import annotations

import os
import re
from typing import Mapping, Optional

from deepep_env.base.errors import UserError
from deepep_env.platform.topology import gid_index, gpu_nic_affinity, without_unnamed
from deepep_env.platform.facts import (
    Driver,
    Gid,
    Gpu,
    HostFacts,
    Kubernetes,
    Nic,
    Ofed,
    Port,
)
from deepep_env.platform.libraries import LIBRARY_DIRS, library_copies
from deepep_env.platform.gpus import pci_models
from deepep_env.platform.rootfs import RootFS

NVIDIA_VENDOR = "0x10de"
# A RoCE port's GID table has 256 slots, mostly empty; ib_core fills the lowest free slot, so a
# run this long of empty slots means the rest are empty too. Stopping there keeps `activate`
# from reading 2,000 sysfs files on an 8-NIC host.
GID_EMPTY_RUN_STOP = 64
BDF_RE = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


# Host paths the overlay rules ask "does it exist?" about. Recorded in HostFacts.paths so the rules
# stay pure functions of the facts (and `detect --json` shows what they saw).
WATCHED_PATHS = (
    "/usr/local/nvidia",
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
    "/usr/local/gib",
    "/usr/local/gib/lib64",
    "/usr/local/gib/configs/tuner_config_a4.txtpb",
    "/home/kubernetes/bin/nvidia",
    "/var/run/secrets/kubernetes.io/serviceaccount",
    "/opt/amazon/efa/lib",
    "/opt/amazon/ofi-nccl/lib",
)

# dpkg packages whose versions name the OFED/DOCA stack (Debian/Ubuntu hosts; seed 000 uses
# DOCA-OFED 3.2.1 because 3.0.0's DKMS build fails on kernel 6.14).
OFED_PACKAGES = (
    "doca-ofed",
    "doca-host",
    "doca-roce",
    "mlnx-ofed-kernel-dkms",
    "mlnx-ofed-kernel-utils",
    "rdma-core",
    "ibverbs-providers",
    "libibverbs1",
)

def _bdf_key(bdf: str) -> tuple[int, int, int, int]:
    dom, bus, devfn = bdf.split(":")
    dev, fn = devfn.split(".")
    return (int(dom, 16), int(bus, 16), int(dev, 16), int(fn, 16))


def pci_sort_key(bdf: str) -> tuple[int, int, int, int]:
    """PCI bus order (domain, bus, device, function): CUDA's order under PCI_BUS_ID."""
    try:
        return _bdf_key(bdf)
    except ValueError:
        return (1 << 32, 0, 0, 0)


def _int_or_none(text: Optional[str]) -> Optional[int]:
    if text is None:
        return None
    try:
        return int(text.strip(), 0)
    except ValueError:
        return None


def _numa(text: Optional[str]) -> Optional[int]:
    n = _int_or_none(text)
    return None if n is None or n < 0 else n


def _one_line(msg: str) -> str:
    """One printable line, whatever a hostile file name contains: no line break, and the bytes of a
    name that is not UTF-8 (surrogates from os.listdir) escaped, so printing it cannot fail."""
    return " ".join(msg.split()).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class _Probe:
    """One probing pass: the root, the warnings it collects, the PCI chain cache."""

    def __init__(self, fs: RootFS) -> None:
        self.fs = fs
        self.warnings: list[str] = []
        self.findings: list[str] = []
        self.unnamed: list[Nic] = []   # RDMA devices whose name cannot be passed on (probe_nics)
        self._capture_warned = False

    def warn(self, msg: str) -> None:
        self.warnings.append(_one_line(msg))

    def find(self, msg: str) -> None:
        self.findings.append(_one_line(msg))

    # -- PCI -----------------------------------------------------------------------------
    def pci_chain(self, bdf: str) -> tuple[str, ...]:
        """Root complex, bridges, device: the PCIe path ``nvidia-smi topo -m`` reasons about."""
        rel = f"sys/bus/pci/devices/{bdf}"
        real = self.fs.realpath(rel)
        if real is not None and self.fs.is_dir(rel) and not self.fs.is_symlink(rel):
            # A capture that could not keep symlinks (hosts/h200x8-nvlink): the real target is
            # written in `_realpath`. Honour it, but say the tree is not a real sysfs.
            target = self.fs.read_attr(f"{rel}/_realpath")
            if target:
                if not self._capture_warned:
                    self.warn(f"{rel}: a directory, not a symlink; PCIe path read from its _realpath file")
                    self._capture_warned = True
                real = target.lstrip("/")
        return chain_from_path(real or "", bdf)


_PCI_ROOT_RE = re.compile(r"^pci[0-9a-f]{4,}:[0-9a-f]{2}$")


def chain_from_path(real: str, bdf: str) -> tuple[str, ...]:
    """``sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0`` → (pci0000:00, 0000:00:01.0, 0000:01:00.0).

    The root complex need not sit right under ``sys/devices``: Azure's VMBus puts it under
    ``LNXSYSTM:00/…/VMBUS:00/<guid>/pci7870:00`` and Arm SoCs under ``platform/<soc>.pcie/`` —
    the chain starts at the first ``pci<domain>:<bus>`` component, whatever comes before it.
    """
    parts = real.split("/")
    try:
        start = parts.index("devices") + 1
    except ValueError:
        return (bdf,) if bdf else ()
    while start < len(parts) and not (_PCI_ROOT_RE.match(parts[start]) or BDF_RE.match(parts[start])):
        start += 1
    chain = []
    for p in parts[start:]:
        if p.startswith("pci") or BDF_RE.match(p):
            chain.append(p)
        else:
            break  # e.g. .../<bdf>/infiniband/mlx5_0: the PCI path ends at the function
    if not chain or chain[-1] != bdf:
        # sysfs did not put the device where its name says: keep what the tree says, but make sure
        # the device itself ends the chain so two devices never share their last element.
        chain.append(bdf)
    return tuple(chain)


# -- GPUs -------------------------------------------------------------------------------------
def _parse_information(text: str) -> dict[str, str]:
    info: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            info[key.strip()] = value.strip()
    return info


def probe_gpus(p: _Probe) -> tuple[Gpu, ...]:
    fs = p.fs
    bdfs: set[str] = set()
    has_pci = fs.is_dir("sys/bus/pci/devices")
    if not has_pci:
        p.warn("sys/bus/pci/devices: absent; GPUs taken from proc/driver/nvidia/gpus only (no PCIe topology)")
    for bdf in fs.listdir("sys/bus/pci/devices"):
        base = f"sys/bus/pci/devices/{bdf}"
        vendor = fs.read_attr(f"{base}/vendor")
        if vendor is None:
            continue
        if vendor.lower() != NVIDIA_VENDOR:
            continue
        cls_text = fs.read_attr(f"{base}/class")
        cls = _int_or_none(cls_text)
        if cls is None:
            p.warn(f"{base}/class: unreadable; NVIDIA function skipped")
            continue
        if len(cls_text.lower().removeprefix("0x")) <= 4:  # type: ignore[union-attr]
            # The kernel prints 24 bits (0x030200: base class, subclass, prog-if); a hand-made or
            # lspci-derived tree may give the 16-bit class code (0x0302) — read it as such.
            cls <<= 8
        if (cls >> 16) == 0x03:  # display controller: VGA 0x0300, 3D 0x0302 (NVSwitch is 0x0680)
            bdfs.add(bdf.lower())
    driver_gpus = {b.lower() for b in fs.listdir("proc/driver/nvidia/gpus")}
    for b in sorted(driver_gpus - bdfs):
        if has_pci:
            p.warn(f"proc/driver/nvidia/gpus/{b}: the driver lists a GPU sysfs does not show")
        bdfs.add(b)

    gpus = []
    for idx, bdf in enumerate(sorted(bdfs, key=pci_sort_key)):
        base = f"sys/bus/pci/devices/{bdf}"
        info_rel = f"proc/driver/nvidia/gpus/{bdf}/information"
        info: dict[str, str] = {}
        try:
            info = _parse_information(fs.read_text(info_rel))
        except OSError as exc:
            if fs.is_dir("proc/driver/nvidia"):
                p.warn(f"{info_rel}: {exc.strerror or exc}")
        device_id = fs.read_attr(f"{base}/device")
        model = info.get("Model")
        source = "driver" if model else None
        if not model and device_id:
            # The PCI id names the model only when the driver's own `information` file is absent (no
            # driver loaded, or a container without /proc/driver/nvidia): platform/gpus.py holds the ids.
            model = pci_models().get(device_id.lower())
            source = "pci-id" if model else None
        link = {}
        for attr in ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width"):
            v = fs.read_attr(f"{base}/{attr}")
            if v is not None:
                link[attr] = v
        gpus.append(
            Gpu(
                bdf=bdf,
                cuda_index=idx,
                model=model,
                model_source=source,
                device_id=device_id.lower() if device_id else None,
                numa_node=_numa(fs.read_attr(f"{base}/numa_node")),
                pci_chain=p.pci_chain(bdf) if has_pci else (bdf,),
                uuid=info.get("GPU UUID"),
                minor=_int_or_none(info.get("Device Minor")),
                local_cpulist=fs.read_attr(f"{base}/local_cpulist"),
                link=link,
            )
        )
    return tuple(gpus)


# -- RDMA NICs --------------------------------------------------------------------------------
def parse_gid(text: str) -> tuple[Optional[str], Optional[str]]:
    """(normalised gid, ipv4) from sysfs's ``0000:…:ffff:0a00:0001`` (or a compressed ``::ffff:a.b.c.d``).

    Returns (None, None) for the all-zero entry sysfs shows for an unused slot.
    """
    s = text.strip().lower()
    if not s:
        return None, None
    groups = s.split(":")
    if len(groups) == 8 and all(len(g) == 4 for g in groups) and "." not in s:
        try:
            words = [int(g, 16) for g in groups]
        except ValueError:
            return None, None
    else:  # a hand-written or compressed form; rare, so the import cost is paid only here
        import ipaddress

        try:
            packed = ipaddress.IPv6Address(s).packed
        except ValueError:
            return None, None
        words = [int.from_bytes(packed[i : i + 2], "big") for i in range(0, 16, 2)]
        s = ":".join(f"{w:04x}" for w in words)
    if not any(words):
        return None, None
    ipv4 = None
    if words[:5] == [0, 0, 0, 0, 0] and words[5] == 0xFFFF:
        ipv4 = f"{words[6] >> 8}.{words[6] & 255}.{words[7] >> 8}.{words[7] & 255}"
    return s, ipv4


def _state_name(text: Optional[str]) -> Optional[str]:
    # "4: ACTIVE" → "ACTIVE"; "5: LinkUp" → "LinkUp"
    if text is None:
        return None
    return text.split(":", 1)[-1].strip() or None


def probe_port(p: _Probe, hca_dir: str, hca: str, number: int) -> Port:
    fs = p.fs
    base = f"{hca_dir}/ports/{number}"
    gids = []
    empty_run = 0
    for entry in sorted(fs.listdir(f"{base}/gids"), key=lambda e: _int_or_none(e) or 0):
        idx = _int_or_none(entry)
        if idx is None:
            continue
        if empty_run >= GID_EMPTY_RUN_STOP:
            break
        raw = fs.read_attr(f"{base}/gids/{entry}")
        gid, ipv4 = parse_gid(raw) if raw is not None else (None, None)
        if gid is None:
            empty_run += 1
            continue  # unused slot: sysfs refuses to read its type (EINVAL), so do not ask
        empty_run = 0
        gtype = fs.read_attr(f"{base}/gid_attrs/types/{entry}")
        if gtype is None:
            p.warn(f"{base}/gid_attrs/types/{entry}: unreadable ({hca} port {number} GID {idx})")
        ndev = fs.read_attr(f"{base}/gid_attrs/ndevs/{entry}")
        gids.append(Gid(index=idx, gid=gid, type=gtype, ndev=ndev or None, ipv4=ipv4))
    counters = {}
    for c in ("port_xmit_data", "port_rcv_data"):
        v = _int_or_none(fs.read_attr(f"{base}/counters/{c}"))
        if v is not None:
            counters[c] = v
    state = fs.read_attr(f"{base}/state")
    if state is None:
        p.warn(f"{base}/state: unreadable ({hca} port {number})")
    return Port(
        number=number,
        state=_state_name(state),
        phys_state=_state_name(fs.read_attr(f"{base}/phys_state")),
        link_layer=fs.read_attr(f"{base}/link_layer"),
        rate=fs.read_attr(f"{base}/rate"),
        gids=tuple(gids),
        counters=counters,
    )


# What an RDMA device or interface name may be: the kernel's names are letters, digits, '_', '-', '.'.
# Names read from a host are data, and some end up in variables with their own syntax
# (DEEP_EP_DEVICE_TO_HCA_MAPPING is `gpu:hca:port,…`): a name carrying ':' ',' '=' or spaces could
# forge entries, so such a device is reported and left out, never passed on.
DEVICE_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")


def shown_device_name(name: str) -> str:
    """A device name for a message: its repr, with the bytes of a name that is not UTF-8 (os.listdir
    hands those over as surrogates) shown as bytes, e.g. ``b'mlx5_\\xff0'``."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return repr(os.fsencode(name))
    return repr(name)


def probe_nics(p: _Probe) -> tuple[Nic, ...]:
    """The RDMA devices that can be named to NCCL/NVSHMEM. One whose name cannot be (not UTF-8, or
    not a device name) is probed all the same into ``p.unnamed`` (named by :func:`shown_device_name`):
    probe_host says what the mapping did without it."""
    fs = p.fs
    nics: list[Nic] = []
    for hca in fs.listdir("sys/class/infiniband"):
        rel = f"sys/class/infiniband/{hca}"
        named = bool(DEVICE_NAME_RE.match(hca))
        shown = hca if named else shown_device_name(hca)
        hca_dir = fs.realpath(rel)
        if hca_dir is None or not fs.is_dir(hca_dir):
            p.warn(f"sys/class/infiniband/{shown if not named else hca}: not a readable device directory")
            continue
        nic = _probe_nic(p, rel, hca_dir, shown)
        (nics if named else p.unnamed).append(nic)
    return tuple(sorted(nics, key=lambda n: (pci_sort_key(n.bdf) if n.bdf else (1 << 33, 0, 0, 0), n.hca)))


def _probe_nic(p: _Probe, rel: str, hca_dir: str, hca: str) -> Nic:
    fs = p.fs
    dev = fs.realpath(f"{hca_dir}/device")
    bdf = None
    chain: tuple[str, ...] = ()
    numa = None
    netdevs: tuple[str, ...] = ()
    if dev is not None and fs.is_dir(dev):
        name = dev.rsplit("/", 1)[-1].lower()
        if BDF_RE.match(name):
            bdf = name
            chain = chain_from_path(dev, bdf)
            numa = _numa(fs.read_attr(f"{dev}/numa_node"))
        netdevs = tuple(n for n in fs.listdir(f"{dev}/net") if DEVICE_NAME_RE.match(n))
    if bdf is None:
        p.find(f"{rel}/device: no PCI function behind {hca}; left out of the GPU↔NIC mapping")
    ports = []
    for entry in fs.listdir(f"{hca_dir}/ports"):
        num = _int_or_none(entry)
        if num is not None:
            ports.append(probe_port(p, hca_dir, hca, num))
    if not ports:
        p.warn(f"{rel}/ports: no ports readable for {hca}")
    return Nic(
        hca=hca,
        bdf=bdf,
        numa_node=numa,
        pci_chain=chain,
        ports=tuple(sorted(ports, key=lambda x: x.number)),
        netdevs=netdevs,
        fw_ver=fs.read_attr(f"{hca_dir}/fw_ver"),
        node_guid=fs.read_attr(f"{hca_dir}/node_guid"),
        hca_type=fs.read_attr(f"{hca_dir}/hca_type"),
        board_id=fs.read_attr(f"{hca_dir}/board_id"),
    )


# -- driver, modules, system ------------------------------------------------------------------
def parse_registry_dwords(value: str) -> dict[str, str]:
    """``"PeerMappingOverride=1;RmFoo=0x2"`` → {PeerMappingOverride: "1", RmFoo: "0x2"}."""
    out: dict[str, str] = {}
    for item in value.strip().strip('"').split(";"):
        key, sep, val = item.partition("=")
        if sep and key.strip():
            out[key.strip()] = val.strip()
    return out


_VERSION_RE = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+(?:\.\d+)+)")


def probe_driver(p: _Probe, have_gpus: bool) -> Driver:
    fs = p.fs
    if not fs.is_dir("proc/driver/nvidia"):
        if have_gpus:
            p.warn("proc/driver/nvidia: absent (driver not loaded, or not visible here); driver facts unknown")
        return Driver(loaded=False)
    version = flavor = None
    try:
        text = fs.read_text("proc/driver/nvidia/version")
        m = _VERSION_RE.search(text)
        version = m.group(1) if m else None
        flavor = "open" if "Open Kernel Module" in text else "proprietary" if "Kernel Module" in text else None
    except OSError as exc:
        p.warn(f"proc/driver/nvidia/version: {exc.strerror or exc}")
    params: dict[str, str] = {}
    try:
        for line in fs.read_text("proc/driver/nvidia/params").splitlines():
            key, sep, value = line.partition(":")
            if sep:
                params[key.strip()] = value.strip()
    except OSError as exc:
        p.warn(f"proc/driver/nvidia/params: {exc.strerror or exc}")
    dwords = parse_registry_dwords(params.get("RegistryDwords", ""))
    if params and _int_or_none(params.get("EnableStreamMemOPs")) is None:
        # Garbage or a truncated file: say so, rather than reporting a value of None as if read.
        p.warn("proc/driver/nvidia/params: EnableStreamMemOPs is missing or not a number "
               f"(read {str(params.get('EnableStreamMemOPs'))[:40]!r}); driver keys treated as unknown")
    return Driver(
        loaded=True,
        version=version,
        flavor=flavor,
        params=params,
        registry_dwords=dwords,
        enable_stream_memops=_int_or_none(params.get("EnableStreamMemOPs")),
        peer_mapping_override=_int_or_none(dwords.get("PeerMappingOverride")) if params else None,
    )


def probe_modules(p: _Probe) -> tuple[str, ...]:
    try:
        text = p.fs.read_text("proc/modules")
    except OSError as exc:
        p.warn(f"proc/modules: {exc.strerror or exc}; loaded modules unknown")
        return ()
    return tuple(sorted({line.split(None, 1)[0] for line in text.splitlines() if line.strip()}))


def probe_dmi(p: _Probe) -> dict[str, str]:
    out = {}
    for key in ("sys_vendor", "product_name", "board_vendor", "board_name", "product_version"):
        v = p.fs.read_attr(f"sys/class/dmi/id/{key}")
        if v:
            out[key] = v
    if not out and p.fs.is_dir("sys"):
        p.warn("sys/class/dmi/id: absent or unreadable (a VM without DMI?); vendor unknown")
    return out


def probe_os_release(p: _Probe) -> dict[str, str]:
    out: dict[str, str] = {}
    text = None
    for rel in ("etc/os-release", "usr/lib/os-release"):
        try:
            text = p.fs.read_text(rel)
            break
        except OSError:
            continue
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key in ("ID", "VERSION_ID", "PRETTY_NAME", "ID_LIKE"):
            out[key] = value.strip().strip('"')
    return out


def probe_kubernetes(p: _Probe, environ: Mapping[str, str]) -> Kubernetes:
    fs = p.fs
    markers = []
    in_pod = False
    gke = False
    if fs.is_dir("var/run/secrets/kubernetes.io/serviceaccount") or fs.is_dir("run/secrets/kubernetes.io/serviceaccount"):
        markers.append("service account mounted at /var/run/secrets/kubernetes.io/serviceaccount")
        in_pod = True
    if environ.get("KUBERNETES_SERVICE_HOST"):
        markers.append("KUBERNETES_SERVICE_HOST is set")
        in_pod = True
    if fs.is_dir("home/kubernetes/bin/nvidia"):
        markers.append("GKE driver install dir /home/kubernetes/bin/nvidia (node view)")
        gke = True
    if fs.is_dir("usr/local/nvidia/lib64"):
        # GKE mounts the node's /home/kubernetes/bin/nvidia here in GPU pods (seed 002). NVIDIA's
        # container images create the directory too, so alone it is not GKE: only inside a pod.
        markers.append("/usr/local/nvidia/lib64 present (GKE's GPU driver mount in a pod)")
        gke = gke or in_pod
    return Kubernetes(in_pod=in_pod, gke=gke, markers=tuple(markers))


def probe_libraries(p: _Probe) -> tuple:
    """libibverbs/libmlx5 copies and mlx5 providers in LIBRARY_DIRS (name rules: platform/libraries.py)."""
    fs = p.fs
    out = []
    for d in LIBRARY_DIRS:
        rel = d.lstrip("/")
        if fs.is_dir(rel):
            out += library_copies(d, fs.listdir(rel), lambda name: _link_target(fs, rel, name), fs.listdir(f"{rel}/libibverbs"))
    return tuple(out)


def _link_target(fs: RootFS, rel: str, name: str) -> Optional[str]:
    if not fs.is_symlink(f"{rel}/{name}"):
        return None
    try:
        return os.readlink(fs.local_path(rel) + "/" + name)  # type: ignore[operator]
    except OSError:
        return None


def probe_ofed(p: _Probe) -> Ofed:
    """OFED/DOCA version from data files only: ``ofed_info`` is a program, not data.

    1. ``sys/module/mlx5_core/version``: MLNX-/DOCA-OFED's mlx5_core sets MODULE_VERSION; the
       inbox driver does not, so its presence alone says "OFED driver loaded".
    2. ``var/lib/dpkg/status``: the versions of the doca-ofed / mlnx-ofed-kernel packages
       (Debian/Ubuntu; RPM's database is binary and is not read).
    """
    fs = p.fs
    sources = []
    core = fs.read_attr("sys/module/mlx5_core/version")
    if core:
        sources.append("sys/module/mlx5_core/version")
    packages: dict[str, str] = {}
    try:
        status = fs.read_text("var/lib/dpkg/status")
    except OSError:
        status = ""
    if status:
        text = "\n" + status
        for pkg in OFED_PACKAGES:
            at = text.find(f"\nPackage: {pkg}\n")
            if at == -1:
                continue
            end = text.find("\n\n", at + 1)
            stanza = text[at : end if end != -1 else len(text)]
            if "Status: install ok installed" not in stanza:
                continue
            m = re.search(r"^Version: (\S+)", stanza, re.M)
            if m:
                packages[pkg] = m.group(1)
        if packages:
            sources.append("var/lib/dpkg/status")
    doca = packages.get("doca-ofed") or packages.get("doca-host") or packages.get("doca-roce")
    return Ofed(mlx5_core_version=core, packages=packages, doca_ofed=doca, sources=tuple(sources))


def probe_paths(p: _Probe) -> dict[str, bool]:
    return {path: p.fs.exists(path.lstrip("/")) for path in WATCHED_PATHS}


# -- the whole host ---------------------------------------------------------------------------
def check_root(root: str | os.PathLike[str]) -> RootFS:
    """A RootFS for ``root``, or UserError (exit 2) when it is not a host tree at all."""
    path = os.fspath(root)
    if not os.path.isdir(path):
        raise UserError("not a directory", field="--root", file=path,
                        accepted="a host root such as / or a captured tree with sys/ and proc/, "
                        "or a bundled capture: --demo-host gcp-b200-demo or h200x8-nvlink")
    fs = RootFS(path)
    if not (fs.is_dir("sys") or fs.is_dir("proc")):
        raise UserError(
            "not a host tree: neither sys/ nor proc/ under it",
            file=path,
            field="--root",
            accepted="/ or a captured host tree with sys/ and proc/",
        )
    return fs


def probe_host(root: str | os.PathLike[str] = "/", environ: Optional[Mapping[str, str]] = None) -> HostFacts:
    """Read every fact under ``root``. ``environ`` feeds the Kubernetes markers; by default the
    process environment when ``root`` is ``/`` and nothing otherwise (a captured tree's env is
    not ours)."""
    fs = check_root(root)
    if environ is None:
        environ = os.environ if fs.live else {}
    p = _Probe(fs)
    if not fs.is_dir("sys"):
        p.warn("sys/: absent; no PCI, RDMA or DMI facts")
    if not fs.is_dir("proc"):
        p.warn("proc/: absent; no driver, module or kernel facts")
    gpus = probe_gpus(p)
    nics = probe_nics(p)
    driver = probe_driver(p, bool(gpus))
    modules = probe_modules(p)
    kernel = fs.read_attr("proc/sys/kernel/osrelease")
    if kernel is None and fs.is_dir("proc"):
        p.warn("proc/sys/kernel/osrelease: unreadable; kernel release unknown")
    affinity, matrix, aff_warnings = gpu_nic_affinity(gpus, nics)
    for w in aff_warnings:
        p.find(w)
    affinity, notes = without_unnamed(gpus, affinity, nics, p.unnamed)
    for w in notes:
        p.warn(w)
    gid = gid_index(nics, affinity)
    return HostFacts(
        root=fs.root,
        gpus=gpus,
        nics=nics,
        driver=driver,
        modules=modules,
        dmi=probe_dmi(p),
        kernel=kernel,
        os_release=probe_os_release(p),
        kubernetes=probe_kubernetes(p, environ),
        libraries=probe_libraries(p),
        ofed=probe_ofed(p),
        affinity=affinity,
        gid=gid,
        topology=matrix,
        paths=probe_paths(p),
        findings=tuple(p.findings),
        warnings=tuple(p.warnings),
    )


__all__ = [
    "probe_host",
    "check_root",
    "parse_gid",
    "parse_registry_dwords",
    "pci_sort_key",
    "chain_from_path",
    "WATCHED_PATHS",
]
