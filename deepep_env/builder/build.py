"""The builder: walk a build graph in dependency order, build what the store does not have.

Nix-style (docs/build-id.md): every node has an id computed from its inputs before anything is
built. An id already in the store is *cached* (its outputs are copied into the channel if they are
missing); otherwise the node is *built* — sources staged and patched, rattler-build run against a
channel holding exactly its dependencies' outputs, the result moved into the store atomically,
then published to the local channel and indexed. Changing one recipe changes its id and the id of
everything that depends on it, so exactly those rebuild.

Entry points:
- :func:`build_env` — the graph of an env spec (``deepep-env build ENV``); also writes the build
  manifest ``<state>/builds/<ENV>.json`` that ``publish`` reads.
- :func:`build_graph` — any list of :class:`~deepep_env.builder.plan.BuildNode`.
- :func:`build_recipes` — every recipe folder under a directory (``deepep-env build --recipes DIR``).

Layout under the state dir (``<project>/.deepep-env`` unless overridden): ``store/``, ``channel/``,
``sources/``, ``logs/<10 hex id>.log`` (rattler-build's log of each build), ``work/`` (staging and
rattler-build scratch, removed after a successful build), ``locks/``, ``builds/<ENV>.json``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Iterator, Optional, Sequence

from deepep_env.base.atomic import write_text
from deepep_env.builder.channel import Channel, index, make_build_channel
from deepep_env.builder.check import compare_packages, compare_with_sha
from deepep_env.builder.driver import declared_virtual_packages, note_in_live_log, private_package_cache, recipe_context
from deepep_env.builder.driver import run as run_rattler_build
from deepep_env.builder.resolution import Resolution, differences, from_rendered, rendered_recipe, resolve
from deepep_env.builder.graph import nodes_from_recipe_dirs, recipe_dirs_under
from deepep_env.builder.cuda_home import library_headers, make_home, reads_wheel_cuda
from deepep_env.builder.python_home import cuda_library_headers, make_python, reads_wheel_torch
from deepep_env.builder.normalize import BUILD_INPUTS_MEMBER, epoch_for, normalize_conda, recipe_members
from deepep_env.builder.store import Store, StoreEntry
from deepep_env.builder.plan import BuildNode, finish_node
from deepep_env.builder.plan import live_host, plan as build_plan
from deepep_env.base.errors import SolveError, UserError
from deepep_env.builder import buildroot
from deepep_env.builder.wheel_check import check_wheels
from deepep_env.builder.buildroot import DEFAULT_BUILD_ROOT  # noqa: F401 - re-exported (builder.__init__)
from deepep_env.formats.stamps import BUILD_MANIFEST, BUILD_REPORT
from deepep_env.base.hashing import short_id, tree_sha256
from deepep_env.base.channels.urls import channel_mirrors, channel_url, file_url
from deepep_env.formats.lockfile import read_lock
from deepep_env.sources import SourceCache, fetch, primary_source, require_present, stage, wants_for_nodes
from deepep_env.envspec import load_resolved

if TYPE_CHECKING:  # annotations only: no import at run time
    from deepep_env.base.project import Project


# (event, node, result): "start", "done" (result: NodeResult), "check", "log" (result: a line of the
# build's log, as it is written).
Progress = Callable[[str, BuildNode, Any], None]


@dataclass
class NodeResult:
    package: str
    id: str
    version: str
    status: str                       # "built" | "cached" | "restored" (cached, its damaged channel copy replaced)
    seconds: float
    outputs: list[str]                # channel-relative files, "linux-64/x-1.0-h…_0.conda"
    log: Optional[str] = None
    notes: list[str] = field(default_factory=list)   # what the driver noticed (e.g. a staging rerun)

    def to_json(self) -> dict[str, Any]:
        d = {"package": self.package, "id": self.id, "version": self.version, "status": self.status,
             "seconds": round(self.seconds, 3), "outputs": self.outputs}
        if self.log:
            d["log"] = self.log
        if self.notes:
            d["notes"] = self.notes
        return d


@dataclass
class CheckResult:
    package: str
    id: str
    identical: bool
    differences: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"package": self.package, "id": self.id, "identical": self.identical, "differences": self.differences}


@dataclass
class BuildReport:
    name: str
    channel: Path
    store: Path
    nodes: list[NodeResult] = field(default_factory=list)
    checks: list[CheckResult] = field(default_factory=list)
    manifest: Optional[Path] = None

    @property
    def built(self) -> list[NodeResult]:
        return [n for n in self.nodes if n.status == "built"]

    @property
    def reproducible(self) -> bool:
        return all(c.identical for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": BUILD_REPORT.stamp, "name": self.name, "channel": str(self.channel),
            "store": str(self.store), "nodes": [n.to_json() for n in self.nodes],
            "checks": [c.to_json() for c in self.checks],
            "manifest": str(self.manifest) if self.manifest else None,
        }


def build_root() -> Path:
    """Where every build runs (:mod:`deepep_env.builder.buildroot`: a moved root moves every id)."""
    return buildroot.ensure()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One builder per id at a time (two shells building the same env must not share a work dir)."""
    buildroot.private_folder(path.parent.parent, path.parent.name)     # 0700, this user's (issue 52.7)
    try:        # never through a link: a planted .locks/<id>.lock -> /etc/x would be created or opened
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise UserError(f"cannot open the build lock {path} ({exc.strerror or exc}; a link there is refused)",
                        field=buildroot.ENV_VAR, accepted="a build root of this user's alone; remove that entry") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _require_ids(nodes: Sequence[BuildNode], env: Optional[str]) -> None:
    for n in nodes:
        if n.id is None:
            what = n.unpinned[0] if n.unpinned else "an input"
            hint = f"deepep-env fetch {env}" if env else "deepep-env fetch"
            if what.startswith("dependency"):
                raise UserError(f"package {n.package}: {what} has no build id (one of its inputs is not pinned)")
            raise UserError(f"package {n.package}: {what} is not pinned by content, so it cannot be built",
                            file=n.recipe_dir / "sources.toml",
                            accepted=f"run `{hint}` on a machine with network, or `{hint} --from DIR` with the "
                                     "upstream archive, and record the printed hash there")


