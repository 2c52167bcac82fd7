"""The main job's dry run: everything deepep-env would do for an env, as data.

spec → resolved pins → build graph (ids, store status) → lock status → host detection → overlay
→ doctor findings. Each step reports what it found; a step that cannot run says why instead of
failing the whole plan (a plan is most useful exactly when something is missing).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from deepep_env.builder.preview import preview_plan
from deepep_env.builder.plan import BuildNode, BuildPlan
from deepep_env.base.errors import UserError
from deepep_env.base.hashing import short_id
from deepep_env.views.hostview import host_view
from deepep_env.lock import check_lock
from deepep_env.formats.lockfile import read_lock
from deepep_env.lock.next_step import next_step
from deepep_env.lock.workspace import Workspace, workspace
from deepep_env.formats.prefix import has_marker
from deepep_env.platform.demo import demo_name, host_root
from deepep_env.base.project import Project
from deepep_env.sources import hostprint
from deepep_env.envspec.resolved import ResolvedSpec
from deepep_env.envspec.wheels import nvshmem_options, wheel_suggestion
from deepep_env.envspec.wheel_pins import wheel_rows
from deepep_env.verify.keys import TrustPolicy
from deepep_env.verify.matrix import plan_verification


def _pins(r: ResolvedSpec) -> dict[str, Any]:
    return {
        "python": {"version": r.python.version, "provider": r.python.provider},
        "cuda": {"version": r.cuda.version, "architectures": r.cuda.architectures, "provider": r.cuda.provider},
        "pytorch": {"version": r.pytorch.version, "cuda": r.pytorch.cuda, "provider": r.pytorch.provider,
                    "build": r.pytorch.build},
        "nccl": {"version": r.nccl.version, "provider": r.nccl.provider},
        "nvshmem": {"version": r.nvshmem.version, "provider": r.nvshmem.provider, "ibgda": r.nvshmem.ibgda,
                    "gdrcopy": r.nvshmem.gdrcopy, "nic_handler": r.nvshmem.nic_handler,
                    "patches": [p.name for p in r.nvshmem.patches]},
        "gdrcopy": {"version": r.gdrcopy.version} if r.gdrcopy else None,
        "deepep": {"label": r.deepep.label, "revision": r.deepep.revision, "engine": r.deepep.engine,
                   "features": r.deepep.features, "require": r.deepep.require,
                   "torch_cuda_arch_list": r.deepep.torch_cuda_arch_list, "aggressive_ptx": r.deepep.aggressive_ptx,
                   "patches": [p.name for p in r.deepep.patches]},
    }


def store_entry(project: Project, package: str, build_id: str) -> Path:
    return project.store / f"{short_id(build_id, 10)}-{package}" / "entry.json"


def _to_pin(n: BuildNode) -> list[dict[str, Any]]:
    """Each source or patch of a node that has no content hash yet: where it would be fetched from,
    so a user on a networked machine knows exactly what `deepep-env fetch` will pin."""
    out: list[dict[str, Any]] = []
    for name, pin in sorted(n.sources.items()):
        if not pin.pinned:
            out.append({"what": f"source {name}", "recipe": f"recipes/{n.package}/sources.toml",
                        "version": n.version, "tag": pin.tag, "rev": pin.rev, "urls": list(pin.urls)})
    for p in n.patches:
        if not p.pin.sha256:
            out.append({"what": f"patch {p.name}", "recipe": f"recipes/{n.package}/sources.toml", "urls": [p.pin.url]})
    return out


def _host_here(n: BuildNode) -> dict[str, Any]:
    """This machine's fingerprint of each host external the node names."""
    return {c: {"fingerprint": hostprint.fingerprint(c, n.meta)} for c in n.externals}


