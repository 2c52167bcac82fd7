"""GPU↔NIC nearness, the GPU→HCA mapping and the GID index — from topology, never from names.

Nearness of a GPU and a NIC is the depth of their common ancestor in the PCIe tree
(``sys/devices/pci<root>/<bridge>/…/<bdf>``): deeper is nearer. It is what ``nvidia-smi topo -m``
prints as PIX/PXB/PHB/NODE/SYS (field notes §1; seed 000 §5: on GCP A4 GPU0-1 share a switch
with mlx5_0-1). NIC names say nothing: B200/B300 nodes elsewhere number them ``mlx5_4..11``,
GCP without DOCA-OFED names them ``rocep*``, and hosts that scramble them exist.
"""
from __future__ import annotations

from typing import Iterable, Optional, Sequence

from deepep_env.platform.facts import LEVELS, AffinityEntry, GidChoice, Gpu, Nic, Port


def _pci_key(bdf: str) -> tuple[int, ...]:
    try:
        dom, bus, devfn = bdf.split(":")
        dev, fn = devfn.split(".")
        return (int(dom, 16), int(bus, 16), int(dev, 16), int(fn, 16))
    except ValueError:
        return (1 << 32,)


def common_depth(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the common prefix of two PCIe chains (0: different root complexes)."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def same_numa(a: Optional[int], b: Optional[int]) -> bool:
    # Unknown on both sides (a VM that reports -1 everywhere) counts as one node: there is
    # nothing to tell them apart, and the tie is then broken by PCI order like any other.
    return a == b


def link_level(gpu_chain: Sequence[str], nic_chain: Sequence[str], gpu_numa: Optional[int], nic_numa: Optional[int]) -> str:
    """``nvidia-smi topo -m``'s name for the path between two PCI functions.

    PIX: through at most one PCIe switch (the common ancestor is a bridge and each side hangs at
    most one bridge below it); PXB: through several bridges, not the host bridge; PHB: through
    the host bridge of one root complex; NODE: across root complexes of one NUMA node; SYS:
    across NUMA nodes.
    """
    depth = common_depth(gpu_chain, nic_chain)
    if depth == 0:
        return "NODE" if same_numa(gpu_numa, nic_numa) else "SYS"
    if depth == 1:
        return "PHB"
    below_gpu = len(gpu_chain) - 1 - depth
    below_nic = len(nic_chain) - 1 - depth
    return "PIX" if max(below_gpu, below_nic) <= 1 else "PXB"


def nearness(gpu: Gpu, nic: Nic) -> tuple[int, int, bool]:
    """Sort key, larger is nearer: (common depth, level, same NUMA node).

    Depth first: a NIC under the GPU's own leaf switch beats one under the shared root switch.
    Then the level, because two NICs can share the same deepest common ancestor with the GPU and
    still differ: one on a downstream port of the GPU's switch (PIX), the other one switch further
    down (PXB) — ``nvidia-smi topo -m`` ranks them apart and so must the mapping.
    """
    level = link_level(gpu.pci_chain, nic.pci_chain, gpu.numa_node, nic.numa_node)
    return (common_depth(gpu.pci_chain, nic.pci_chain), -LEVELS.index(level), same_numa(gpu.numa_node, nic.numa_node))


def choose_port(nic: Nic) -> Optional[Port]:
    """The port a GPU should use on this NIC: the lowest-numbered ACTIVE one (else one whose
    state could not be read — a partial fact, already in the warnings — rather than none)."""
    usable = nic.usable_ports()
    return usable[0] if usable else None


def gpu_nic_affinity(
    gpus: Sequence[Gpu], nics: Sequence[Nic]
) -> tuple[tuple[AffinityEntry, ...], dict[str, dict[str, str]], list[str]]:
    """Map each GPU to its nearest usable NIC.

    Rule (issue 3): each GPU gets the nearest NIC; when several are equally near, GPUs and NICs
    are paired in PCI address order, each NIC used once before any is reused. Implemented as a
    greedy pass over GPUs — nearest-placed first, then PCI order — that picks, among the GPU's
    nearest candidates, the least-used NIC, ties in PCI order: on GCP A4 this gives GPU0→NIC0,
    GPU1→NIC1 under each switch.

    A NIC with no ACTIVE port, or with no PCI function, cannot carry traffic and is left out
    (a warning says so); the GPU then gets the next nearest.

    Returns (entries in CUDA order, {gpu bdf: {hca: level}}, warnings).
    """
    warnings: list[str] = []
    matrix: dict[str, dict[str, str]] = {}
    pci_nics = [n for n in nics if n.bdf]
    for g in gpus:
        matrix[g.bdf] = {
            n.hca: link_level(g.pci_chain, n.pci_chain, g.numa_node, n.numa_node) for n in pci_nics
        }
    usable = []
    for n in sorted(pci_nics, key=lambda n: _pci_key(n.bdf or "")):
        if choose_port(n) is None:
            states = ", ".join(f"port {p.number} {p.state or 'unknown'}" for p in n.ports) or "no ports"
            warnings.append(f"{n.hca}: no ACTIVE port ({states}); not used in the GPU→HCA mapping")
        else:
            usable.append(n)
    if not gpus or not usable:
        return (), matrix, warnings

    # Nearest first: GPUs whose best NIC is nearest (PIX before PXB … before SYS) choose first, in
    # PCI order within a level. A GPU with no NIC near it (another NUMA node, a switch without
    # NICs) is happy with any of its equally-far candidates, so it must not take the NIC that the
    # GPUs sharing a switch with it would pair with in PCI order; it takes what is least used after.
    uses = {n.hca: 0 for n in usable}
    plans = []
    for g in gpus:
        keyed = [(nearness(g, n), n) for n in usable]
        best = max(k for k, _ in keyed)
        candidates = [n for k, n in keyed if k == best]  # already in PCI order
        plans.append((-best[1], _pci_key(g.bdf), g.cuda_index, g, best, candidates))
    chosen: dict[int, AffinityEntry] = {}
    for _, _, _, g, best, candidates in sorted(plans, key=lambda t: t[:3]):
        least = min(uses[n.hca] for n in candidates)
        pick = next(n for n in candidates if uses[n.hca] == least)
        uses[pick.hca] += 1
        port = choose_port(pick)
        level = matrix[g.bdf][pick.hca]
        if len(candidates) == 1:
            reason = f"nearest NIC ({level}, common PCIe ancestor depth {best[0]})"
        else:
            reason = (
                f"{len(candidates)} NICs equally near ({level}, depth {best[0]}); paired in PCI order, "
                f"least-used first"
            )
        chosen[g.cuda_index] = AffinityEntry(
            cuda_index=g.cuda_index,
            gpu=g.bdf,
            hca=pick.hca,
            port=port.number if port else None,
            level=level,
            depth=best[0],
            candidates=tuple(n.hca for n in candidates),
            reason=reason,
        )
    entries = [chosen[i] for i in sorted(chosen)]
    return tuple(entries), matrix, warnings


def without_unnamed(gpus: Sequence[Gpu], affinity: Sequence[AffinityEntry], nics: Sequence[Nic],
                    unnamed: Sequence[Nic]) -> tuple[tuple[AffinityEntry, ...], list[str]]:
    """An RDMA device whose name cannot be passed on (not UTF-8, not a device name) is left out of
    the mapping, and that is said: one note per device naming it and what each GPU that could have
    used it (as near as its mapped NIC, or nearer) uses instead, and the same in those GPUs' reasons."""
    by_hca = {n.hca: n for n in nics}
    entries = {e.cuda_index: e for e in affinity}
    notes = []
    for u in unnamed:
        instead = []
        for g in gpus:
            e = entries.get(g.cuda_index)
            mapped = by_hca.get(e.hca) if e is not None and e.hca else None
            if u.bdf is None or not u.usable_ports() or (mapped is not None and nearness(g, u) < nearness(g, mapped)):
                continue
            level = link_level(g.pci_chain, u.pci_chain, g.numa_node, u.numa_node)
            if e is not None:
                entries[g.cuda_index] = e._replace(reason=f"{e.reason}; NIC {u.hca} ({level}) cannot be named, "
                                                          f"so {e.hca} is used instead", unnamed=(*e.unnamed, u.hca))
            instead.append(f"GPU{g.cuda_index} uses {e.hca if e is not None else 'no NIC'} instead of it ({level})")
        what = "; ".join(instead) if instead else "no GPU is as near to it as to its mapped NIC"
        notes.append(f"sys/class/infiniband: device {u.hca} ({u.bdf or 'no PCI function'}) has a name that is not "
                     f"UTF-8 or not a valid RDMA device name, so it cannot be named to NCCL/NVSHMEM; left out of the GPU→NIC "
                     f"mapping: {what}")
    return tuple(entries[i] for i in sorted(entries)), notes


def mapping_string(entries: Iterable[AffinityEntry]) -> str:
    """``DEEP_EP_DEVICE_TO_HCA_MAPPING`` value: ``<cuda index>:<hca>:<port>,…`` (DeepEP PR #466)."""
    return ",".join(f"{e.cuda_index}:{e.hca}:{e.port}" for e in entries if e.hca and e.port is not None)


def qualifying_gids(port: Port) -> list[int]:
    """Indices whose type is RoCE v2 and whose GID is IPv4-mapped (``::ffff:a.b.c.d``)."""
    return [g.index for g in port.gids if g.is_roce_v2 and g.ipv4 is not None]


def gid_index(nics: Sequence[Nic], affinity: Sequence[AffinityEntry]) -> GidChoice:
    """The one GID index every port in use agrees on (seed 000 §5: 3 on GCP — read, not assumed).

    Ports in use are those of the GPU→HCA mapping (all ACTIVE ports when there is no mapping).
    InfiniBand ports need no GID index. Among RoCE ports the index must be RoCE v2 + IPv4-mapped
    on *every* port; if no index qualifies on some port, or the ports have no index in common,
    the answer is "none"/"disagree" with the per-port table — never a guess.
    """
    by_name = {n.hca: n for n in nics}
    ports: list[tuple[str, Port]] = []
    seen = set()
    for e in affinity:
        if e.hca is None or e.port is None or (e.hca, e.port) in seen:
            continue
        seen.add((e.hca, e.port))
        nic = by_name.get(e.hca)
        port = next((p for p in nic.ports if p.number == e.port), None) if nic else None
        if port is not None:
            ports.append((e.hca, port))
    if not ports:
        ports = [(n.hca, p) for n in nics if n.bdf for p in n.usable_ports()]
    if not ports:
        return GidChoice(index=None, status="no-ports", reason="no ACTIVE RDMA port: no GID index to set")

    roce = [(h, p) for h, p in ports if not ((p.link_layer or "").lower() == "infiniband")]
    if not roce:
        return GidChoice(
            index=None,
            status="infiniband",
            reason="InfiniBand link layer on every port in use: addressing by LID, no GID index is set",
        )
    per_port = []
    sets = []
    for hca, p in roce:
        q = qualifying_gids(p)
        per_port.append({"hca": hca, "port": p.number, "qualifying": q})
        sets.append(set(q))
    missing = [f"{d['hca']}:{d['port']}" for d in per_port if not d["qualifying"]]
    if missing:
        return GidChoice(
            index=None,
            status="none",
            reason="no RoCE v2 IPv4-mapped GID on " + ", ".join(missing) + "; NVSHMEM_IB_GID_INDEX not set",
            per_port=tuple(per_port),
        )
    common = set.intersection(*sets)
    if not common:
        table = ", ".join(f"{d['hca']}:{d['port']}→{d['qualifying']}" for d in per_port)
        return GidChoice(
            index=None,
            status="disagree",
            reason=f"ports disagree on the RoCE v2 IPv4 GID index ({table}); NVSHMEM_IB_GID_INDEX not set",
            per_port=tuple(per_port),
        )
    idx = min(common)
    extra = ""
    if len(common) > 1:
        extra = f"; indices {sorted(common)} all qualify on every port, the lowest is taken (as NCCL does)"
    return GidChoice(
        index=idx,
        status="ok",
        reason=f"GID {idx} is RoCE v2 + IPv4-mapped on all {len(per_port)} port(s) in use{extra}",
        per_port=tuple(per_port),
    )