def _pinned(value: Optional[str]) -> str:
    """A build id or content hash that every node ``_Builder`` works on has: ``run`` refuses a node
    without an id first (``_require_ids``), and a node has an id only when each of its sources and
    patches is pinned by content (``builder.plan.finish_node``)."""
    assert value is not None, "a node without a build id reached the builder"
    return value


def _built_version(entry: StoreEntry, node: BuildNode) -> str:
    """Version of the output named like the node (else of the first output)."""
    for o in entry.outputs:
        if o.name == node.package:
            return o.version
    return entry.outputs[0].version if entry.outputs else node.version


def _check_outside(nodes: Sequence[BuildNode], extra_channels: Sequence[str], recipes_dir: Path) -> None:
    """With no channel to solve from, a requirement no recipe produces can never be met: say so
    before building anything rather than after a solver failure midway through the graph."""
    if extra_channels:
        return
    for n in nodes:
        outside = list(n.meta.get("outside_requirements") or ())
        if outside:
            raise UserError(f"package {n.package}: requires {', '.join(outside)}, which no recipe under "
                            f"{recipes_dir} produces, and no channel to solve it from was given",
                            file=n.recipe_dir / "recipe.yaml",
                            accepted="a recipe for it in the graph, or --extra-channel URL (extra_channels=)")


def _closure(node: BuildNode, by: dict[str, BuildNode]) -> list[BuildNode]:
    """Every package of the graph the node's build or recipe test needs (run-only ones included)."""
    seen: dict[str, BuildNode] = {}
    stack = list(node.deps) + list(node.run_deps)
    while stack:
        d = stack.pop()
        if d in seen or d not in by:
            continue
        seen[d] = by[d]
        stack.extend(by[d].deps)
        stack.extend(by[d].run_deps)
    return [seen[k] for k in sorted(seen)]


