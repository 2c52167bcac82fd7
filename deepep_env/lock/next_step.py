"""The one next command for an environment that is not installed yet, and only one the tool will run.

``plan``'s lock row, ``doctor``'s ``env.not-installed``, ``install``'s refusal, ``activate``/``run`` on
a prefix with no install and ``pixi.toml``'s comments all ask this module (and render it with
:meth:`NextStep.note` and :meth:`NextStep.then_install`), so no suggestion names a step that the tool would then refuse (issue 40):

- locked (``pixi.lock`` has the environment) → ``deepep-env install ENV``, after the spec's ``[host] prepare``
  where the host externals it names are missing (a fresh machine);
- ``pixi.lock`` unreadable → its own error (``deepep-env lock ENV --check`` names it);
- a source or patch not pinned by content → ``deepep-env fetch ENV --from DIR`` with what DIR must
  hold (``build`` would refuse an unpinned node, so ``build && lock`` is never suggested then);
- otherwise → ``deepep-env build ENV && deepep-env lock ENV``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from deepep_env.base.errors import UserError
from deepep_env.lock.workspace import Workspace, workspace

if TYPE_CHECKING:  # annotations only
    from deepep_env.base.project import Project


@dataclass(frozen=True)
class NextStep:
    state: str        # "locked", "unreadable", "unpinned", "unlocked" or "unplannable"
    command: str      # the command to run next (backquoted in messages)
    why: str          # one predicate, without the env's name ("ENV is <why>"): what stands before an install
    detail: str = ""  # what the command's placeholders mean, if it has any

    def note(self) -> str:
        """`` (detail)`` to follow the command, or nothing."""
        return f" ({self.detail})" if self.detail else ""

    def then_install(self, env: str) -> str:
        """The commands after this one up to an install: ``then `build && lock`, `install``` after a fetch."""
        after = f"`deepep-env build {env} && deepep-env lock {env}`, " if self.state == "unpinned" else ""
        return f"then {after}`deepep-env install {env}`"


def next_step(project: Project, env: str, ws: Optional[Workspace] = None) -> NextStep:
    """What moves ``env`` (a spec name) toward an installed prefix from where this checkout is."""
    ws = workspace(project, ws)
    try:
        locked = project.pixi_lock.is_file() and env in ws.lock(project.pixi_lock).envs
    except UserError as exc:   # a lock that cannot be read: its own error is the thing to fix first
        return NextStep("unreadable", f"deepep-env lock {env} --check", f"blocked by an unreadable pixi.lock ({exc.message})")
    if locked:
        return _locked_step(ws, env)
    try:
        unpinned = sorted({u for n in ws.plan_of(ws.resolved(env)).nodes for u in n.unpinned
                           if not u.startswith("dependency ")})
    except UserError as exc:
        return NextStep("unplannable", f"deepep-env plan {env}", f"without a build plan ({exc.message})")
    if unpinned:
        return NextStep("unpinned", f"deepep-env fetch {env} --from DIR",
                        f"not buildable yet: {', '.join(unpinned)} not pinned by content",
                        f"DIR: a folder holding the upstream archive; with network, `deepep-env fetch {env}`")
    return NextStep("unlocked", f"deepep-env build {env} && deepep-env lock {env}", "not in pixi.lock yet")


def _locked_step(ws: Workspace, env: str) -> NextStep:
    """``install``; on a machine that lacks the host externals the spec names (a fresh machine), the
    spec's ``[host] prepare`` before it: the install would refuse without them (and the env could not
    run: its Python is the host's)."""
    install = f"deepep-env install {env}"
    try:
        r = ws.resolved(env)
    except UserError:
        return NextStep("locked", install, "locked")
    lacks = missing_host_paths(r)
    if not lacks:
        return NextStep("locked", install, "locked")
    why = f"locked, but this machine lacks its host externals ({'; '.join(lacks)})"
    if r.host.prepare:
        return NextStep("locked", f"{r.host.prepare} && {install}", why)
    return NextStep("locked", install, why, "first provide them where the spec says")


def missing_host_paths(r: Any) -> list[str]:
    """The spec's host-provided Python and CUDA toolkit that are not on this machine (a cheap look at
    the paths the spec names; the build's full fingerprint is hostprint's)."""
    out = []
    exe = r.python.executable if r.python.provider == "host" else None
    if exe and not os.access(exe, os.X_OK):
        out.append(f"python: {exe}")
    if r.cuda.provider == "host" and r.cuda.prefix and not os.path.isfile(os.path.join(r.cuda.prefix, "bin", "nvcc")):
        out.append(f"cuda: {r.cuda.prefix}")
    return out
