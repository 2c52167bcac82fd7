"""deepep-env's own package in the lock, kept this checkout's: ``deepep-env lock ENV --only deepep-env``.

The tool package (recipes/deepep-env) is built from the ``deepep_env`` tree itself, so every change
to the code is a new build of it. A lock that names an older build names bytes no fresh clone can
make (its source is gone), so "the lock is enough" needs the lock to name *this* checkout's build.
Every other package of an environment needs a GPU image to rebuild; this one is noarch, builds in
about a second on any machine and is byte-identical across machines (docs/benchmarks.md runs K, L).
So it is re-locked in place: built here, and its record swapped into every environment that locks
it — every other record, the channels and the platforms kept byte for byte. DeepEP requires it by
version range (``deepep-env >=0.2,<1``), so no other record's constraint changes.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from deepep_env.base.errors import UserError
from deepep_env.builder.build import build_graph
from deepep_env.builder.plan import finish_nodes, tool_node
from deepep_env.formats.build_inputs import swap_tool_inputs
from deepep_env.formats.lockfile import EnvSection, env_sections, write_envs
from deepep_env.lock.request import workspace_platforms

if TYPE_CHECKING:  # annotations only: no import at run time
    from rattler import RepoDataRecord

    from deepep_env.builder.plan import BuildNode
    from deepep_env.base.project import Project

TOOL = "deepep-env"


@dataclass
class ToolRelock:
    build: str                     # this checkout's build string of the tool package
    changed: list[str]             # environments whose record was swapped
    current: list[str]             # environments that already lock this build


def this_checkout_tool(project: Project) -> Optional[BuildNode]:
    """The tool's build node for this checkout (None when the project has no recipes/deepep-env)."""
    node = tool_node(project)
    return finish_nodes([node])[0] if node is not None else None


def tool_status(project: Project, lock: Path) -> dict[str, str]:
    """env -> the tool build the lock names (environments that lock the tool)."""
    sections = env_sections(lock)
    return {env: str(r.build) for env, s in sections.items() for recs in s.records.values() for r in recs
            if r.name.normalized == TOOL}


def _built_records(project: Project, node: BuildNode) -> Callable[[], RepoDataRecord]:
    """Build the tool package here (the builder's channel, indexed) and return a reader that gives a
    new RepoDataRecord of it on every call: each environment's lock entry gets its own record, since
    :func:`_swapped` sets the record's URL to that environment's channel (one shared record gave every
    environment the last one's URL: found locking gcp-b200 beside the h200 environments)."""
    from rattler import Channel, RepoData

    report = build_graph([node], store=project.store, channel=project.channel, source_cache=project.source_cache,
                         state=project.state, offline=True, name=TOOL)
    (out,) = [f for n in report.nodes for f in n.outputs]
    sub = Path(out).parent.name

    def read() -> RepoDataRecord:
        repo = RepoData.from_path(str(Path(project.channel) / sub / "repodata.json"))
        recs = [r for r in repo.into_repo_data(Channel(Path(project.channel).resolve().as_uri()))
                if r.file_name == Path(out).name]
        if not recs:
            raise UserError(f"{out}: built, but not in the channel's index", file=Path(project.channel) / sub)
        return recs[0]

    read()   # refused here, before any environment is rewritten
    return read


def relock_tool(project: Project, envs: Optional[list[str]] = None, *, lock: Optional[Path] = None) -> ToolRelock:
    """Build this checkout's tool package and swap it into ``envs`` (default: every environment that
    locks it); nothing else in the lock changes. The build-inputs record is the project lock's: a lock
    written elsewhere (``--output``) leaves it alone, as ``lock_env`` does."""
    path = lock or Path(project.pixi_lock)
    node = this_checkout_tool(project)
    if node is None:
        raise UserError("the project has no recipes/deepep-env", accepted="a project with the tool's recipe")
    locked = tool_status(project, path)
    wanted = envs or sorted(locked)
    unknown = [e for e in wanted if e not in locked]
    if unknown:
        raise UserError(f"environment {unknown[0]!r} does not lock {TOOL}", file=path,
                        accepted=", ".join(sorted(locked)) or "none")
    todo = [e for e in wanted if locked[e] != node.build_string]
    if todo:
        record = _built_records(project, node)
        sections = env_sections(path)
        write_envs(path, {env: _swapped(sections[env], record(), node) for env in todo}, workspace_platforms(project))
        if path.resolve() == Path(project.pixi_lock).resolve():   # as lock_env: the record is the project lock's
            for env in todo:
                swap_tool_inputs(project, env, node)
    return ToolRelock(node.build_string, todo, [e for e in wanted if e not in todo])


def _swapped(s: EnvSection, built: RepoDataRecord, node: BuildNode) -> EnvSection:
    """``s`` with this checkout's tool package (``built``) in place of the one it locks."""
    records = {}
    own = [c.rstrip("/") for c in s.channels]
    for pname, recs in s.records.items():
        out = []
        for r in recs:
            if r.name.normalized == TOOL:
                base = r.url.rsplit("/", 2)[0]   # the channel URL the lock names, kept when it is the env's
                if own and base not in own:      # (a lock written with another env's URL is mended)
                    base = own[0]
                built.url = f"{base}/{built.subdir}/{built.file_name}"
                built.channel = r.channel
                out.append(built)
            else:
                out.append(r)
        records[pname] = out
    meta = dict(s.meta)
    builds = dict(meta.get("builds") or {})
    if TOOL in builds:
        builds[TOOL] = {**builds[TOOL], "build": node.build_string, "id": node.id}
        meta["builds"] = builds
    return EnvSection(s.channels, records, meta)


__all__ = ["ToolRelock", "relock_tool", "tool_status", "this_checkout_tool"]