class _Builder:
    def __init__(self, *, store: Path, channel: Path, source_cache: Path, state: Path, offline: bool,
                 jobs: Optional[int], progress: Optional[Progress], extra_channels: Sequence[str], env: Optional[str]):
        # Absolute: staged source paths are handed to rattler-build, which resolves a relative
        # path against the recipe folder, not the cwd (`--store s/store` once failed that way).
        self.store = Store(Path(store).resolve())
        self.channel = Channel(Path(channel).resolve())
        self.cache = SourceCache(Path(source_cache).resolve())  # staged paths must not depend on the cwd
        self.state = Path(state).resolve()
        self.offline = offline
        self.jobs = jobs or os.cpu_count() or 1
        self.progress = progress or (lambda *a: None)
        self.extra_channels = list(extra_channels)
        self.env = env
        self.entries: dict[str, StoreEntry] = {}
        self.build_root = build_root()

    def _work(self, node: BuildNode) -> Path:
        # A path that is a function of the id alone, the same in every checkout and on every
        # machine (Nix builds in /build): the staged source path, rattler-build's work folder and
        # the host prefix are recorded in the package (variant_config.yaml, __FILE__, RPATHs), so
        # the same inputs give the same bytes only if they are built at the same place.
        return self.build_root / f"{short_id(_pinned(node.id), 10)}-{node.package}"

    def _id_lock(self, node: BuildNode) -> ContextManager[None]:
        """One build of an id at a time on this machine, whichever checkout asks (they share the root)."""
        return _locked(self.build_root / ".locks" / f"{short_id(_pinned(node.id), 10)}.lock")

    def _log(self, node: BuildNode) -> Path:
        return self.state / "logs" / f"{short_id(_pinned(node.id), 10)}.log"

    def _build_into(self, node: BuildNode, by: dict[str, BuildNode], out_dir: Path) -> tuple[list[Path], float, list[str]]:
        """Stage, build, return the package files (under ``out_dir``), seconds and the driver's notes."""
        started = time.monotonic()
        work = self._work(node)
        if work.exists():  # left by a killed build: never reuse half of it
            shutil.rmtree(work)
        patches = [(p.name, _pinned(p.pin.sha256), p.pin.strip) for p in node.patches]
        staged = stage(node.package, self._to_stage(node), patches, self.cache, work / "src")
        if wheels := node.meta.get("file_sources"):       # a wheel provider's pins: checked before its recipe runs
            check_wheels(node.package, {part: staged[part] / name for part, name in wheels.items() if part in staged})
        channels, ctx = self._channels_and_context(node, by, staged, work / "deps-channel")
        site = None
        if reads_wheel_torch(node.externals):
            wrapper, site = self._python_home(node, work)
            ctx["python_executable"] = str(wrapper)
        if reads_wheel_cuda(node.externals):
            ctx["cuda_prefix"] = str(self._cuda_home(node, work, site))
        try:
            res = run_rattler_build(node.recipe_dir / "recipe.yaml", ctx, package=node.package, output_dir=out_dir,
                                    channels=channels, log_path=self._log(node), staged=list(staged.values()),
                                    on_line=lambda line: self.progress("log", node, line),
                                    virtual_packages=node.virtual_packages)
        except SolveError as exc:
            raise self._unsolvable(node, exc) from None
        epoch = epoch_for(node.id or "")
        aliases = mirror_aliases()
        info = {BUILD_INPUTS_MEMBER: (json.dumps({"id": node.id, "preimage": node.preimage}, indent=1, sort_keys=True,
                                                 ensure_ascii=False) + "\n").encode()}
        recipe = recipe_members(node.recipe_dir, node.recipe_hash or "")   # info/recipe/ = what the id hashes
        t = time.monotonic()
        for f in res.packages:
            normalize_conda(f, epoch, aliases, info, recipe)
        note_in_live_log(self._log(node), f"deepep-env: {len(res.packages)} package(s) normalized in "
                                          f"{time.monotonic() - t:.1f} s")
        self._check_resolution(node, by, res.packages)
        return res.packages, time.monotonic() - started, res.notes

    def _cuda_home(self, node: BuildNode, work: Path, torch_site: Optional[Path]) -> Path:
        """The graph's toolkit package, unpacked in the build's folder as its CUDA_HOME (builder/cuda_home.py),
        with the CUDA library headers of a wheel PyTorch's package, else of the host Python."""
        entry = self.entries["cuda"]
        (out,) = entry.outputs
        headers = cuda_library_headers(torch_site) if torch_site is not None else library_headers(node.meta)
        return make_home(entry.file(out), work / "cuda", headers)

    def _python_home(self, node: BuildNode, work: Path) -> tuple[Path, Path]:
        """The graph's deepep-pytorch, unpacked in the build's folder, and the host interpreter wrapped to
        find it first (builder/python_home.py)."""
        entry = self.entries["pytorch"]
        (out,) = entry.outputs
        return make_python(entry.file(out), work / "pytorch", str(node.meta.get("python_executable") or "python3"),
                           str(node.variant.get("python_version") or ""))

    def _unsolvable(self, node: BuildNode, exc: SolveError) -> UserError:
        outside = list(node.meta.get("outside_requirements") or ())
        if not outside:
            return exc
        # rattler-build does not say which spec failed; name the requirements that no recipe of the
        # graph produces (channel URLs are not printed: they may hold tokens)
        where = "the given channels" if self.extra_channels else "any channel (none given)"
        return UserError(f"{exc.message}; not built by this graph and not found in {where}: {', '.join(outside)}",
                         accepted="a recipe for it in the graph, or a channel that has it (--extra-channel / "
                                  "extra_channels=)")

    @staticmethod
    def _to_stage(node: BuildNode) -> dict[str, str]:
        """{source name: tree digest} the build stages (a recipe's own path sources are not staged)."""
        own = set(node.meta.get("own_sources", ()))
        return {n: _pinned(p.tree_sha256) for n, p in node.sources.items() if n not in own}

    def _channels_and_context(self, node: BuildNode, by: dict[str, BuildNode], staged: dict[str, Path],
                              deps_dir: Path) -> tuple[list[str], dict[str, Any]]:
        """The channels a build (or its resolution) reads — a channel at ``deps_dir`` holding exactly
        its graph dependencies' outputs, then the outside ones — and its recipe's render context."""
        dep_files = [(self.entries[d.package].file(o), o.file) for d in _closure(node, by)
                     for o in self.entries[d.package].outputs]
        build_chan = make_build_channel(deps_dir, dep_files)
        # deepep-env's own package requires nothing: no spec channel may reach its bytes or its test
        channels = [build_chan.url()] + (list(self.extra_channels) if self._reads_outside(node) else [])
        ctx = recipe_context(node, source_dirs=staged, deps=[by[d] for d in node.deps if d in by], jobs=self.jobs,
                             primary=primary_source(node.package, list(staged)))
        return channels, ctx

    def _reads_outside(self, node: BuildNode) -> bool:
        """Whether the node's environments may take packages from channels outside the graph."""
        return bool(self.extra_channels) and not node.meta.get("tool")

    def _graph_names(self, node: BuildNode, by: dict[str, BuildNode]) -> set[str]:
        return {o.name for d in _closure(node, by) for o in self.entries[d.package].outputs}

    def _as_built_here(self, node: BuildNode, by: dict[str, BuildNode], ids: dict[str, Optional[str]]) -> BuildNode:
        """``node`` with the ids its dependencies were built under and, when it reads packages from
        outside the graph (spec or --extra-channel channels), its build and host environments
        resolved here by rattler-build (builder/resolution.py): the id it is looked up, built, stored
        and locked under. Unchanged for a node that reads nothing from outside."""
        resolved = node.resolved
        if self._reads_outside(node):
            try:
                resolved = self._resolve(node, by)
            except SolveError as exc:
                raise self._unsolvable(node, exc) from None
        # each dependency under the id it was built with in this run, else the one planned
        planned = (node.preimage or {}).get("dependencies", {})
        dep_ids = {d: ids.get(d) or planned.get(d) for d in node.deps}
        return finish_node(dataclasses.replace(node, resolved=resolved), dep_ids)

    def _resolve(self, node: BuildNode, by: dict[str, BuildNode]) -> Resolution:
        with tempfile.TemporaryDirectory(prefix="deepep-env-resolve-") as tmp:
            staged = {n: self._work(node) / "src" / n for n in self._to_stage(node)}   # where the build will stage them
            channels, ctx = self._channels_and_context(node, by, staged, Path(tmp) / "deps-channel")
            with private_package_cache(check=False), declared_virtual_packages(node.virtual_packages or {}):
                return resolve(node.recipe_dir / "recipe.yaml", ctx, package=node.package, channels=channels,
                               graph_names=self._graph_names(node, by), work=Path(tmp) / "out")

    def _check_resolution(self, node: BuildNode, by: dict[str, BuildNode], files: Sequence[Path]) -> None:
        """The package's own record of its build/host environments is the resolution its id names."""
        if not self._reads_outside(node):
            return
        names = self._graph_names(node, by)
        for f in files:
            got = from_rendered(rendered_recipe(f), names)
            if got != node.resolved:
                diff = "; ".join(differences(node.resolved, got)[:3])
                raise UserError(f"package {node.package}: its build environments resolved differently while it was "
                                f"built than just before ({diff}): a channel changed during the build; nothing stored",
                                accepted="run the build again")

    def _import_local_sources(self, nodes: Sequence[BuildNode]) -> None:
        """Sources the plan read from this machine (deepep-env's own tree) go into the source cache
        under the hash the plan computed, re-hashed on the way in: changed since = one clear line."""
        for n in nodes:
            local = n.meta.get("local_source")
            if not local:
                continue
            (name, pin), = n.sources.items()
            got = tree_sha256(Path(local))
            if got != pin.tree_sha256:
                raise UserError(f"{n.package}: the source tree changed while planning ({got} != {pin.tree_sha256})",
                                file=local, accepted="run the command again")
            self.cache.add_tree(Path(local), digest=pin.tree_sha256)

    def publish(self, entry: StoreEntry, notes: list[str]) -> tuple[bool, bool]:
        """Copy the entry's outputs into the channel where its copy is missing or not the store's
        file; what was replaced goes to ``notes``. Returns (the channel changed, a damaged copy was
        replaced: such a package is "restored", never "cached")."""
        changed = False
        for o in entry.outputs:
            changed |= self.channel.put(entry.file(o), o.file, o.sha256)
        notes += self.channel.notes
        restored = bool(self.channel.restored)
        self.channel.notes.clear()
        self.channel.restored.clear()
        return changed, restored

    def run(self, nodes: Sequence[BuildNode], name: str, *, check: bool | Sequence[str] = False) -> BuildReport:
        _require_ids(nodes, self.env)
        by = {n.package: n for n in nodes}
        # Every argument is checked before any work: a misspelt --check-package must not cost a build.
        unknown = sorted(set(check) - set(by)) if check and not isinstance(check, bool) else []
        if unknown:
            raise UserError(f"--check names a package not in this graph: {unknown[0]}", accepted=", ".join(sorted(by)))
        report = BuildReport(name, self.channel.root.resolve(), self.store.root.resolve())
        todo = [n for n in nodes if self.store.lookup(_pinned(n.id), n.package) is None]
        self._import_local_sources(todo)
        if todo:
            wants = wants_for_nodes(todo)
            if not self.offline:
                fetch(wants, self.cache, offline=False)
            require_present(wants, self.cache, offline=True, env=self.env)
        self.channel.ensure()
        self.store.clean_partials()
        built_ids: dict[str, Optional[str]] = {}
        for node in nodes:
            node = self._as_built_here(node, by, built_ids)
            by[node.package] = node
            built_ids[node.package] = node.id
            self.progress("start", node, None)
            bid = _pinned(node.id)
            entry = self.store.lookup(bid, node.package)
            status, seconds = "cached", 0.0
            notes: list[str] = []
            if entry is None:
                with self._id_lock(node):
                    entry = self.store.lookup(bid, node.package)  # another process may have built it
                    if entry is None:
                        self.store.clean_partials_of(bid, node.package)   # a killed build's leftovers
                        work = self._work(node)
                        files, seconds, notes = self._build_into(node, by, work / "out")
                        entry = self.store.add(bid, node.package, node.preimage or {}, files, seconds)
                        shutil.rmtree(work, ignore_errors=True)
                        status = "built"
            notes += self.store.notes   # an entry found corrupt (and rebuilt) is said once
            self.store.notes.clear()
            self.entries[node.package] = entry
            # The version a dependent pins (dep_<pkg>, <pkg>_version) is the one actually built: a
            # recipe may compute it with an expression graph.py does not evaluate.
            version = _built_version(entry, node)
            if version != node.version:
                node = dataclasses.replace(node, version=version)
                by[node.package] = node
            changed, restored = self.publish(entry, notes)
            if changed:
                index(self.channel.root)
            if restored and status == "cached":
                status = "restored"
            result = NodeResult(node.package, bid, version, status, seconds,
                                [o.file for o in entry.outputs],
                                str(self._log(node)) if self._log(node).is_file() else None, notes)
            report.nodes.append(result)
            self.progress("done", node, result)
        if check:
            nodes = [by[n.package] for n in nodes]
            wanted = set(check) if not isinstance(check, bool) else set(by)
            for node in nodes:
                if node.package in wanted:
                    self.progress("check", node, None)
                    report.checks.append(self.check(node, by))
        return report

    def check(self, node: BuildNode, by: dict[str, BuildNode]) -> CheckResult:
        entry = self.entries[node.package]
        work = self._work(node)
        with self._id_lock(node):
            try:
                files, _, _ = self._build_into(node, by, work / "out")
                rebuilt = {f.name: f for f in files}
                diffs: list[str] = []
                for o in entry.outputs:
                    name = Path(o.file).name
                    if name not in rebuilt:
                        diffs.append(f"{name}: not produced by the rebuild")
                        continue
                    diffs += [f"{name}: {d}" for d in compare_packages(entry.file(o), rebuilt.pop(name))]
                diffs += [f"{n}: produced only by the rebuild" for n in sorted(rebuilt)]
            finally:
                shutil.rmtree(work, ignore_errors=True)
        return CheckResult(node.package, _pinned(node.id), not diffs, diffs)


