"""HostFacts: everything `deepep-env detect` learned about one host, as plain frozen data.

Produced by :func:`deepep_env.platform.probes.probe_host`, consumed by the overlay rules, the
platform selector and ``doctor`` checks. Every field says where it was read from (see
``docs/overlay.md``); a fact that could not be read is ``None``/empty and a line in ``warnings``
explains why, so a consumer can tell "absent on this host" from "could not look".

Immutable ``typing.NamedTuple`` records on purpose: ``deepep-env activate`` imports this module
on every new shell; pydantic alone costs ~75 ms there, and each frozen dataclass ~1.5 ms to
define on a 2-core machine against ~0.2 ms for a NamedTuple (the activation benchmark, docs/benchmarks.md).
Records are compared by value, have ``_asdict()``/``_replace()``, and never change after probing.
Mapping-valued fields default to an empty read-only mapping.
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping, NamedTuple, Optional


# What `nvidia-smi topo -m` prints between a GPU and a NIC, nearest first.
LEVELS = ("PIX", "PXB", "PHB", "NODE", "SYS")


EMPTY: Mapping[str, Any] = MappingProxyType({})


def to_jsonable(obj: Any) -> Any:
    """Records → dicts (field order kept), tuples → lists; the JSON form of every fact."""
    fields = getattr(obj, "_fields", None)
    if fields is not None and isinstance(obj, tuple):
        out = {name: to_jsonable(value) for name, value in zip(fields, obj)}
        extra = getattr(obj, "_json_extra", None)
        if extra is not None:
            out.update(extra())
        return out
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    return obj


class Gpu(NamedTuple):
    """An NVIDIA GPU: a PCI function with vendor 0x10de and a display/3D class (0x03xxxx)."""

    bdf: str  # PCI address, lower case, domain included: 0000:1b:00.0
    cuda_index: int  # position in PCI bus order = CUDA's index under CUDA_DEVICE_ORDER=PCI_BUS_ID
    model: Optional[str]  # "NVIDIA B200", from proc/driver/nvidia/gpus/<bdf>/information
    model_source: Optional[str]  # "driver" | "pci-id" (our small table) | None
    device_id: Optional[str]  # "0x2901"
    numa_node: Optional[int]  # None when sysfs says -1 or does not say
    pci_chain: tuple[str, ...]  # root complex first ("pci0000:00"), then bridges, then this bdf
    uuid: Optional[str] = None
    minor: Optional[int] = None  # /dev/nvidia<minor>
    local_cpulist: Optional[str] = None
    link: Mapping[str, str] = EMPTY  # current/max link speed and width


class Gid(NamedTuple):
    """One populated entry of a port's GID table (``ports/<p>/gids/<i>`` and ``gid_attrs``)."""

    index: int  # type: ignore[assignment]  # the field shadows tuple.index (a JSON key; kept)
    gid: str  # as sysfs prints it: 0000:0000:0000:0000:0000:ffff:0a00:0001
    type: Optional[str]  # "IB/RoCE v1" | "RoCE v2" | None (unreadable)
    ndev: Optional[str]  # the netdev the GID belongs to (RoCE), None for IB
    ipv4: Optional[str]  # "10.0.0.1" when the GID is IPv4-mapped (::ffff:a.b.c.d)

    @property
    def is_roce_v2(self) -> bool:
        return self.type is not None and "v2" in self.type.lower()


class Port(NamedTuple):
    number: int
    state: Optional[str]  # "ACTIVE", "DOWN", … (the name part of "4: ACTIVE")
    phys_state: Optional[str]  # "LinkUp", …
    link_layer: Optional[str]  # "Ethernet" (RoCE) | "InfiniBand"
    rate: Optional[str]  # "400 Gb/sec (4X NDR)"
    gids: tuple[Gid, ...] = ()
    counters: Mapping[str, int] = EMPTY  # port_xmit_data, port_rcv_data, …

    @property
    def active(self) -> bool:
        return (self.state or "").upper() == "ACTIVE"

    @property
    def usable(self) -> bool:
        """ACTIVE, or state unreadable (a partial fact is not evidence of a dead port)."""
        return self.state is None or self.active

    @property
    def is_ethernet(self) -> bool:
        return (self.link_layer or "").lower() == "ethernet"

    def _json_extra(self) -> dict[str, Any]:
        return {"active": self.active}


class Nic(NamedTuple):
    """An RDMA device under ``sys/class/infiniband/<hca>`` and the PCI function behind it."""

    hca: str  # mlx5_0, rocep145s0, …
    bdf: Optional[str]  # None for a device with no PCI function (rxe, siw)
    numa_node: Optional[int]
    pci_chain: tuple[str, ...]
    ports: tuple[Port, ...] = ()
    netdevs: tuple[str, ...] = ()
    fw_ver: Optional[str] = None
    node_guid: Optional[str] = None
    hca_type: Optional[str] = None
    board_id: Optional[str] = None

    def active_ports(self) -> tuple[Port, ...]:
        return tuple(p for p in self.ports if p.active)

    def usable_ports(self) -> tuple[Port, ...]:
        """ACTIVE ports first, then ports whose state could not be read."""
        return tuple(p for p in self.ports if p.active) + tuple(p for p in self.ports if p.state is None)


