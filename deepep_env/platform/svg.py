"""``detect --svg FILE``: the host's topology as one SVG picture.

GPUs and RDMA NICs grouped by the PCIe switch they sit under (the bridge two levels above the
device: root complex → root port → switch → downstream port → device), the GPU→NIC mapping the
overlay chose (``DEEP_EP_DEVICE_TO_HCA_MAPPING``, else the probe's nearest-NIC affinity) as lines,
and the evidence for that choice as text. Self-contained, no script; valid XML: every host fact (a GPU
model, a NIC name) goes through :func:`deepep_env.base.safetext.xml`, which shows the control
characters XML cannot hold as escapes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:  # annotations only: no import at run time
    from deepep_env.platform.facts import HostFacts
    from deepep_env.platform.profiles import PlatformChoice

from deepep_env.base.safetext import xml as escape

BOX_W, BOX_H, GAP, GROUP_W, PAD = 150, 30, 8, 360, 14
GPU_FILL, NIC_FILL, NIC_DOWN_FILL = "#76b900", "#1565c0", "#9e9e9e"


def _switch(chain: tuple[str, ...]) -> str:
    """The PCIe switch a device sits under, or its root complex when it hangs off a root port."""
    return chain[-3] if len(chain) >= 4 else (chain[0] if chain else "unknown")


def _mapping(facts: HostFacts, overlay: Optional[Any]) -> tuple[dict[int, str], list[str]]:
    """cuda index → HCA, and the evidence lines, from the overlay's choice (or the probe's affinity)."""
    ev: list[str] = []
    if overlay is not None:
        for c in overlay.changes:
            if c.name == "DEEP_EP_DEVICE_TO_HCA_MAPPING" and c.value:
                out = {}
                for item in str(c.value).split(","):
                    parts = item.split(":")
                    if len(parts) >= 2 and parts[0].isdigit():
                        out[int(parts[0])] = parts[1]
                ev.append(f"overlay rule {c.rule}: DEEP_EP_DEVICE_TO_HCA_MAPPING={c.value}")
                ev.append(f"because: {c.fact}")
                return out, ev
    out = {a.cuda_index: a.hca for a in facts.affinity if a.hca}
    ev += [f"GPU{a.cuda_index} {a.gpu} → {a.hca or '-'}: {a.reason}" for a in facts.affinity]
    return out, ev


def render_svg(facts: HostFacts, platform: PlatformChoice, overlay: Optional[Any] = None) -> str:
    """``overlay``: the :class:`~deepep_env.overlay.changes.Overlay` it applies, if any (a layer above
    platform/, so not imported here)."""
    mapping, evidence = _mapping(facts, overlay)
    groups: dict[str, dict[str, list]] = {}
    for g in facts.gpus:
        groups.setdefault(_switch(g.pci_chain), {"gpus": [], "nics": []})["gpus"].append(g)
    for n in facts.nics:
        groups.setdefault(_switch(n.pci_chain) if n.bdf else "no PCI function", {"gpus": [], "nics": []})["nics"].append(n)
    order = sorted(groups, key=lambda k: min([g.bdf for g in groups[k]["gpus"]] + [n.bdf or "z" for n in groups[k]["nics"]]))
    cols = max(1, min(4, len(order)))
    rows_of = [max(len(groups[k]["gpus"]), len(groups[k]["nics"]), 1) for k in order]
    group_h = [PAD * 2 + 22 + r * (BOX_H + GAP) for r in rows_of]
    top = 70
    pos: dict[str, tuple[float, float, float, float]] = {}
    body: list[str] = []
    y_row = top
    for start in range(0, len(order), cols):
        row_keys = order[start:start + cols]
        h = max(group_h[start:start + cols])
        for j, key in enumerate(row_keys):
            x = 20 + j * (GROUP_W + 20)
            grp = groups[key]
            label = "PCIe switch " + key if key not in ("no PCI function",) and not key.startswith("pci") else (
                "root complex " + key if key.startswith("pci") else key)
            body.append(f'<g class="switch" data-switch="{escape(key)}"><rect x="{x}" y="{y_row}" width="{GROUP_W}" '
                        f'height="{h}" rx="8" fill="#f5f5f5" stroke="#9e9e9e"/>'
                        f'<text x="{x + PAD}" y="{y_row + 20}" font-size="12" fill="#424242">{escape(label)}</text></g>')
            for i, g in enumerate(grp["gpus"]):
                gx, gy = x + PAD, y_row + PAD + 22 + i * (BOX_H + GAP)
                pos[f"gpu{g.cuda_index}"] = (gx, gy, BOX_W, BOX_H)
                tip = f"GPU{g.cuda_index} {g.model or '?'} {g.bdf} NUMA {g.numa_node}"
                body.append(f'<g class="gpu" data-cuda-index="{g.cuda_index}"><title>{escape(tip)}</title>'
                            f'<rect x="{gx}" y="{gy}" width="{BOX_W}" height="{BOX_H}" rx="4" fill="{GPU_FILL}"/>'
                            f'<text x="{gx + 6}" y="{gy + 19}" font-size="11" fill="#fff">{escape(f"GPU{g.cuda_index} {g.bdf}")}</text></g>')
            for i, n in enumerate(grp["nics"]):
                nx, ny = x + GROUP_W - PAD - BOX_W, y_row + PAD + 22 + i * (BOX_H + GAP)
                pos[f"nic:{n.hca}"] = (nx, ny, BOX_W, BOX_H)
                up = bool(n.usable_ports())
                ports = ", ".join(f"port {p.number} {p.state or '?'} {p.link_layer or ''}".strip() for p in n.ports)
                tip = f"{n.hca} {n.hca_type or ''} fw {n.fw_ver or '?'} {n.bdf or '-'}; {ports}"
                body.append(f'<g class="nic" data-hca="{escape(n.hca)}"><title>{escape(tip)}</title>'
                            f'<rect x="{nx}" y="{ny}" width="{BOX_W}" height="{BOX_H}" rx="4" fill="{NIC_FILL if up else NIC_DOWN_FILL}"/>'
                            f'<text x="{nx + 6}" y="{ny + 19}" font-size="11" fill="#fff">{escape(n.hca + " " + (n.bdf or ""))}</text></g>')
        y_row += h + 20
    links = []
    for idx, hca in sorted(mapping.items()):
        a, b = pos.get(f"gpu{idx}"), pos.get(f"nic:{hca}")
        if a is None or b is None:
            continue
        x1, y1 = a[0] + a[2], a[1] + a[3] / 2
        x2, y2 = b[0], b[1] + b[3] / 2
        links.append(f'<line class="map" data-gpu="{idx}" data-hca="{escape(hca)}" x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" '
                     f'stroke="#e65100" stroke-width="2"><title>{escape(f"GPU{idx} → {hca}")}</title></line>')
    ev_lines = [f"platform {platform.name} ({platform.source}): " + "; ".join(platform.evidence)]
    for line in evidence:   # long evidence (one clause per GPU) one clause a line
        ev_lines += [line] if len(line) <= 160 else [("  " if i else "") + part for i, part in enumerate(line.split("; "))]
    width = 40 + cols * (GROUP_W + 20)
    ev_y = y_row + 10
    text = [f'<text class="evidence" x="20" y="{ev_y + 16 * i}" font-size="11" fill="#212121">{escape(line[:220])}</text>'
            for i, line in enumerate(ev_lines)]
    height = ev_y + 16 * len(ev_lines) + 20
    gpus = len(facts.gpus)
    head = (f'<text x="20" y="30" font-size="16" font-weight="bold">{escape(f"{gpus} GPU(s), {len(facts.nics)} RDMA NIC(s), platform {platform.name}")}</text>'
            f'<text x="20" y="52" font-size="11" fill="#616161">green: GPU · blue: NIC with a usable port (grey: none) · '
            f'orange: GPU→NIC mapping the overlay chose</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'font-family="sans-serif"><rect width="100%" height="100%" fill="#ffffff"/>{head}'
            + "".join(body) + "".join(links) + "".join(text) + "</svg>\n")
