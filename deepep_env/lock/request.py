"""What a lock is made of, as data: channels, platforms with their virtual packages, and the specs.

:class:`LockRequest` is the whole input of a solve and of a staleness check. :func:`request_for_env`
derives it from a resolved spec and its build plan; tests and benchmarks build one by hand (a
request is plain data), which is how a lock can be made for packages no recipe describes.

Which specs are solved (docs/lockfiles.md §2):

- the packages we build for the env, pinned to their build string ``h<build id>_0`` so the lock
  names *our* build ids. The build at the top of the plan (DeepEP) is a root; the builds below it
  (NVSHMEM, GDRCopy) enter as *constraints* on every output that carries their build string: the
  solve takes whatever outputs DeepEP needs, and only from our build;
- the components the spec says come from conda (``provider = "conda"``): python, cuda-version,
  pytorch, nccl, libnvshmem3. ``host``/``pip`` components are the machine's: never solved.

Platforms (pixi's rich platform name, subdir and virtual packages) come from the spec through
:func:`deepep_env.formats.lock_platforms.platform_for`, never from this machine.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from deepep_env.base.errors import UserError
from deepep_env.builder.moved import moved_ids, moved_refusal
from deepep_env.base.channels.urls import ChannelRef, placeholder_host, probe, read_index, resolve_channels, url_to_path
from deepep_env.builder.plan import live_host, plan as build_plan
from deepep_env.formats.build_inputs import resolutions_from_builds
from deepep_env.formats.lock_platforms import LockPlatformDef, VirtualPkg, platform_for
from deepep_env.lock.workspace import Workspace, workspace

if TYPE_CHECKING:  # annotations only: no import at run time
    from rattler.networking import Client

    from deepep_env.builder.plan import BuildPlan
    from deepep_env.base.project import Project
    from deepep_env.envspec.resolved import ResolvedSpec


@dataclass(frozen=True)
class Requirement:
    name: str
    spec: str                     # a conda MatchSpec
    component: str                # python, cuda, pytorch, nccl, nvshmem, gdrcopy, deepep, or "extra"
    kind: str = "conda"           # "built" (ours), "conda" (a spec component), "extra" (given as data)
    root: bool = True             # False: a constraint — binds the package only if something needs it
    build_id: Optional[str] = None


@dataclass(frozen=True)
class BuiltNode:
    """One package of the build plan, as the lock check needs it (matched by build string, so the
    names of a recipe's outputs need not be known)."""

    package: str
    component: str
    version: str
    build_string: str
    build_id: str
    top: bool
    tool: bool = False    # deepep-env's own package: locked at the plan's build, checked by version


@dataclass
class LockRequest:
    env: str
    platforms: list[LockPlatformDef]
    channels: list[ChannelRef]
    requirements: list[Requirement]
    built: list[BuiltNode] = field(default_factory=list)
    spec_version: str = ""
    publish_url: Optional[str] = None
    # Every platform the manifest declares, in its order (pixi numbers the lock's rows by it);
    # empty: this request's own platforms.
    workspace: list[LockPlatformDef] = field(default_factory=list)
    plan_nodes: list = field(default_factory=list)   # the BuildNodes (pre-images) behind ``built``
    # The build store whose entries the local channel's files are copies of (None: not checked).
    store: Optional[Path] = None

    @property
    def workspace_platforms(self) -> list[LockPlatformDef]:
        out = list(self.workspace)
        return out + [p for p in self.platforms if p.name not in {w.name for w in out}]

    @property
    def subdirs(self) -> list[str]:
        return [p.subdir for p in self.platforms]

    @property
    def virtual_packages(self) -> dict[str, list[VirtualPkg]]:
        """subdir → the virtual packages it is solved with."""
        return {p.subdir: list(p.virtual_packages) for p in self.platforms}

    def platform(self, subdir: str) -> LockPlatformDef:
        return next(p for p in self.platforms if p.subdir == subdir)

    @property
    def roots(self) -> list[Requirement]:
        return [r for r in self.requirements if r.root]

    @property
    def constraints(self) -> list[Requirement]:
        return [r for r in self.requirements if not r.root]

    def to_dict(self) -> dict:
        return {
            "env": self.env, "platforms": [{"name": p.name, "subdir": p.subdir, "virtual_packages": p.strings}
                                           for p in self.platforms],
            "channels": [c.to_dict() for c in self.channels],
            "requirements": [asdict(r) for r in self.requirements],
            "built": [asdict(b) for b in self.built], "spec_version": self.spec_version,
        }


COMPONENT_OF_PACKAGE = {"deep-ep": "deepep", "nvshmem": "nvshmem", "gdrcopy": "gdrcopy"}


def component_requirements(r: ResolvedSpec) -> list[Requirement]:
    """The conda-provided components of a resolved spec (``provider = "conda"``)."""
    reqs: list[Requirement] = []
    if r.python.provider == "conda":
        reqs.append(Requirement("python", f"python {r.python.version}.*", "python"))
    if r.cuda.provider == "conda":
        # cuda-version is conda-forge's CUDA metapackage: it pins every cuda-* package of the env
        # to one toolkit release.
        reqs.append(Requirement("cuda-version", f"cuda-version {r.cuda.version}.*", "cuda"))
        if r.deepep.engine_record.jit:
            # EPv2 JIT-compiles kernels at run time: nvcc and cuobjdump must be in the env
            # (field notes §2, DeepEP EPv2 release README).
            reqs.append(Requirement("cuda-nvcc", f"cuda-nvcc {r.cuda.version}.*", "cuda"))
            reqs.append(Requirement("cuda-cuobjdump", f"cuda-cuobjdump {r.cuda.version}.*", "cuda"))
    if r.pytorch.provider == "conda":
        reqs.append(Requirement("pytorch", f"pytorch =={r.pytorch.version} {r.pytorch.build_glob}", "pytorch"))
    if r.nccl.provider == "conda":
        # conda-forge versions NCCL with NVIDIA's four numbers (2.28.9.1): `==2.28.9` would match none
        # (found solving against conda-forge's records, tests/builder/test_conda_mode.py).
        reqs.append(Requirement("nccl", f"nccl {r.nccl.version}.*", "nccl"))
    if r.nvshmem.provider == "conda":
        # conda-forge repacks NVIDIA's binaries as libnvshmem3 (runtime) / libnvshmem-dev (field notes §4).
        reqs.append(Requirement("libnvshmem3", f"libnvshmem3 =={r.nvshmem.version}", "nvshmem"))
    for spec in r.packages:
        reqs.append(Requirement(spec.split()[0], spec, "extra", kind="extra"))
    return reqs


def built_nodes(plan: BuildPlan) -> list[BuiltNode]:
    roots = {n.package for n in plan.roots()}
    out = []
    for n in plan.nodes:
        if n.id is None:
            raise UserError(f"cannot lock: the build id of {n.package} is unknown ({', '.join(n.unpinned)} not pinned "
                            "by content)", field=n.package,
                            accepted=f"pin it first: `deepep-env fetch {plan.env}` on a machine with network")
        out.append(BuiltNode(n.package, COMPONENT_OF_PACKAGE.get(n.package, n.package), n.version, n.build_string,
                             n.id, top=n.package in roots, tool=bool(n.meta.get("tool"))))
    return out


def refuse_unbuilt(env: str, nodes: list[BuiltNode], refs: list[ChannelRef]) -> None:
    """Refuse to lock ``env`` when the local channel lacks a package of this checkout's build plan and
    nothing else could serve it (the local folder is read, or its publish_url is a placeholder): after a
    pin or recipe changes, the changed package must be built first (issue 56: the refusal named the
    placeholder URL instead). A real publish_url is left to the solve: a teammate may have published it."""
    for ref in refs:
        if not ref.local or not (ref.source.startswith("file:") or placeholder_host(ref.source)):
            continue
        folder = Path(ref.local_dir) if ref.local_dir else url_to_path(ref.source)
        missing = [n for n in nodes if not _built_here(folder, n)]
        if missing:
            names = ", ".join(f"{n.package} {n.version} {n.build_string}" for n in missing)
            also = (f"; its publish_url {ref.source.rstrip('/')} is a placeholder, so nothing else serves "
                    f"{'it' if len(missing) == 1 else 'them'}") if ref.local_dir else ""
            raise UserError(f"{names} not built: the local channel {folder} has no build of this checkout's "
                            f"{'package' if len(missing) == 1 else 'packages'} (a changed pin or recipe is a new "
                            f"build id){also}; nothing written", field="channels",
                            accepted=f"`deepep-env build {env}` first, then `deepep-env lock {env}`"
                                     + (" (or set publish_url to your team's channel)" if also else ""))


def _built_here(folder: Path, n: BuiltNode) -> bool:
    return any(True for ext in (".conda", ".tar.bz2") for _ in folder.glob(f"*/*-{n.version}-{n.build_string}{ext}"))


def built_requirements(nodes: list[BuiltNode], index: list[dict]) -> list[Requirement]:
    """One requirement per output of each build. Output names come from the channel index (all
    packages carrying the node's build string); without an index, the package is assumed to be
    named after its recipe."""
    reqs: list[Requirement] = []
    for n in nodes:
        names = sorted({p["name"] for p in index if p.get("build") == n.build_string and p.get("version") == n.version})
        if not names:
            names = [n.package]
        for name in names:
            reqs.append(Requirement(name, f"{name} =={n.version} {n.build_string}", n.component, kind="built",
                                    root=n.top, build_id=n.build_id))
    return reqs


def workspace_platforms(project: Project, ws: Optional[Workspace] = None) -> list[LockPlatformDef]:
    """The platforms of every spec of the project, by name: pixi.toml's ``[workspace] platforms``.
    A spec that does not load is left out here (``pixi sync`` and ``spec check`` report it)."""
    ws = workspace(project, ws)
    found: dict[str, LockPlatformDef] = {}
    for name in project.spec_names():
        try:
            r = ws.resolved(name)
        except UserError:
            continue
        for s in r.subdirs:
            p = platform_for(s, r.cuda.version)
            found[p.name] = p
    return [found[n] for n in sorted(found)]


def request_for_env(r: ResolvedSpec, project: Project, *, channel_dir: Optional[Path] = None, for_check: bool = False,
                    client_obj: Optional[Client] = None, ws: Optional[Workspace] = None) -> LockRequest:
    """The lock request a resolved spec implies (build plan included)."""
    refs = resolve_channels(list(r.channels), publish_url=r.publish_url,
                            local_dir=Path(channel_dir) if channel_dir else project.channel,
                            explicit_dir=channel_dir is not None, for_check=for_check)
    # Locking records what was built here (this machine's host externals); a check reads the host
    # facts the committed lock recorded (lockfiles/build-inputs.json), so CI can check a GPU lock.
    ws = workspace(project, ws)
    bp = ws.plan_of(r, None, None) if for_check else \
        build_plan(r, project, live_host, resolutions_from_builds(project, r.name))
    nodes = built_nodes(bp)
    index: list[dict] = []
    if not for_check:
        for ref in refs:   # an unreachable or placeholder channel first: editing channels moves build ids too
            if not ref.local:
                probe(ref, r.subdirs)
        try:
            refuse_unbuilt(r.name, nodes, refs)
        except UserError as exc:   # a build missing because a host external moved its id: name the external
            moved = moved_ids(project, r.name, list(bp.nodes))
            if not moved:
                raise
            raise moved_refusal(r.name, moved, exc.message, r.host.prepare) from None
        for ref in refs:
            if ref.local:
                index += read_index(ref, r.subdirs, client_obj)
    reqs = built_requirements(nodes, index) + component_requirements(r)
    return LockRequest(env=r.name, platforms=[platform_for(s, r.cuda.version) for s in r.subdirs], channels=refs,
                       workspace=workspace_platforms(project, ws),
                       requirements=reqs, built=nodes, spec_version=r.version, publish_url=r.publish_url,
                       plan_nodes=list(bp.nodes), store=project.store)
