"""Text rendering of a DoctorReport (``--json`` prints ``report.to_dict()`` instead)."""
from __future__ import annotations

from deepep_env.doctor.model import DoctorReport, one_line

LABEL = {"error": "ERROR", "warning": "WARN", "info": "info"}


def render_text(report: DoctorReport, strict: bool = False, verbose: bool = False) -> str:
    r = report
    head = f"doctor: platform {r.platform} ({r.platform_source}), root {r.root}"
    if r.env or r.prefix:
        head += f", env {r.env or '?'} at {r.prefix}"
        head += " (checked with its overlay applied)" if r.overlay_applied else ""
    else:
        head += ", host only (current environment; pass ENV to check an installed env)"
    out = [one_line(head, 1000)]
    for f in r.findings:
        out.append(f"{LABEL[f.severity]:5} {f.id}: {one_line(f.title, 600)}")
        for e in f.evidence:
            out.append(f"      saw: {one_line(e.render(), 600)}")
        out.append(f"      fix: {one_line(f.fix, 600)}")
    if r.traffic is not None:
        t = r.traffic
        out.append(f"traffic while `{one_line(' '.join(t.command), 300)}` ran ({t.seconds:.1f}s, exit {t.returncode}):")
        for p in t.ports:
            d = p.delta
            shown = "unreadable" if d is None else f"+{d * 4} bytes"
            out.append(f"      {one_line(p.hca, 64)}:{p.port} {'ACTIVE' if p.active else 'not active'} {shown}")
    for c in r.confirmed:
        out.append(f"ok    {one_line(c, 600)}")
    if verbose or not r.findings:
        for n in r.notes:
            out.append(f"note: {one_line(n, 600)}")
    counts = {s: len(r.by_severity(s)) for s in ("error", "warning", "info")}
    summary = ", ".join(f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items())
    out.append(f"{summary}; {len(r.checks)} check families ran; exit {r.exit_code(strict)}"
               + ("" if verbose or not r.notes or not r.findings else f" ({len(r.notes)} notes: --verbose)"))
    return "\n".join(out) + "\n"
