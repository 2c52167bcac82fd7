"""Take one environment's lock from a pixi.lock (and lockfiles/build-inputs.json) that a GPU machine
wrote, into this checkout's: that environment's records, lock metadata and build-inputs record
replace ours; every other environment is kept as it is (the same writer `deepep-env lock` uses).

Usage (repo root):  python benchmarks/gpu/take_env.py DIR ENV [ENV ...]
  DIR holds the run's pixi.lock and build-inputs.json (lock_enough.sh relock returns both in $OUT).

Why: every GPU call starts from this checkout's tree, and a relock of one environment takes a call of
its own; the calls of one session all start from the same lock and each returns it with one
environment relocked. Taking each call's environment gives the lock that relocking them one after
another would have written. Refused, nothing written, when DIR's lock lacks ENV or its tool id is not
ours (the environment was relocked from another checkout)."""
from __future__ import annotations

import sys
from pathlib import Path

from deepep_env.base.errors import UserError
from deepep_env.base.readfile import read_json
from deepep_env.base.project import Project, find_project
from deepep_env.formats.build_inputs import _write, read_inputs
from deepep_env.formats.lockfile import _existing_sections, write_env
from deepep_env.lock.request import workspace_platforms


def take(project: Project, src: Path, env: str) -> None:
    if not (src / "pixi.lock").is_file():
        raise UserError(f"{src}: no pixi.lock", accepted="the folder a relock call returned (pixi.lock, build-inputs.json)")
    theirs, _ = _existing_sections(src / "pixi.lock")
    ours, _ = _existing_sections(project.pixi_lock)
    if env not in theirs:
        raise UserError(f"{src / 'pixi.lock'} has no environment {env!r}", accepted=", ".join(sorted(theirs)))
    tool = lambda s: (s.meta.get("builds") or {}).get("deepep-env")   # noqa: E731
    if env in ours and tool(theirs[env]) != tool(ours[env]):
        raise UserError(f"{src / 'pixi.lock'}: {env!r} was locked with another deepep-env build "
                        f"({(tool(theirs[env]) or {}).get('build')} vs ours {(tool(ours[env]) or {}).get('build')})",
                        accepted="a relock made from this checkout's tree")
    data = read_json(src / "build-inputs.json", what="build inputs record", accepted="the run's build-inputs.json")
    inputs = data.get("environments") if isinstance(data, dict) else None
    if not isinstance(inputs, dict) or not isinstance(inputs.get(env), dict):
        raise UserError(f"{src / 'build-inputs.json'} has no record for {env!r}",
                        accepted="the build-inputs.json the same relock returned")
    write_env(project.pixi_lock, env, theirs[env], workspace_platforms(project))
    envs = dict(read_inputs(project))
    envs[env] = inputs[env]
    _write(project, envs)
    print(f"{env}: taken from {src}")


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    project = find_project(Path.cwd())
    try:
        for env in argv[1:]:
            take(project, Path(argv[0]), env)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
