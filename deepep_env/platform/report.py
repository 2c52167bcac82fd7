"""Human-readable rendering of a Detection (`deepep-env detect` without --json)."""
from __future__ import annotations

from deepep_env.platform import Detection


def _known(v: object) -> str:
    """A driver key as read, or 'unknown' (absent, unreadable or not a number): never 'None'."""
    return "unknown" if v is None else str(v)


def _one_line(text: object) -> str:
    return " ".join("".join(ch if ch.isprintable() else " " for ch in str(text)).split())


def format_detection(det: Detection) -> str:
    f = det.facts
    p = det.platform
    out = [f"platform: {p.name} ({p.source}; {p.profile.status}) — {p.profile.description}"]
    out += [f"  evidence: {_one_line(e)}" for e in p.evidence]
    out.append(f"root: {f.root}")
    out.append(f"GPUs ({len(f.gpus)}):")
    for g in f.gpus:
        numa = "?" if g.numa_node is None else g.numa_node
        out.append(f"  {g.cuda_index}  {g.bdf}  {_one_line(g.model or 'unknown model')}  numa {numa}")
    out.append(f"RDMA NICs ({len(f.nics)}):")
    for n in f.nics:
        ports = ", ".join(
            f"port {pt.number} {pt.state or '?'} {pt.link_layer or '?'} {pt.rate or ''}".strip() for pt in n.ports
        ) or "no ports"
        numa = "?" if n.numa_node is None else n.numa_node
        out.append(f"  {_one_line(n.hca)}  {n.bdf or 'no PCI function'}  numa {numa}  {_one_line(ports)}")
    if f.affinity:
        out.append("GPU → NIC (PCIe topology):")
        for e in f.affinity:
            out.append(f"  GPU{e.cuda_index} {e.gpu} → {_one_line(e.hca)}:{e.port}  {e.level}  ({e.reason})")
    out.append(f"GID index: {f.gid.index if f.gid.index is not None else '-'} ({f.gid.status}: {_one_line(f.gid.reason)})")
    d = f.driver
    if d.loaded:
        out.append(
            f"driver: {d.version or '?'} ({d.flavor or '?'}); EnableStreamMemOPs={_known(d.enable_stream_memops)} "
            f"PeerMappingOverride={_known(d.peer_mapping_override)}"
        )
    else:
        out.append("driver: not loaded (no proc/driver/nvidia)")
    mods = ", ".join(f"{m} {'yes' if f.module_loaded(m) else 'no'}" for m in ("nvidia_peermem", "mlx5_ib"))
    out.append(f"modules: {mods}")
    out.append(f"kernel: {f.kernel or '?'}; OS: {f.os_release.get('PRETTY_NAME', '?')}")
    if f.dmi:
        out.append(f"DMI: {_one_line(f.dmi.get('sys_vendor', '?'))} / {_one_line(f.dmi.get('product_name', '?'))}")
    if f.kubernetes.markers:
        out.append("Kubernetes: " + "; ".join(f.kubernetes.markers))
    if f.ofed.sources:
        out.append(f"OFED: mlx5_core {f.ofed.mlx5_core_version or '-'}, DOCA-OFED {f.ofed.doca_ofed or '-'}")
    if f.findings:
        out.append(f"findings ({len(f.findings)}):")
        out += [f"  {_one_line(w)}" for w in f.findings]
    if f.warnings:
        out.append(f"partial facts ({len(f.warnings)}):")
        out += [f"  {_one_line(w)}" for w in f.warnings]
    return "\n".join(out) + "\n"
