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

import math
import textwrap

from deepep_env.base.safetext import xml as escape

BOX_W, BOX_H, GAP, GROUP_W, PAD = 150, 30, 8, 360, 14
# A laptop window: the picture wraps its switch groups (rows of 3) and its text to stay this wide.
MAX_WIDTH = 1280
# Text is measured, never clipped: an advance of 0.7 em per character is wider than sans-serif fonts'
# (DejaVu Sans, Arial, Liberation Sans) lowercase letters, digits and most capitals, so a caption
# measured with it fits wherever a browser draws it (bold: 0.75 em).
CHAR_EM, BOLD_EM = 0.7, 0.75
GPU_FILL, NIC_FILL, NIC_DOWN_FILL = "#76b900", "#1565c0", "#9e9e9e"


def text_width(text: str, size: float, bold: bool = False) -> float:
    """An over-estimate of ``text``'s drawn width in px at font size ``size``."""
    return len(text) * size * (BOLD_EM if bold else CHAR_EM)


def _wrap(line: str, size: float, avail: float, bold: bool = False) -> list[str]:
    """``line`` as lines that each measure at most ``avail`` px (long evidence: one clause a line first)."""
    chars = max(20, int(avail // text_width("x", size, bold)))
    parts = [line] if len(line) <= chars else [("  " if i else "") + p for i, p in enumerate(line.split("; "))]
    out: list[str] = []
    for p in parts:
        out += textwrap.wrap(p, width=chars, subsequent_indent="    ", break_on_hyphens=False) or [""]
    return out


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


def _group_label(key: str) -> str:
    if key.startswith("pci"):
        return "root complex " + key
    return key if key == "no PCI function" else "PCIe switch " + key


def _gpu_text(g: Any) -> str:
    return f"GPU{g.cuda_index} {g.bdf}"


def _nic_text(n: Any) -> str:
    return n.hca + " " + (n.bdf or "")


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
    labels = {k: _group_label(k) for k in order}
    box_w = math.ceil(max([BOX_W - 12.0] + [text_width(_gpu_text(g), 11) for g in facts.gpus]
                          + [text_width(_nic_text(n), 11) for n in facts.nics])) + 12
    group_w = math.ceil(max(GROUP_W, 2 * box_w + 2 * PAD + 40, *(text_width(v, 12) + 2 * PAD for v in labels.values())))
    cols = max(1, min(4, len(order), (MAX_WIDTH - 40) // (group_w + 20)))
    grid_w = 40 + cols * (group_w + 20)
    avail = max(grid_w, MAX_WIDTH) - 40
    title = _wrap(f"{len(facts.gpus)} GPU(s), {len(facts.nics)} RDMA NIC(s), platform {platform.name}", 16, avail, bold=True)
    legend = _wrap("green: GPU · blue: NIC with a usable port (grey: none) · orange: GPU→NIC mapping the overlay chose",
                   11, avail)
    rows_of = [max(len(groups[k]["gpus"]), len(groups[k]["nics"]), 1) for k in order]
    group_h = [PAD * 2 + 22 + r * (BOX_H + GAP) for r in rows_of]
    head_lines = [(line, 30 + 22 * i, 16, True) for i, line in enumerate(title)]
    y = 30 + 22 * (len(title) - 1) + 22
    head_lines += [(line, y + 16 * i, 11, False) for i, line in enumerate(legend)]
    pos: dict[str, tuple[float, float, float, float]] = {}
    body: list[str] = []
    y_row = y + 16 * (len(legend) - 1) + 18
    for start in range(0, len(order), cols):
        row_keys = order[start:start + cols]
        h = max(group_h[start:start + cols])
        for j, key in enumerate(row_keys):
            x = 20 + j * (group_w + 20)
            grp = groups[key]
            body.append(f'<g class="switch" data-switch="{escape(key)}"><rect x="{x}" y="{y_row}" width="{group_w}" '
                        f'height="{h}" rx="8" fill="#f5f5f5" stroke="#9e9e9e"/>'
                        f'<text x="{x + PAD}" y="{y_row + 20}" font-size="12" fill="#424242">{escape(labels[key])}</text></g>')
            for i, g in enumerate(grp["gpus"]):
                gx, gy = x + PAD, y_row + PAD + 22 + i * (BOX_H + GAP)
                pos[f"gpu{g.cuda_index}"] = (gx, gy, box_w, BOX_H)
                tip = f"GPU{g.cuda_index} {g.model or '?'} {g.bdf} NUMA {g.numa_node}"
                body.append(f'<g class="gpu" data-cuda-index="{g.cuda_index}"><title>{escape(tip)}</title>'
                            f'<rect x="{gx}" y="{gy}" width="{box_w}" height="{BOX_H}" rx="4" fill="{GPU_FILL}"/>'
                            f'<text x="{gx + 6}" y="{gy + 19}" font-size="11" fill="#fff">{escape(_gpu_text(g))}</text></g>')
            for i, n in enumerate(grp["nics"]):
                nx, ny = x + group_w - PAD - box_w, y_row + PAD + 22 + i * (BOX_H + GAP)
                pos[f"nic:{n.hca}"] = (nx, ny, box_w, BOX_H)
                up = bool(n.usable_ports())
                ports = ", ".join(f"port {p.number} {p.state or '?'} {p.link_layer or ''}".strip() for p in n.ports)
                tip = f"{n.hca} {n.hca_type or ''} fw {n.fw_ver or '?'} {n.bdf or '-'}; {ports}"
                body.append(f'<g class="nic" data-hca="{escape(n.hca)}"><title>{escape(tip)}</title>'
                            f'<rect x="{nx}" y="{ny}" width="{box_w}" height="{BOX_H}" rx="4" fill="{NIC_FILL if up else NIC_DOWN_FILL}"/>'
                            f'<text x="{nx + 6}" y="{ny + 19}" font-size="11" fill="#fff">{escape(_nic_text(n))}</text></g>')
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
    ev_lines: list[str] = []
    for line in [f"platform {platform.name} ({platform.source}): " + "; ".join(platform.evidence), *evidence]:
        ev_lines += _wrap(line, 11, avail)
    width = math.ceil(max([grid_w] + [text_width(t, sz, b) + 40 for t, _, sz, b in head_lines]
                          + [text_width(t, 11) + 40 for t in ev_lines]))
    ev_y = y_row + 10
    text = [f'<text class="evidence" x="20" y="{ev_y + 16 * i}" font-size="11" fill="#212121">{escape(line)}</text>'
            for i, line in enumerate(ev_lines)]
    height = ev_y + 16 * len(ev_lines) + 20
    head = "".join(f'<text x="20" y="{yy}" font-size="{sz}"' + (' font-weight="bold"' if b else ' fill="#616161"')
                   + f'>{escape(t)}</text>' for t, yy, sz, b in head_lines)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'font-family="sans-serif"><rect width="100%" height="100%" fill="#ffffff"/>{head}'
            + "".join(body) + "".join(links) + "".join(text) + "</svg>\n")
