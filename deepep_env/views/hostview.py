"""The host half of a plan: detect the platform, compute the overlay, run doctor — as data.

Used by ``deepep-env plan``. The host is probed once (:func:`deepep_env.host.context.read_host`) and
that one reading feeds the summary, the overlay and doctor; each step that cannot run is reported
as an error string instead of failing the whole plan.
"""
from __future__ import annotations

from typing import Any, Optional

from deepep_env.doctor.run import run_doctor
from deepep_env.host.context import HostContext, overlay_context, read_host
from deepep_env.base.errors import UserError
from deepep_env.formats.prefix import has_marker
from deepep_env.base.project import Project
from deepep_env.envspec.resolved import ResolvedSpec
from deepep_env.lock.workspace import Workspace


def _host_summary(host: HostContext, root: str, demo_host: Optional[str]) -> dict[str, Any]:
    det = host.detection
    d = det.to_dict()
    return {
        "source": f"bundled capture {demo_host!r}" if demo_host else (f"host tree {root}" if not host.live else "this machine"),
        "platform": det.platform.name,
        "evidence": list(det.platform.evidence),
        "summary": {
            "gpus": f"{len(det.facts.gpus)} × {det.facts.gpus[0].model if det.facts.gpus else '-'}",
            "rdma nics": ", ".join(n.hca for n in det.facts.nics) or "none",
            "gpu→nic": d.get("gpu_nic_affinity") and ", ".join(
                f"{a.get('cuda_index')}:{a.get('hca')}" for a in d["gpu_nic_affinity"] if a.get("hca")) or "-",
        },
    }


def host_view(r: ResolvedSpec, project: Project, *, root: str = "/", platform: Optional[str] = None,
              demo_host: Optional[str] = None, environ: Optional[dict[str, str]] = None,
              ws: Optional[Workspace] = None) -> dict[str, Any]:
    """``environ``: the caller's environment (default: this process's on the live host; a captured
    or bundled host is judged on its own facts, not on this machine's variables). ``ws``: the
    command's workspace (doctor reads the spec and the lock through it)."""
    out: dict[str, Any] = {"errors": []}
    try:
        host = read_host(root, platform, environ)
    except UserError as err:
        out["errors"].append(f"detect: {err}")
        return out
    if not host.live:
        host = host._replace(environ={})
    out["host"] = _host_summary(host, root, demo_host)
    prefix = project.prefix_for(r.name)
    installed = has_marker(prefix)
    try:
        # An installed env: what its activation applies (its recorded [env] and Python); else the spec's.
        ctx = overlay_context(host, prefix if installed else None, spec_env=None if installed else dict(r.env),
                              env_name=r.name)
        out["overlay"] = ctx.overlay.to_dict()
    except UserError as err:
        out["errors"].append(f"overlay: {err}")
    try:
        rep = run_doctor(r.name, host=host, prefix=prefix if installed else None, project=project, spec=r, ws=ws)
        out["doctor"] = rep.to_dict()
    except UserError as err:
        out["errors"].append(f"doctor: {err}")
    return out
