"""The probing pass the host probes share (:mod:`deepep_env.platform.probes`,
:mod:`~deepep_env.platform.probes_gpu`, :mod:`~deepep_env.platform.probes_rdma`): the root it reads
(:class:`~deepep_env.platform.rootfs.RootFS`), the warnings and findings it collects, and PCI
addresses and chains (the PCIe path a GPU and a NIC are compared on). Stdlib only.
"""
from __future__ import annotations

import re
from typing import Optional

from deepep_env.platform.facts import Nic
from deepep_env.platform.rootfs import RootFS

BDF_RE = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


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


def int_or_none(text: Optional[str]) -> Optional[int]:
    if text is None:
        return None
    try:
        return int(text.strip(), 0)
    except ValueError:
        return None


def numa_of(text: Optional[str]) -> Optional[int]:
    n = int_or_none(text)
    return None if n is None or n < 0 else n


def one_line(msg: str) -> str:
    """One printable line, whatever a hostile file name contains: no line break, and the bytes of a
    name that is not UTF-8 (surrogates from os.listdir) escaped, so printing it cannot fail."""
    return " ".join(msg.split()).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class Probe:
    """One probing pass: the root, the warnings it collects, the PCI chain cache."""

    def __init__(self, fs: RootFS) -> None:
        self.fs = fs
        self.warnings: list[str] = []
        self.findings: list[str] = []
        self.unnamed: list[Nic] = []   # RDMA devices whose name cannot be passed on (probe_nics)
        self._capture_warned = False

    def warn(self, msg: str) -> None:
        self.warnings.append(one_line(msg))

    def find(self, msg: str) -> None:
        self.findings.append(one_line(msg))

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