class Driver(NamedTuple):
    """The NVIDIA kernel driver, from ``proc/driver/nvidia/{version,params}``."""

    loaded: bool  # proc/driver/nvidia exists
    version: Optional[str] = None  # "580.126.09"
    flavor: Optional[str] = None  # "open" | "proprietary"
    params: Mapping[str, str] = EMPTY  # every "Key: value" of params
    registry_dwords: Mapping[str, str] = EMPTY  # parsed RegistryDwords
    enable_stream_memops: Optional[int] = None  # EnableStreamMemOPs (IBGDA needs 1, seed 003)
    peer_mapping_override: Optional[int] = None  # RegistryDwords PeerMappingOverride (seed 003)


class Kubernetes(NamedTuple):
    """Markers that say "this is a Kubernetes pod / a GKE node"."""

    in_pod: bool  # service account mounted, or KUBERNETES_SERVICE_HOST set
    gke: bool  # GKE's driver install dir, or its /usr/local/nvidia mount inside a pod
    markers: tuple[str, ...] = ()  # the evidence, one line each


class LibraryCopy(NamedTuple):
    """A copy of libibverbs, libmlx5 or an rdma-core provider in one library directory.

    Two libibverbs with different provider ABIs in one process is seed 002's failure
    (``couldn't load driver 'libmlx5-rdmav57.so'``, ``IBVERBS_PRIVATE_34 not found``).
    """

    dir: str  # host path of the directory: /usr/local/nvidia/lib64
    name: str  # file name: libibverbs.so.1.14.56.0, libmlx5-rdmav57.so
    kind: str  # "libibverbs" | "libmlx5" | "provider"
    version: Optional[str] = None  # from the file name: 1.14.56.0
    rdmav: Optional[int] = None  # provider ABI from "lib<name>-rdmav<N>.so"
    link_target: Optional[str] = None  # when the entry is a symlink


class Ofed(NamedTuple):
    """Mellanox/DOCA OFED version, when a data file says so (see docs/overlay.md)."""

    mlx5_core_version: Optional[str] = None  # sys/module/mlx5_core/version (OFED builds only)
    packages: Mapping[str, str] = EMPTY  # dpkg status: name → version
    doca_ofed: Optional[str] = None  # version of the doca-ofed / doca-host meta package
    sources: tuple[str, ...] = ()


class AffinityEntry(NamedTuple):
    """Which NIC (and port) one GPU should use, and why."""

    cuda_index: int
    gpu: str  # bdf
    hca: Optional[str]
    port: Optional[int]
    level: Optional[str]  # PIX/PXB/PHB/NODE/SYS between the GPU and that NIC
    depth: Optional[int]  # depth of the GPU's and NIC's common PCIe ancestor (0 = none)
    candidates: tuple[str, ...] = ()  # every NIC equally near, in PCI order
    reason: str = ""
    # RDMA devices at least as near as ``hca`` whose names cannot be passed on (not UTF-8, not a device
    # name): ``hca`` is a stand-in, often another GPU's NIC, so no mapping is set from it (issue 39.11)
    unnamed: tuple[str, ...] = ()


class GidChoice(NamedTuple):
    """The NVSHMEM_IB_GID_INDEX the host supports, or why there is none."""

    index: Optional[int]  # type: ignore[assignment]  # shadows tuple.index, as in Gid
    status: str  # "ok" | "infiniband" | "none" | "disagree" | "no-ports"
    reason: str
    per_port: tuple[dict[str, Any], ...] = ()  # {hca, port, qualifying: [indices]}


class HostFacts(NamedTuple):
    root: str
    gpus: tuple[Gpu, ...]
    nics: tuple[Nic, ...]
    driver: Driver
    modules: tuple[str, ...]  # names from proc/modules
    dmi: dict[str, str]  # sys_vendor, product_name, board_vendor, board_name (those readable)
    kernel: Optional[str]  # proc/sys/kernel/osrelease
    os_release: dict[str, str]  # ID, VERSION_ID, PRETTY_NAME from etc/os-release
    kubernetes: Kubernetes
    libraries: tuple[LibraryCopy, ...]
    ofed: Ofed
    affinity: tuple[AffinityEntry, ...]
    gid: GidChoice
    topology: dict[str, dict[str, str]]  # gpu bdf → {hca: level}
    paths: dict[str, bool]  # host paths the rules ask about (e.g. /usr/local/gib) → exists
    # Things read but worth saying (a port DOWN, an RDMA device with no PCI function).
    findings: tuple[str, ...] = ()
    # Things that could NOT be read (missing/unreadable paths): the facts are partial.
    warnings: tuple[str, ...] = ()

    @property
    def partial(self) -> bool:
        return bool(self.warnings)

    def module_loaded(self, name: str) -> bool:
        return name in self.modules

    def nic(self, hca: str) -> Optional[Nic]:
        for n in self.nics:
            if n.hca == hca:
                return n
        return None

    def usable_nics(self) -> tuple[Nic, ...]:
        """NICs with a PCI function and a port that is ACTIVE (or whose state is unreadable)."""
        return tuple(n for n in self.nics if n.bdf and n.usable_ports())

    def to_dict(self) -> dict[str, Any]:
        d = to_jsonable(self)
        d["partial"] = self.partial
        return d
