"""What each locked build was made from: its build id's pre-image, committed beside pixi.lock.

``lockfiles/build-inputs.json`` holds, per lock environment and per package deepep-env builds, the
id and the whole pre-image (docs/build-id.md §2): sources, patches, recipe, variant, dependencies,
virtual packages and the host externals' fingerprints. It is the Nix ``.drv`` of a lock: anyone can
check ``id == sha256(canonical_json(preimage))``, a PR that changes an environment shows *which
input* moved, and a machine without the GPU image's CUDA or PyTorch (CI) can still check that the
lock is in step with the recipes, reading the host facts the lock was built with instead of its own.

Written by ``deepep-env lock`` (live facts: what was just built), read by every command that plans
against the committed lock (``lock --check``, ``pixi sync``, ``plan``, ``install``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

from deepep_env.base.atomic import write_text
from deepep_env.base.errors import UserError
from deepep_env.formats.stamps import BUILD_INPUTS, BUILD_MANIFEST
from deepep_env.base.hashing import build_id
from deepep_env.base.readfile import present, read_json

if TYPE_CHECKING:  # annotations only: no import at run time
    from deepep_env.base.project import Project

# (env, package, component, node meta) -> that host external's fingerprint (sources/hostprint.py):
# how the planner asks for host facts, live or from this record (deepep_env.builder.plan re-exports it).
HostInputs = Callable[[str, str, str, Mapping[str, Any]], dict[str, str]]


INPUTS_FILE = Path("lockfiles") / "build-inputs.json"
_MAX_BYTES = 16 << 20

Record = dict[str, Any]          # {"id", "build", "version", "preimage"}
Inputs = dict[str, dict[str, Record]]   # env -> package (recipe node) -> record


def inputs_path(project: Project) -> Path:
    return Path(project.root) / INPUTS_FILE


def read_inputs(project: Project) -> Inputs:
    """The committed record, checked: its stamp, its shape, and each id against its pre-image."""
    path = inputs_path(project)
    return read_inputs_file(path) if present(path) else {}


def read_inputs_file(path: Path) -> Inputs:
    """A build inputs record at ``path`` (the committed one, or one a relock wrote elsewhere), checked
    as :func:`read_inputs` says."""
    data = read_json(path, what="build inputs record", accepted="a build inputs record", limit=_MAX_BYTES)
    BUILD_INPUTS.check(data, file=path)
    envs = data.get("environments")
    if not isinstance(envs, dict):
        raise UserError("'environments' must be an object", file=path, field="environments")
    for env, pkgs in envs.items():
        for pkg, rec in (pkgs.items() if isinstance(pkgs, dict) else [(None, None)]):
            _check_record(path, env, pkg, rec)
    return envs


def _check_record(path: Path, env: str, pkg: Optional[str], rec: Any) -> None:
    field = f"environments.{env}.{pkg}"
    if not isinstance(rec, dict) or not isinstance(rec.get("preimage"), dict) or not isinstance(rec.get("id"), str):
        raise UserError("each build needs 'id' and 'preimage'", file=path, field=field)
    if build_id(rec["preimage"]) != rec["id"]:
        raise UserError(f"id {rec['id'][:19]}… is not the sha256 of its pre-image (edited by hand?)", file=path,
                        field=field, accepted="the record `deepep-env lock ENV` writes")


def recorded_externals(inputs: Inputs, env: str, package: str) -> dict[str, Any]:
    rec = inputs.get(env, {}).get(package) or {}
    ext = (rec.get("preimage") or {}).get("externals") or {}
    return ext if isinstance(ext, dict) else {}


def _record(node: Any) -> Record:
    return {"id": node.id, "version": node.version, "build": node.build_string, "preimage": node.preimage}


def _write(project: Project, envs: Inputs) -> Path:
    """The one writer of the record: environments in name order, atomically."""
    data = {"format": BUILD_INPUTS.stamp, "environments": {e: envs[e] for e in sorted(envs)}}
    return write_text(inputs_path(project), json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def write_env_inputs(project: Project, env: str, nodes: Sequence[Any]) -> Path:
    """Replace ``env``'s builds in the record (every other environment kept)."""
    envs = dict(read_inputs(project))
    envs[env] = {n.package: _record(n) for n in nodes if n.id}
    return _write(project, envs)


def put_env_record(project: Project, env: str, builds: Any) -> Path:
    """Replace ``env``'s builds with ``builds``: another record's entry for it, read with
    :func:`read_inputs_file` (e.g. a relock made on a GPU machine)."""
    envs = dict(read_inputs(project))
    envs[env] = builds
    return _write(project, envs)


def drop_env_inputs(project: Project, envs: Sequence[str]) -> None:
    """Leave ``envs`` out of the record (``lock --prune``), every other environment kept."""
    have = dict(read_inputs(project))
    if any(e in have for e in envs):
        _write(project, {e: v for e, v in have.items() if e not in envs})


def swap_tool_inputs(project: Project, env: str, node: Any) -> None:
    """Record ``node`` (deepep-env's own package, relocked in place) for ``env``, nothing else changed."""
    envs = dict(read_inputs(project))
    if env in envs:
        envs[env] = {**envs[env], node.package: _record(node)}
        _write(project, envs)


def host_inputs_from_record(project: Project, live: HostInputs) -> Any:
    """A host-inputs function for :func:`deepep_env.builder.plan.plan`: the fingerprint the lock
    recorded for (env, package, component) where there is one, else this machine's (``live``)."""
    inputs = read_inputs(project)

    def host(env: str, package: str, component: str, meta: Mapping[str, Any]) -> dict[str, str]:
        fp = (recorded_externals(inputs, env, package).get(component) or {}).get("fingerprint")
        return dict(fp) if isinstance(fp, dict) else live(env, package, component, meta)

    return host


def resolutions_from_record(project: Project) -> Any:
    """A resolutions function for :func:`deepep_env.builder.plan.plan`: what the lock recorded each
    build's environments resolved to ({} where nothing was recorded)."""
    inputs = read_inputs(project)

    def resolved(env: str, package: str) -> dict[str, Any]:
        rec = inputs.get(env, {}).get(package) or {}
        r = (rec.get("preimage") or {}).get("resolved") or {}
        return dict(r) if isinstance(r, dict) else {}

    return resolved


def resolutions_from_builds(project: Project, env: str) -> Any:
    """What the last ``deepep-env build ENV`` resolved each node's environments to (its build
    manifest, ``<state>/builds/ENV.json``), else the lock's record: what ``lock`` locks."""
    recorded = resolutions_from_record(project)
    path = Path(project.state) / "builds" / f"{env}.json"
    built: dict[str, dict[str, Any]] = {}
    try:   # no manifest, or one this deepep-env does not read: the lock's record answers
        data = read_json(path, what="build manifest") if present(path) else {}
    except UserError:
        data = {}
    if not BUILD_MANIFEST.accepts(data):
        data = {}
    for p in data.get("packages") or []:
        if isinstance(p, dict) and isinstance(p.get("package"), str) and isinstance(p.get("resolved"), dict):
            built[p["package"]] = p["resolved"]

    def resolved(e: str, package: str) -> dict[str, Any]:
        return dict(built[package]) if e == env and package in built else recorded(e, package)

    return resolved