def _builds(bp: BuildPlan, project: Project, prepare: Optional[str] = None) -> list[dict[str, Any]]:
    """Each node of ``bp`` as plan shows it; ``prepare``: the spec's ``[host] prepare``, named where a
    node's host externals are missing here (the data's ``host`` is the detected host in ``plan``)."""
    reqs = preview_plan(bp)
    out = []
    for n in bp.nodes:
        here = _host_here(n)
        missing = hostprint.with_read_note(hostprint.missing_externals(n.externals, here), n.meta)
        moved = hostprint.moved_externals(n.externals, here, n.meta)
        out.append({
            "package": n.package,
            "version": n.version,
            "build_string": n.build_string,
            "id": n.id,
            "deps": list(n.deps),
            "unpinned": list(n.unpinned),
            "to_pin": _to_pin(n),
            "in_store": bool(n.id and store_entry(project, n.package, n.id).is_file()),
            # this machine's host externals where they differ from the facts the id names (the lock's
            # record): a build here would get another id, and an install here cannot rebuild this one
            "host_differs": [t for _, t in moved] or hostprint.externals_differences(n.externals, here),
            # how to make each differing external match the lock's (issue 51.4)
            "host_match": list(dict.fromkeys(hostprint.HOW_TO_MATCH[c] for c, _ in moved if c in hostprint.HOW_TO_MATCH)),
            # the externals this machine lacks altogether (a fresh machine): the spec's host.prepare makes them
            "host_missing": missing,
            "prepare": prepare if missing else None,
            "preimage": n.preimage,
            # what the recipe will ask rattler-build for, per output (build/host/run as rendered)
            "requirements": reqs.get(n.package, {}),
        })
    return out


def resolved_with_builds(name: str, project: Project, ws: Optional[Workspace] = None) -> dict[str, Any]:
    ws = workspace(project, ws)
    return _resolved_data(ws.resolved(name), project, ws)


def _resolved_data(r: ResolvedSpec, project: Project, ws: Optional[Workspace] = None) -> dict[str, Any]:
    bp = workspace(project, ws).plan_of(r)
    return {
        "name": r.name, "version": r.version, "description": r.description, "platforms": r.platforms,
        "subdirs": r.subdirs, "channels": r.channels, "publish_url": r.publish_url,
        "pins": _pins(r), "host": r.host.model_dump(exclude_defaults=True), "env": r.env,
        "decisions": r.decisions, "builds": _builds(bp, project, r.host.prepare),
    }


def _lock_status(name: str, project: Project, ws: Optional[Workspace] = None) -> dict[str, Any]:
    path = project.pixi_lock
    if not path.exists() or not _has_env(path, name, ws):
        step = next_step(project, name, ws)
        return {"path": str(path.relative_to(project.root)), "status": "missing", "hint": step.command,
                "why": step.why + step.note()}
    try:
        res = check_lock(name, project, ws=ws)
    except UserError as err:
        return {"path": str(path.relative_to(project.root)), "status": "error", "error": str(err)}
    return {"path": str(path.relative_to(project.root)), **_as_data(res)}


def _verified(name: str, project: Project, ws: Optional[Workspace] = None,
              trust: Optional[TrustPolicy] = None) -> dict[str, Any]:
    """Whether a passing test record (verified/) is bound to the env's current lock digest (and signed by
    a trusted key, under a trust policy)."""
    try:
        return plan_verification(project, name, ws, trust)
    except UserError as err:
        return {"status": "error", "error": str(err)}


def _has_env(path: Path, env: str, ws: Optional[Workspace] = None) -> bool:
    try:
        return (ws.lock(path) if ws is not None else read_lock(path)).env(env) is not None
    except UserError:
        return True  # unreadable: check_lock says so, as an error

def _as_data(obj: Any) -> Any:
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if hasattr(obj, "model_dump"):
        return obj.model_dump()
    if hasattr(obj, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(obj)
    return obj


def _host_sections(name: str, project: Project, r: ResolvedSpec, root: Optional[str], demo_host: Optional[str],
                   platform: Optional[str], ws: Optional[Workspace] = None) -> dict[str, Any]:
    with host_root(root, demo_host) as host_dir:
        return host_view(r, project, root=host_dir, platform=platform, demo_host=demo_name(root, demo_host), ws=ws)


def make_plan(name: str, project: Project, *, root: Optional[str] = None, demo_host: Optional[str] = None,
              platform: Optional[str] = None, ws: Optional[Workspace] = None,
              trust: Optional[TrustPolicy] = None) -> dict[str, Any]:
    ws = workspace(project, ws)
    r = ws.resolved(name)
    data = _resolved_data(r, project, ws)
    data["nvshmem_options"] = nvshmem_options(r, project)
    data["nvshmem_suggestion"] = wheel_suggestion(r, data["nvshmem_options"])
    data["cuda_wheels"] = wheel_rows(r.cuda.wheels)          # the pins resolve read (empty unless provider = wheel)
    data["pytorch_wheels"] = wheel_rows(r.pytorch.wheels)
    data["lock"] = _lock_status(name, project, ws)
    data["verified"] = _verified(name, project, ws, trust)
    data["prefix"] = {"path": str(project.prefix_for(name)),
                      "installed": has_marker(project.prefix_for(name))}
    data.update(_host_sections(name, project, r, root, demo_host, platform, ws))
    return data