def build_graph(nodes: Sequence[BuildNode], *, store: Path, channel: Path, source_cache: Path,
                state: Optional[Path] = None, offline: bool = False, check: bool | Sequence[str] = False,
                jobs: Optional[int] = None, progress: Optional[Progress] = None,
                extra_channels: Sequence[str] = (), name: str = "graph", env: Optional[str] = None) -> BuildReport:
    """Build ``nodes`` (dependency order, every dep inside the list) into ``store``; publish to
    ``channel``. ``state`` holds logs/, work/ and locks/ (default: the store's parent)."""
    b = _Builder(store=store, channel=channel, source_cache=source_cache, state=state or Path(store).parent,
                 offline=offline, jobs=jobs, progress=progress, extra_channels=extra_channels, env=env)
    return b.run(nodes, name, check=check)


def check_against_lock(report: BuildReport, lock_path: Path, env: Optional[str] = None) -> list[CheckResult]:
    """``build --lock FILE``: is every package this build produced the one a lock pins (same file name,
    same sha256)? A package the lock does not name is reported too: the lock is of another build."""
    data = read_lock(lock_path)
    envs = [data.env(env)] if env else list(data.envs.values())
    locked = {p.url.rsplit("/", 1)[-1]: p.sha256 for e in envs if e for ps in e.packages.values() for p in ps
              if p.kind == "conda" and p.sha256}
    store = Store(report.store)
    out = []
    for n in report.nodes:
        entry = store.lookup(n.id, n.package)
        diffs: list[str] = []
        if entry is not None:
            for o in entry.outputs:
                name = Path(o.file).name
                if name not in locked:
                    diffs.append(f"{name}: not in {lock_path}")
                else:
                    diffs += [f"{name}: {d}" for d in compare_with_sha(entry.file(o), locked[name])]
        out.append(CheckResult(n.package, n.id, not diffs, diffs))
    return out


