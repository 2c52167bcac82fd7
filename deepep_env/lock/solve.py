"""Solve a :class:`LockRequest` with py-rattler and write its environment into ``pixi.lock``.

Order of work, so that a failure writes nothing: probe every channel (seconds), solve every
subdir, rewrite the local channel's URLs to the spec's ``publish_url``, then write the lock
atomically (unchanged content is not rewritten).
"""
from __future__ import annotations


import asyncio
import datetime as _dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from deepep_env.base.channels.auth import redact
from deepep_env.builder.copies import check_copy, store_sha
from deepep_env.builder.moved import moved_ids, moved_refusal
from deepep_env.base.errors import UserError
from deepep_env.base.channels.urls import client as make_client
from deepep_env.base.channels.refusals import channel_failure
from deepep_env.base.channels.urls import probe, url_to_path
from deepep_env.formats.build_inputs import write_env_inputs
from deepep_env.formats.lockfile import EnvSection, write_env
from deepep_env.envspec.resolve import load_resolved
from deepep_env.lock.request import LockRequest, request_for_env
from deepep_env.base.rattler_errors import rattler_errors

if TYPE_CHECKING:  # annotations only: no import at run time
    from rattler.networking import Client

    from deepep_env.base.project import Project


SOLVE_TIMEOUT_S = 600


def cache_dir() -> Optional[Path]:
    """Repodata/package cache: ``$DEEPEP_ENV_CACHE_DIR``, else rattler's own (shared with pixi)."""
    v = os.environ.get("DEEPEP_ENV_CACHE_DIR")
    return Path(v) if v else None


def default_lock_path(project: Project, env: Optional[str] = None) -> Path:
    """The project's one lock, ``pixi.lock`` beside ``pixi.toml``: every environment is in it."""
    return project.pixi_lock


@dataclass
class LockResult:
    env: str
    path: Path
    changed: bool
    channels: list[str]
    platforms: dict[str, list[str]]
    packages: dict[str, list[dict[str, str]]]
    machine_local: bool = False
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"env": self.env, "path": str(self.path), "changed": self.changed,
                "channels": [redact(c) for c in self.channels], "platforms": self.platforms,
                "packages": self.packages, "machine_local": self.machine_local,
                "warnings": [redact(w) for w in self.warnings]}


def solve_request(req: LockRequest, *, client_obj: Optional[Client] = None) -> dict[str, list]:
    """subdir → solved RepoDataRecords (URLs still as read). Raises UserError, never a traceback."""
    import rattler
    from rattler import Channel, ChannelPriority, Gateway, Subdir

    for ref in req.channels:
        probe(ref, req.subdirs)
    if client_obj is None:
        client_obj = make_client([c.source for c in req.channels])
    cd = cache_dir()
    gw = Gateway(cache_dir=cd, client=client_obj) if cd else Gateway(client=client_obj)
    sources = [Channel(ref.source) for ref in req.channels]
    roots = [r.spec for r in req.roots]
    if not roots:
        raise UserError(f"nothing to lock for {req.env}: no package comes from a conda channel",
                        accepted="a spec that builds packages or has provider = \"conda\" components")
    constraints = [r.spec for r in req.constraints] or None
    out: dict[str, list] = {}
    for subdir in req.subdirs:
        try:
            with rattler_errors(f"cannot solve {req.env} for {subdir}: {{error}}; nothing written", field="channels",
                                accepted="packages present in the spec's channels (run `deepep-env build ENV` for ours)"):
                recs = asyncio.run(rattler.solve(
                    sources, roots, gateway=gw, platforms=[Subdir(subdir), "noarch"],
                    virtual_packages=[v.rattler() for v in req.virtual_packages.get(subdir, [])],
                    constraints=constraints, channel_priority=ChannelPriority.Strict,
                    timeout=_dt.timedelta(seconds=SOLVE_TIMEOUT_S),
                ))
        except UserError as exc:   # a 401/403 or 5xx from a channel: its own cause and next step
            failed = channel_failure(exc.message, [c.source for c in req.channels])
            if failed is None:
                raise
            raise UserError(f"cannot solve {req.env} for {subdir}: {failed[0]}; nothing written", field="channels",
                            accepted=failed[1]) from None
        out[subdir] = recs
    return out


def ref_is_local(req: LockRequest, url: str) -> bool:
    return any(c.local and url.startswith(c.source) for c in req.channels)


