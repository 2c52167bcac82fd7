"""The host half of a plan: detect the platform, compute the overlay, run doctor — as data.

Used by ``deepep-env plan``; each step that cannot run is reported as an error string instead of
failing the whole plan.
"""
from __future__ import annotations

import os
from typing import Any, Optional

from deepep_env.errors import UserError
from deepep_env.project import Project
from deepep_env.spec.resolved import ResolvedSpec


def host_view(r: ResolvedSpec, project: Project, *, root: str = "/", platform: Optional[str] = None,
              demo_host: Optional[str] = None) -> dict[str, Any]:
    from deepep_env.overlay import overlay_for_host
    from deepep_env.platform import detect

    out: dict[str, Any] = {"errors": []}
    live = os.path.realpath(root) == "/" and not demo_host
    # A captured or bundled host is judged on its own facts, not on this machine's variables.
    environ = dict(os.environ) if live else {}
    try:
        det = detect(root, platform, environ=environ)
    except UserError as err:
        out["errors"].append(f"detect: {err}")
        return out
    d = det.to_dict()
    out["host"] = {
        "source": f"bundled capture {demo_host!r}" if demo_host else (f"host tree {root}" if not live else "this machine"),
        "platform": det.platform.name,
        "evidence": list(det.platform.evidence),
        "summary": {
            "gpus": f"{len(det.facts.gpus)} × {det.facts.gpus[0].model if det.facts.gpus else '-'}",
            "rdma nics": ", ".join(n.hca for n in det.facts.nics) or "none",
            "gpu→nic": d.get("gpu_nic_affinity") and ", ".join(
                f"{a.get('cuda_index')}:{a.get('hca')}" for a in d["gpu_nic_affinity"] if a.get("hca")) or "-",
        },
    }
    prefix = project.prefix_for(r.name)
    from deepep_env.overlay.prefix import has_marker

    installed = has_marker(prefix)
    try:
        ov = overlay_for_host(root, platform or None, prefix if installed else None, spec_env=dict(r.env),
                              environ=environ)
        out["overlay"] = ov.to_dict()
    except UserError as err:
        out["errors"].append(f"overlay: {err}")
    from deepep_env.doctor.run import run_doctor

    try:
        rep = run_doctor(r.name, root=root, prefix=prefix if installed else None, platform=platform,
                         environ=environ, project=project, spec=r)
        out["doctor"] = rep.to_dict() if hasattr(rep, "to_dict") else rep
    except UserError as err:
        out["errors"].append(f"doctor: {err}")
    return out