def write_manifest(report: BuildReport, state: Path, env: str) -> Path:
    pkgs = []
    store = Store(report.store)
    for n in report.nodes:
        entry = store.lookup(n.id, n.package)
        assert entry is not None
        for o in entry.outputs:
            pkgs.append({"name": o.name, "version": o.version, "build": o.build, "subdir": o.subdir,
                         "file": o.file, "build_id": n.id, "sha256": o.sha256, "package": n.package,
                         "resolved": entry.preimage.get("resolved") or {}})
    data = {"format": BUILD_MANIFEST.stamp, "env": env, "channel": str(report.channel), "store": str(report.store),
            "packages": pkgs}
    return write_text(state / "builds" / f"{env}.json", json.dumps(data, indent=2) + "\n")


def mirror_aliases() -> dict[str, str]:
    """The URL a build reads each mirrored channel from → the channel's own URL (what ids name)."""
    return {file_url(d): url for url, d in channel_mirrors().items()}


def spec_channels_for_build(channels: Sequence[str], *, offline: bool) -> list[str]:
    """The spec's channels other than ``local`` (e.g. conda-forge for conda-provided PyTorch), after
    the dependency channel. A mirrored channel ($DEEPEP_ENV_MIRRORS) is read from its mirror, also
    offline; an unmirrored remote one is left out offline rather than timing out on DNS."""
    mirrors = channel_mirrors()
    out: list[str] = []
    for c in channels:
        if c == "local":
            continue
        url = channel_url(c)
        if url in mirrors:
            out.append(file_url(mirrors[url]))
        elif not offline or url.startswith("file://"):
            out.append(c)
    return out


