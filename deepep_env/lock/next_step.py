"""The one next command for an environment that is not installed yet, and only one the tool will run.

``plan``'s lock row, ``doctor``'s ``env.not-installed``, ``install``'s refusal, ``activate``/``run`` on
a prefix with no install and ``pixi.toml``'s comments all ask this module (and render it with
:meth:`NextStep.note` and :meth:`NextStep.then_install`), so no suggestion names a step that the tool would then refuse (issue 40):

- locked (``pixi.lock`` has the environment) → ``deepep-env install ENV``, after the spec's ``[host] prepare``
  where the host externals it names are missing (a fresh machine), and after ``deepep-env fetch ENV``
  where the lock's URL is a placeholder, nothing here has its packages and their sources are not cached;
- ``pixi.lock`` unreadable → its own error (``deepep-env lock ENV --check`` names it);
- a source or patch not pinned by content → ``deepep-env fetch ENV --from DIR`` with what DIR must
  hold (``build`` would refuse an unpinned node, so ``build && lock`` is never suggested then);
- otherwise → ``deepep-env build ENV && deepep-env lock ENV``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Sequence

from deepep_env.base.errors import UserError
from deepep_env.builder.realise import sources_to_fetch
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
    """``install``, after what a fresh machine must do first for the install to work: the spec's ``[host]
    prepare`` where the host externals it names are missing (the install would refuse without them, and
    the env could not run: its Python is the host's), and ``fetch`` where nothing serves the lock's
    packages and their sources are not cached (the rebuild would refuse)."""
    install = f"deepep-env install {env}"
    try:
        r = ws.resolved(env)
        nodes = ws.plan_of(r).nodes
        fetch = sources_to_fetch(ws.project, ws.lock(ws.project.pixi_lock).env(env), nodes)
    except UserError:
        return NextStep("locked", install, "locked")
    lacks = missing_host_paths(r, nodes)
    steps = [r.host.prepare] if lacks and r.host.prepare else []
    why = [f"this machine lacks its host externals ({'; '.join(lacks)})"] if lacks else []
    detail = ["first provide the host externals where the spec says"] if lacks and not r.host.prepare else []
    if fetch:
        steps.append(f"deepep-env fetch {env}")
        why.append(f"no channel serves its packages and their sources are not cached ({'; '.join(fetch[:3])})")
        detail.append(f"without network: `deepep-env fetch {env} --from DIR`, DIR holding the upstream archives")
    if not why:
        return NextStep("locked", install, "locked")
    return NextStep("locked", " && ".join(steps + [install]), "locked, but " + "; and ".join(why), "; ".join(detail))


def missing_host_paths(r: Any, recorded: Sequence[Any] = ()) -> list[str]:
    """The spec's host-provided Python, CUDA toolkit and rdma-core headers that are not on this machine:
    a cheap look at the paths the spec and the plan's nodes name (the build's full fingerprint is
    hostprint's). rdma-core's headers count where a node of ``recorded`` (the plan the lock was built
    from) read them, at the prefix that node reads (its ``rdma_core_prefix``: ``DEEPEP_ENV_RDMA_CORE``
    or /usr): DeepEP's build with a host or wheel CUDA does. A wheel CUDA is a package of the graph,
    never a host path."""
    out = []
    exe = r.python.executable if r.python.provider == "host" else None
    if exe and not os.access(exe, os.X_OK):
        out.append(f"python: {exe}")
    if r.cuda.provider == "host" and r.cuda.prefix and not os.path.isfile(os.path.join(r.cuda.prefix, "bin", "nvcc")):
        out.append(f"cuda: {r.cuda.prefix}")
    readers = [n for n in recorded if _read_rdma_headers(n)]
    rdma = os.path.join(str(readers[0].meta.get("rdma_core_prefix") or "/usr"), "include", "infiniband") if readers else ""
    if rdma and not os.path.isdir(rdma):
        out.append(f"rdma_core: {rdma}")
    return out


def _read_rdma_headers(node: Any) -> bool:
    """Whether the build of ``node`` read rdma-core headers (its recorded fact names a digest)."""
    ident = node.externals.get("rdma_core")
    fp = ident.get("fingerprint") if isinstance(ident, dict) else None
    return isinstance(fp, dict) and bool(fp.get("headers")) and not str(fp["headers"]).startswith("missing:")
