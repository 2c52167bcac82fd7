"""An environment's prefix as the tool reads it: the marker ``install`` wrote, else — for a prefix pixi
installed from the lock — the same fields from the project's spec, so pixi and deepep-env share
``.pixi/envs/ENV``; a prefix with nothing installed is refused with the one step that installs it.

The stdlib-only activation (``formats/prefix.py``: :func:`marked_prefix_meta`) reads markers only and
raises :class:`NeedsProject` where the spec or the lock would say more; this module is where they are
read (issue 50: the activation package holds no spec, lock or installer code).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional

from deepep_env.base.errors import UserError
from deepep_env.base.project import Project
from deepep_env.envspec.resolved import spec_marker
from deepep_env.formats.installed import unmarked_prefix_meta
from deepep_env.formats.prefix import NeedsProject, PrefixMeta, find_prefix, marked_prefix_meta
from deepep_env.lock.next_step import next_step
from deepep_env.lock.workspace import workspace

if TYPE_CHECKING:  # annotations only
    from deepep_env.lock.workspace import Workspace


def prefix_meta(env: str, pfx: "str | os.PathLike[str]", cwd: Optional[str] = None,
                environ: Optional[Mapping[str, str]] = None, ws: Optional[Workspace] = None) -> PrefixMeta:
    """The prefix's marker; for a prefix pixi installed, the same fields from the project's spec."""
    try:
        return marked_prefix_meta(env, pfx, cwd, environ)
    except NeedsProject as need:
        return resolve(need, ws)


def resolve(need: NeedsProject, ws: Optional[Workspace] = None) -> PrefixMeta:
    """What the activation could not read alone: the spec's marker fields, or the next-step refusal."""
    project = Project(need.root)
    if need.kind == "missing":
        raise with_next_step(need.cause, need.env, project) from None
    r = workspace(project, ws).resolved(need.env)
    return unmarked_prefix_meta(need.env, r.name, Path(need.prefix), spec_marker(r))


def find_meta(env: str, prefix: "Optional[str | os.PathLike[str]]" = None, cwd: Optional[str] = None,
              environ: Optional[Mapping[str, str]] = None) -> PrefixMeta:
    """``env``'s prefix (``--prefix``, ``$DEEPEP_ENV_PREFIX``, the project's) and its marker."""
    environ = os.environ if environ is None else environ
    return prefix_meta(env, find_prefix(env, prefix, cwd, environ), cwd, environ)


def with_next_step(err: UserError, env: str, project: Project) -> UserError:
    """``err`` (the prefix has no install) with the one step that gets ``env`` installed from this
    checkout: ``install`` when it is locked, else what comes before it (never a refused install)."""
    step = next_step(project, env)
    if step.state == "locked":
        return err
    return UserError(f"{err.message}; {env} is {step.why}", file=err.file,
                     accepted=f"`{step.command}` first{step.note()}, {step.then_install(env)}; or pass --prefix")


__all__ = ["find_meta", "prefix_meta", "resolve", "with_next_step"]
