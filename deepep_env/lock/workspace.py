"""One command's view of the project, as a value (issue 29.2): each spec resolved at most once,
each build plan made once per (spec, host provider, resolution provider), the lock read once.

A command makes one :class:`Workspace` and passes it to the steps that need a spec, a plan or the
lock (install → lock check, ``pixi sync`` → the workspace platforms, ``plan``, ``task``, doctor);
a step called without one makes its own, so each public function keeps its signature.

It sits in the lock layer: it reads ``pixi.lock``, and ``lock/`` itself (check, request) takes it.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from deepep_env.base.errors import UserError
from deepep_env.builder.plan import plan as build_plan
from deepep_env.envspec.resolve import load_resolved
from deepep_env.formats import lockfile   # read through the module: one seam for a counting test (tests/views/test_workspace.py)

if TYPE_CHECKING:  # annotations only
    from deepep_env.builder.plan import BuildPlan, HostInputs, Resolutions
    from deepep_env.formats.lockfile import LockData
    from deepep_env.base.project import Project
    from deepep_env.envspec.resolved import ResolvedSpec


class Workspace:
    """The project, with what one command has resolved, planned and read so far."""

    def __init__(self, project: "Project") -> None:
        self.project = project
        self._resolved: dict[str, Union["ResolvedSpec", UserError]] = {}
        self._plans: dict[tuple[str, Any, Any], "BuildPlan"] = {}
        self._locks: dict[Path, "LockData"] = {}

    def resolved(self, name: str) -> "ResolvedSpec":
        """``load_resolved(name, project)``, once: a spec that does not resolve raises its error each time."""
        got = self._resolved.get(name)
        if got is None:
            try:
                got = load_resolved(name, self.project)
            except UserError as err:
                got = err
            self._resolved[name] = got
        if isinstance(got, UserError):
            raise got
        return got

    def plan(self, name: str, host: "Optional[HostInputs]" = None,
             resolved: "Optional[Resolutions]" = None) -> "BuildPlan":
        """``builder.plan.plan(resolved(name), project, host, resolved)``, once per providers: plans with
        other host or resolution providers are other values. Unhashable providers are not memoized."""
        key = (name, host, resolved)
        try:
            hash(key)
        except TypeError:
            return build_plan(self.resolved(name), self.project, host, resolved)
        if key not in self._plans:
            self._plans[key] = build_plan(self.resolved(name), self.project, host, resolved)
        return self._plans[key]

    def plan_of(self, r: "ResolvedSpec", host: "Optional[HostInputs]" = None,
                resolved: "Optional[Resolutions]" = None) -> "BuildPlan":
        """The plan of ``r``: memoized when ``r`` is this workspace's resolution of its spec."""
        if self._resolved.get(r.name) is r:
            return self.plan(r.name, host, resolved)
        return build_plan(r, self.project, host, resolved)

    def lock(self, path: Optional[Path] = None) -> "LockData":
        """The lock at ``path`` (default the project's ``pixi.lock``), read once."""
        p = (Path(path) if path is not None else self.project.pixi_lock).absolute()
        if p not in self._locks:
            self._locks[p] = lockfile.read_lock(p)
        return self._locks[p]


def workspace(project: "Project", ws: Optional[Workspace] = None) -> Workspace:
    """``ws`` when given (and of this project), else a new one."""
    return ws if ws is not None and ws.project == project else Workspace(project)
