"""RDMA probes: the HCAs under ``sys/class/infiniband`` (ports, GID tables, netdevs, PCI chain) and
the OFED/DOCA stack's version from data files. Pure functions of a
:class:`~deepep_env.platform.probing.Probe`.
"""
from __future__ import annotations

import os
import re
from typing import Optional

from deepep_env.platform.facts import Gid, Nic, Ofed, Port
from deepep_env.platform.probing import BDF_RE, Probe, chain_from_path, int_or_none, numa_of, pci_sort_key

# A RoCE port's GID table has 256 slots, mostly empty; ib_core fills the lowest free slot, so a
# run this long of empty slots means the rest are empty too. Stopping there keeps `activate`
# from reading 2,000 sysfs files on an 8-NIC host.
GID_EMPTY_RUN_STOP = 64

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


def probe_port(p: Probe, hca_dir: str, hca: str, number: int) -> Port:
    fs = p.fs
    base = f"{hca_dir}/ports/{number}"
    gids = []
    empty_run = 0
    for entry in sorted(fs.listdir(f"{base}/gids"), key=lambda e: int_or_none(e) or 0):
        idx = int_or_none(entry)
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
        v = int_or_none(fs.read_attr(f"{base}/counters/{c}"))
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


def probe_nics(p: Probe) -> tuple[Nic, ...]:
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


def _probe_nic(p: Probe, rel: str, hca_dir: str, hca: str) -> Nic:
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
            numa = numa_of(fs.read_attr(f"{dev}/numa_node"))
        netdevs = tuple(n for n in fs.listdir(f"{dev}/net") if DEVICE_NAME_RE.match(n))
    if bdf is None:
        p.find(f"{rel}/device: no PCI function behind {hca}; left out of the GPU↔NIC mapping")
    ports = []
    for entry in fs.listdir(f"{hca_dir}/ports"):
        num = int_or_none(entry)
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



def probe_ofed(p: Probe) -> Ofed:
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


