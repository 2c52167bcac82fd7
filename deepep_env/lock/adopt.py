"""`deepep-env lock ENV --from PATH`: take ENV's lock from a pixi.lock written elsewhere.

A GPU environment is built and locked on its GPU image (`deepep-env build ENV && deepep-env lock
ENV` on that machine); the lock then travels back to the checkout. When several environments are
relocked on several machines, each from the same tree, every machine returns the whole pixi.lock
with its one environment new: copying files would keep only the last. This takes ENV's records,
its lock metadata and its build-inputs record (``lockfiles/build-inputs.json``, beside the lock or in
its ``lockfiles/``) into this checkout's lock, every other environment kept, with the writer
``lock`` uses.

Taken only when it is this checkout's: the source must lock the deepep-env build this checkout
makes, and ENV as taken must pass ``lock ENV --check`` here (this checkout's spec, recipes and
pinned sources give the same ids; every package URL is a file of the spec's channels; the build
channel's files, where this machine has them, are the lock's bytes). A package this checkout's lock
already names with other bytes for the same build is said in a note. Otherwise one line, and the
lock and the record are left as they were (their bytes restored when the check refuses after
writing)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from deepep_env.base.atomic import write_bytes
from deepep_env.base.errors import UserError
from deepep_env.base.project import Project
from deepep_env.formats.build_inputs import inputs_path, put_env_record, read_inputs_file
from deepep_env.formats.lockfile import EnvSection, env_sections, write_env
from deepep_env.lock.check import check_lock
from deepep_env.lock.tool import TOOL


@dataclass(frozen=True)
class Adopted:
    env: str
    source: Path
    changed: bool
    notes: list[str] = field(default_factory=list)


def _source_files(source: Path) -> tuple[Path, Path]:
    lock = source / "pixi.lock" if source.is_dir() else source
    if not lock.is_file():
        raise UserError(f"{source}: no pixi.lock there", field="--from",
                        accepted="a pixi.lock written by `deepep-env lock`, or the folder that holds it")
    for cand in (lock.parent / "build-inputs.json", lock.parent / "lockfiles" / "build-inputs.json"):
        if cand.is_file():
            return lock, cand
    raise UserError(f"{lock}: no build-inputs.json beside it or in its lockfiles/", field="--from",
                    accepted="the build-inputs.json the same `deepep-env lock` wrote (lockfiles/build-inputs.json)")


def _tool_build(section: EnvSection) -> Optional[str]:
    builds = section.meta.get("builds") or {}
    tool = builds.get(TOOL) if isinstance(builds, dict) else None
    return tool.get("build") if isinstance(tool, dict) else None


def _their_builds(inputs: Path, env: str) -> Any:
    envs = read_inputs_file(inputs)          # its stamp, its shape, each id against its pre-image
    if not isinstance(envs.get(env), dict):
        raise UserError(f"{inputs}: no record for environment {env!r}", field="environments",
                        accepted="the build-inputs.json the same relock wrote")
    return envs[env]


def _other_bytes(theirs: EnvSection, ours: dict[str, EnvSection]) -> list[str]:
    """A note for each package whose name, version and build string this checkout's lock already has
    (in any environment) with another sha256: the same build id with other bytes is either a correction
    made on the GPU machine (the lock's earlier bytes were wrong, as GPU round 4's patchelf) or an edit,
    and the reviewer must see which. (A moved URL is a check reason; a build channel here that has the
    file compares it: artifact-changed.)"""
    known = {(r.name.normalized, str(r.version), str(r.build)): r.sha256 for s in ours.values()
             for recs in s.records.values() for r in recs if r.sha256}
    notes = []
    for recs in theirs.records.values():
        for r in recs:
            have = known.get((r.name.normalized, str(r.version), str(r.build)))
            if have is not None and r.sha256 != have:
                notes.append(f"{r.name.normalized} {r.version} {r.build}: sha256 {have.hex()[:16]}… here, "
                             f"{(r.sha256 or b'').hex()[:16]}… as taken (the same build id with other bytes: review it)")
    return sorted(set(notes))


def adopt_env(project: Project, env: str, source: Path, *, platforms: list) -> Adopted:
    """ENV from ``source`` into ``project``'s pixi.lock and build-inputs record, checked (module doc)."""
    lock, inputs = _source_files(source)
    theirs = env_sections(lock)
    if env not in theirs:
        raise UserError(f"{lock}: no environment {env!r}", field="--from",
                        accepted=", ".join(sorted(n for n in theirs if n != "default")) or "none")
    ours = env_sections(project.pixi_lock)
    if env in ours and _tool_build(theirs[env]) != _tool_build(ours[env]):
        raise UserError(f"{lock}: {env!r} was locked with deepep-env {_tool_build(theirs[env])}, this checkout's lock "
                        f"has {_tool_build(ours[env])}", field="--from",
                        accepted="a lock made from this checkout's tree (or run `deepep-env lock all --only "
                                 "deepep-env` on both sides first)")
    notes = _other_bytes(theirs[env], ours)
    builds = _their_builds(inputs, env)
    keep = {p: (p.read_bytes() if p.is_file() else None) for p in (project.pixi_lock, inputs_path(project))}
    try:
        put_env_record(project, env, builds)
        _, changed = write_env(project.pixi_lock, env, theirs[env], platforms)
        checked = check_lock(env, project)
        if not checked.fresh:
            kinds = ", ".join(sorted({r.kind for r in checked.reasons}))
            raise UserError(f"{lock}: {env!r} as locked there does not satisfy this checkout ({kinds}); nothing taken",
                            field="--from", accepted=f"a relock made from this checkout's tree (`deepep-env lock {env} "
                                                     f"--check --output {lock}` says what differs)")
    except BaseException:
        for path, data in keep.items():
            if data is not None:
                write_bytes(path, data)
            else:
                path.unlink(missing_ok=True)
        raise
    return Adopted(env, lock, changed, notes)


__all__ = ["Adopted", "adopt_env"]
