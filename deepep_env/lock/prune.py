"""``deepep-env lock --prune``: leave out of pixi.lock (and lockfiles/build-inputs.json) every environment
whose spec is gone — a renamed or removed ``env_specs/ENV.toml`` — as pixi drops an environment its manifest
no longer has. Every other environment is kept byte for byte; nothing is solved."""
from __future__ import annotations

from typing import TYPE_CHECKING

from deepep_env.base.project import pixi_env_name
from deepep_env.formats.build_inputs import drop_env_inputs
from deepep_env.formats.lockfile import env_sections, write_envs
from deepep_env.lock.request import workspace_platforms

if TYPE_CHECKING:  # annotations only
    from deepep_env.base.project import Project


def orphans(project: Project) -> list[str]:
    """The lock's environments (besides pixi's ``default``) that no spec of the project makes."""
    have = {pixi_env_name(s) for s in project.spec_names()}
    return sorted(e for e in env_sections(project.pixi_lock) if e != "default" and e not in have)


def prune(project: Project) -> list[str]:
    """Drop :func:`orphans` from the lock and the build-inputs record; returns them."""
    gone = orphans(project)
    if gone:
        write_envs(project.pixi_lock, {}, workspace_platforms(project), drop=gone)
        drop_env_inputs(project, gone)
    return gone


__all__ = ["orphans", "prune"]