def build_env(env_name: str, project: Project, *, store: Optional[Path] = None, channel: Optional[Path] = None,
              source_cache: Optional[Path] = None, offline: bool = False, check: bool | Sequence[str] = False,
              jobs: Optional[int] = None, progress: Optional[Progress] = None) -> BuildReport:
    """Build the graph of env spec ``env_name`` (``deepep-env build ENV``)."""
    resolved = load_resolved(env_name, project)
    bp = build_plan(resolved, project, live_host)   # built here: this machine's host externals
    extra = spec_channels_for_build(resolved.channels, offline=offline)
    report = build_graph(
        list(bp.nodes), store=store or project.store, channel=channel or project.channel,
        source_cache=source_cache or project.source_cache, state=project.state, offline=offline, check=check,
        jobs=jobs, progress=progress, extra_channels=extra, name=resolved.name, env=resolved.name)
    report.manifest = write_manifest(report, project.state, resolved.name)
    return report


def build_recipes(recipes_dir: Path, *, store: Path, channel: Path, source_cache: Path,
                  state: Optional[Path] = None, offline: bool = False, check: bool | Sequence[str] = False,
                  jobs: Optional[int] = None, progress: Optional[Progress] = None,
                  variant: Optional[dict[str, Any]] = None, extra_channels: Sequence[str] = ()) -> BuildReport:
    """Build every recipe folder under ``recipes_dir`` (``deepep-env build --recipes DIR``).

    Requirements that no recipe under ``recipes_dir`` produces are solved from ``extra_channels``
    (after the graph's own outputs, which win by strict channel priority); with none given they are
    refused up front, one line naming the package and the requirement."""
    nodes = nodes_from_recipe_dirs(recipe_dirs_under(Path(recipes_dir)), variant=variant)
    _check_outside(nodes, extra_channels, Path(recipes_dir))
    return build_graph(nodes, store=store, channel=channel, source_cache=source_cache, state=state,
                       offline=offline, check=check, jobs=jobs, progress=progress, name=Path(recipes_dir).name,
                       extra_channels=extra_channels)


__all__ = [
    "BuildReport", "NodeResult", "CheckResult", "build_env", "check_against_lock", "build_graph", "build_recipes", "write_manifest",
    "nodes_from_recipe_dirs",
]