def hash_local_files(req: LockRequest, records: dict[str, list]) -> None:
    """A package of the local channel is locked with the sha256 of its file, hashed here, never the
    one the channel's index claims; the file must be the store's (else the one in the index)."""
    ours = {n.build_string: n for n in req.built}
    for recs in records.values():
        for rec in recs:
            if not (ref_is_local(req, rec.url) and rec.url.startswith("file://")):
                continue
            node = ours.get(str(rec.build))
            rel = f"{rec.subdir}/{rec.file_name}"
            known = store_sha(req.store, node.build_id, rel) if node and req.store else None
            want = ("the build store", known) if known else \
                ("the channel's repodata.json", rec.sha256.hex() if rec.sha256 else None)
            got = check_copy(url_to_path(rec.url), [want],
                             fix=f"nothing written; `deepep-env build {req.env}` copies it again from the store")
            rec.sha256, rec.md5, rec.size = bytes.fromhex(got.sha256), bytes.fromhex(got.md5), got.size


def rewrite_urls(req: LockRequest, records: dict[str, list]) -> None:
    """Name each package by its channel's lock URL (the local channel → the spec's publish_url)."""
    refs = sorted(req.channels, key=lambda r: len(r.source), reverse=True)
    for recs in records.values():
        for rec in recs:
            for ref in refs:
                if rec.url.startswith(ref.source):
                    if ref.source != ref.lock_url:
                        rec.url = ref.lock_url + rec.url[len(ref.source):]
                        rec.channel = ref.lock_url
                    break


def lock_request(req: LockRequest, path: Path, *, client_obj: Optional[Client] = None,
                 project: Optional[Project] = None) -> LockResult:
    records = solve_request(req, client_obj=client_obj)
    hash_local_files(req, records)
    rewrite_urls(req, records)
    warnings: list[str] = []
    machine_local = any(c.machine_local for c in req.channels)
    if machine_local:
        local = [c.lock_url for c in req.channels if c.machine_local]
        warnings.append(f"the lock names {', '.join(local)}: it is valid on this machine only "
                        "(give the spec a publish_url so committed locks name a URL)")
    for node in req.built:
        for subdir, recs in records.items():
            if not any(str(r.build) == node.build_string for r in recs):
                warnings.append(f"{node.package} {node.version} {node.build_string} is not in the {subdir} solution "
                                "(nothing depends on it)")
    platforms = {p.name: p.strings for p in req.platforms}
    channels = [c.lock_url for c in req.channels]
    meta = {"spec_version": req.spec_version, "channels": channels, "machine_local": machine_local,
            "builds": {n.package: {"version": n.version, "build": n.build_string, "id": n.build_id}
                       for n in req.built}}
    by_platform = {req.platform(sub).name: recs for sub, recs in records.items()}
    _, changed = write_env(path, req.env, EnvSection(channels, by_platform, meta),
                           req.workspace_platforms)
    if project is not None and path.resolve() == default_lock_path(project, req.env).resolve():
        write_env_inputs(project, req.env, req.plan_nodes)   # what each locked build was made from
    packages = {p: [{"name": r.name.normalized, "version": str(r.version), "build": str(r.build)}
                    for r in sorted(recs, key=lambda r: r.name.normalized)] for p, recs in by_platform.items()}
    return LockResult(env=req.env, path=path, changed=changed, channels=channels, platforms=platforms,
                      packages=packages, machine_local=machine_local, warnings=warnings)


def lock_env(env: str, project: Project, *, channel: Optional[str | Path] = None,
             output: Optional[str | Path] = None) -> LockResult:
    """``deepep-env lock ENV``: solve the spec's packages into the project's ``pixi.lock`` (ENV's
    environment replaced, every other kept)."""
    r = load_resolved(env, project)
    cl = make_client([c for c in r.channels if "://" in c] + ([r.publish_url] if r.publish_url else []))
    req = request_for_env(r, project, channel_dir=Path(channel) if channel else None, client_obj=cl)
    path = Path(output) if output else default_lock_path(project, r.name)
    moved = moved_ids(project, r.name, req.plan_nodes)   # ids this machine plans that the lock does not have
    try:
        res = lock_request(req, path, client_obj=cl, project=project)
    except UserError as exc:
        if not moved:
            raise
        raise moved_refusal(r.name, moved, f"the channel has no build with this machine's id (rattler: {exc.message})",
                            r.host.prepare) from None
    res.warnings += [f"build id moved: {m.line()} (to keep the lock's: {m.fix(r.host.prepare)})" for m in moved]
    return res
