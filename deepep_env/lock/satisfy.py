"""pixi's verdict on a pixi.lock for a pixi.toml: would ``pixi install --locked`` accept it, or re-solve?

pixi cannot be installed here (field notes §5), so this module re-implements the checks pixi 0.77
runs before it trusts a lock (prefix-dev/pixi at 2b25fc7; "sat/" = crates/pixi_core/src/lock_file/
satisfiability/, "lf/" = crates/pixi_core/src/lock_file/, "pm/" = crates/pixi_manifest/src/), for
conda-only workspaces: the shape deepep-env writes. Each reason names the pixi rule it comes from;
docs/lockfiles.md "What pixi checks" lists them with their sources. Package matching is rattler's
own ``MatchSpec.matches`` (the code pixi calls), virtual packages as pixi's solver sees them.

Out of scope (none of it occurs in this project's manifest, and an input that uses it is answered
with one reason saying so, never a silent pass): PyPI dependencies, source (pixi-build) packages,
solve groups, ``exclude-newer``, target-specific tables.
"""
from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Optional

from deepep_env.base.errors import UserError
from deepep_env.formats.lockfile import refuse_secrets
from deepep_env.formats.lock_platforms import VirtualPkg, identity, subdir_defaults
from deepep_env.base.readfile import read_text

if TYPE_CHECKING:  # annotations only: rattler loads on first use
    from rattler import MatchSpec


CHANNEL_ALIAS = "https://conda.anaconda.org"   # pixi's Config skips it in serde: not configurable


@dataclass(frozen=True)
class Platform:
    name: str
    subdir: str
    virtual_packages: tuple[str, ...]     # declared, subdir defaults merged (pm/platform.rs merge_subdir_defaults)

    @property
    def rich(self) -> bool:
        return self.name != self.subdir


@dataclass
class Environment:
    name: str
    channels: list[str]                   # normalized base URLs, priority order
    platforms: list[Platform]
    dependencies: list[tuple[str, str]]   # (name, MatchSpec text)
    unsupported: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# The reasons, typed as pixi's are (sat/mod.rs EnvironmentUnsat and PlatformUnsat): ``kind`` is the
# pixi variant (or, for the checks around them, a name of ours), the fields are the facts, and
# ``str()`` is the one line `deepep-env pixi verdict` prints.


@dataclass(frozen=True)
class Unsat:
    """Why pixi would not take the lock as it is for one environment. ``kind`` is the class's name
    (pixi's variant name), set for every subclass."""

    kind: ClassVar[str] = "Unsat"

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls.kind = cls.__name__

    def message(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.message()


@dataclass(frozen=True)
class LockVersionTooNew(Unsat):
    version: int

    def message(self) -> str:
        return f"lock version {self.version} is newer than pixi 0.77 reads (lf/update.rs)"


@dataclass(frozen=True)
class EnvironmentRemoved(Unsat):
    """Rule 3: the lock has an environment the manifest does not."""


    def message(self) -> str:
        return "environment is in the lock but not in the manifest (lf/outdated.rs removed_environments)"


@dataclass(frozen=True)
class NotChecked(Unsat):
    """An input outside what this module re-implements (PyPI, targets, constraints)."""

    unsupported: tuple[str, ...]

    def message(self) -> str:
        return f"not checked here: {', '.join(self.unsupported)} (deepep-env writes conda-only manifests)"


@dataclass(frozen=True)
class EnvironmentMissing(Unsat):
    """Rule 3: the manifest's environment is not in the lock."""


    def message(self) -> str:
        return "environment missing from the lock (Rule 3, lf/outdated.rs)"


@dataclass(frozen=True)
class EnvironmentUnsat(Unsat):
    """pixi's EnvironmentUnsat: the environment as a whole (channels, options, platform rows)."""


@dataclass(frozen=True)
class ChannelsExtended(EnvironmentUnsat):
    locked: tuple[str, ...]
    manifest: tuple[str, ...]

    def message(self) -> str:
        return f"channels extended: locked {list(self.locked)}, manifest {list(self.manifest)} (ChannelsExtended)"


@dataclass(frozen=True)
class ChannelsMismatch(EnvironmentUnsat):
    locked: tuple[str, ...]
    manifest: tuple[str, ...]

    def message(self) -> str:
        return f"channels differ: locked {list(self.locked)}, manifest {list(self.manifest)} (ChannelsMismatch)"


@dataclass(frozen=True)
class SolveStrategyMismatch(EnvironmentUnsat):
    locked: Any

    def message(self) -> str:
        return f"solve strategy {self.locked!r} != 'highest' (SolveStrategyMismatch)"


@dataclass(frozen=True)
class ChannelPriorityMismatch(EnvironmentUnsat):
    locked: Any

    def message(self) -> str:
        return f"channel priority {self.locked!r} != 'strict' (ChannelPriorityMismatch)"


@dataclass(frozen=True)
class AdditionalPlatformsInLockFile(EnvironmentUnsat):
    platform: str

    def message(self) -> str:
        return f"platform {self.platform} is in the lock but not the environment (AdditionalPlatformsInLockFile)"


@dataclass(frozen=True)
class PlatformDefinitionChanged(EnvironmentUnsat):
    platform: str
    locked_subdir: str
    locked_virtual_packages: tuple[str, ...]
    manifest_subdir: str
    manifest_virtual_packages: tuple[str, ...]

    def message(self) -> str:
        return (f"platform {self.platform}: locked {self.locked_subdir} {list(self.locked_virtual_packages)}, "
                f"manifest {self.manifest_subdir} {list(self.manifest_virtual_packages)} (PlatformDefinitionChanged)")


@dataclass(frozen=True)
class PlatformUnsat(Unsat):
    """pixi's PlatformUnsat: one platform's locked packages."""

    platform: str


@dataclass(frozen=True)
class TooManyPypiPackages(PlatformUnsat):

    def message(self) -> str:
        return f"{self.platform}: PyPI packages in a conda-only environment (TooManyPypiPackages)"


@dataclass(frozen=True)
class DuplicateEntry(PlatformUnsat):
    package: str

    def message(self) -> str:
        return f"{self.platform}: {self.package} is locked twice (DuplicateEntry)"


@dataclass(frozen=True)
class TooManyCondaPackages(PlatformUnsat):
    """Packages no requirement reaches (``unused``), or any package where nothing is required."""

    unused: tuple[str, ...] = ()

    def message(self) -> str:
        if not self.unused:
            return f"{self.platform}: packages locked for an environment without dependencies (TooManyCondaPackages)"
        return f"{self.platform}: locked but not required: {', '.join(self.unused)} (TooManyCondaPackages)"


@dataclass(frozen=True)
class UnsatisfiableMatchSpec(PlatformUnsat):
    """A requirement no locked record (nor virtual package) satisfies; ``locked``: the record of
    that name that does not match, when there is one."""

    spec: str
    required_by: str
    locked: Optional[str] = None

    def message(self) -> str:
        if self.locked is None:
            return (f"{self.platform}: the requirement '{self.spec}' could not be satisfied (required by "
                    f"{self.required_by}) (UnsatisfiableMatchSpec)")
        return (f"{self.platform}: locked {self.locked} does not match '{self.spec}' (required by "
                f"{self.required_by}) (UnsatisfiableMatchSpec)")


@dataclass
class Verdict:
    env: str
    reasons: list[Unsat] = field(default_factory=list)

    @property
    def satisfiable(self) -> bool:
        return not self.reasons

    def messages(self) -> list[str]:
        return [r.message() for r in self.reasons]

    def to_dict(self) -> dict[str, Any]:
        return {"env": self.env, "satisfiable": self.satisfiable, "reasons": self.messages()}


# ---------------------------------------------------------------------------------------------
# The manifest side


def normalize_channel(channel: str, root: Path) -> str:
    """Rule 5 (rattler_conda_types channel/mod.rs into_base_url): a URL gets a trailing slash, a
    path becomes an absolute file:// URL, anything else is a name under conda.anaconda.org."""
    if "://" in channel:
        scheme, rest = channel.split("://", 1)
        host, _, path = rest.partition("/")
        url = f"{scheme.lower()}://{host.lower()}/{path}"
        return url if url.endswith("/") else url + "/"
    if channel.startswith(("/", "./", "../", "~")):
        return "file://" + os.path.abspath(os.path.join(root, os.path.expanduser(channel))).rstrip("/") + "/"
    return f"{CHANNEL_ALIAS}/{channel.strip('/')}/"


_FRIENDLY = (("archspec", "__archspec"), ("glibc", "__glibc"), ("linux", "__linux"),
             ("macos", "__osx"), ("osx", "__osx"), ("windows", "__win"))


def parse_platform(entry: Any) -> Platform:
    """pm/toml/platform.rs TomlPixiPlatform::deserialize + merge_subdir_defaults, for the keys we use."""
    if isinstance(entry, str):
        return Platform(entry, entry, tuple(str(v) for v in subdir_defaults(entry)))
    subdir = entry.get("platform") or entry.get("name")
    declared: list[VirtualPkg] = []
    if "cuda" in entry:
        cuda = entry["cuda"]
        declared.append(VirtualPkg("__cuda", cuda if isinstance(cuda, str) else cuda.get("driver", "")))
        if isinstance(cuda, dict) and cuda.get("arch"):
            declared.append(VirtualPkg("__cuda_arch", cuda["arch"]))
    for key, vp in _FRIENDLY:
        if key in entry:
            declared.append(VirtualPkg(vp, "0", entry[key]) if vp == "__archspec" else VirtualPkg(vp, entry[key]))
    for key, value in entry.items():
        if key.startswith("__"):
            declared.append(VirtualPkg.parse(f"{key}={value}"))
    names = {v.name for v in declared}
    declared += [d for d in subdir_defaults(subdir) if d.name not in names]
    name = entry.get("name") or subdir
    return Platform(name, subdir, tuple(str(v) for v in declared))


def _spec_text(name: str, value: Any) -> str:
    if isinstance(value, str):
        return name if value.strip() in ("", "*") else f"{name} {value}"
    version = value.get("version", "*")
    build = value.get("build")
    return f"{name} {version}" + (f" {build}" if build else "")


def environments(manifest: dict[str, Any], root: Path) -> list[Environment]:
    """Rules 20-22: every environment pixi derives from the manifest, ``default`` included."""
    ws = manifest.get("workspace") or manifest.get("project") or {}
    platforms = [parse_platform(p) for p in ws.get("platforms") or []]
    features = manifest.get("feature") or {}
    defined = dict(manifest.get("environments") or {})
    defined.setdefault("default", {"features": []})
    out = []
    for name, spec in sorted(defined.items()):
        spec = {"features": spec} if isinstance(spec, list) else spec
        feats = [(f, features.get(f) or {}) for f in spec.get("features") or []]
        if not spec.get("no-default-feature", False):
            feats.append(("default", manifest))
        out.append(_environment(name, feats, ws, platforms, root))
    return out


def _environment(name: str, feats: list[tuple[str, dict]], ws: dict, platforms: list[Platform],
                 root: Path) -> Environment:
    # pm/features_ext.rs prioritized_channels: features in order, a feature without channels adds
    # the workspace's, first occurrence wins (no `priority` keys in our manifest).
    channels: list[str] = []
    for fname, f in feats:
        own = f.get("channels") if fname != "default" else None
        for c in own if own is not None else ws.get("channels") or []:
            c = c if isinstance(c, str) else c.get("channel", "")
            if c not in channels:
                channels.append(c)
    pinned = [set(fp) for n, f in feats if n != "default" and (fp := f.get("platforms")) is not None]
    plats = [p for p in platforms if all(p.name in s or p.subdir in s for s in pinned)]
    deps = [(d, _spec_text(d, v)) for _, f in feats for d, v in (f.get("dependencies") or {}).items()]
    unsupported = [f"{n}: {k}" for n, f in feats for k in ("pypi-dependencies", "target", "constraints")
                   if f.get(k)]
    return Environment(name, [normalize_channel(c, root) for c in channels], plats, deps, unsupported)


# ---------------------------------------------------------------------------------------------
# The lock side


def _vp_identity(strings: list[str], subdir: str) -> tuple:
    """pixi's platform identity with conda-version equality (lf/platform_rename.rs): non-default
    virtual packages as (name, version, build), sorted by name."""
    from rattler import Version

    _, custom = identity(subdir, strings)
    return tuple(sorted((v.name, Version(v.version), v.build) for v in map(VirtualPkg.parse, custom)))


def align_rows(rows: dict[str, tuple[str, list[str]]], platforms: list[Platform]) -> dict[str, str]:
    """Rule 2 (lf/platform_rename.rs compute_renames): lock row name → the name pixi uses after
    loading. A row is renamed to the one manifest platform of its identity, unless that name is
    already a row or the row's own name is a manifest platform."""
    manifest_names = {p.name for p in platforms}
    out = {}
    for row, (subdir, vps) in rows.items():
        ident = (subdir, _vp_identity(vps, subdir))
        same = [p for p in platforms if (p.subdir, _vp_identity(list(p.virtual_packages), p.subdir)) == ident]
        ok = len(same) == 1 and same[0].name != row and same[0].name not in rows and row not in manifest_names
        out[row] = same[0].name if ok else row
    return out


@dataclass
class LockView:
    version: int
    rows: dict[str, tuple[str, list[str]]]            # aligned name → (subdir, virtual packages)
    envs: dict[str, dict[str, Any]]                   # env → {"channels", "options", "records", "pypi"}


def read_lock_view(path: Path, platforms: list[Platform]) -> LockView:
    """Rule 1: a readable lock of version ≤ 7, platform rows aligned (Rule 2)."""
    import yaml
    from rattler import LockFile

    text = read_text(path, what="lock", accepted="a pixi.lock (v1-v7)", missing="lock file not found")
    try:
        raw = yaml.safe_load(text)
        lf = LockFile.from_path(path)
    except Exception as exc:  # noqa: BLE001 - yaml's and rattler's own errors
        raise UserError(f"pixi cannot read this lock: {str(exc).splitlines()[0] if str(exc) else exc!r}",
                        file=path) from None
    refuse_secrets(lf, path)   # the one refusal every reader of a lock makes (install and diff too)
    rows = {p.name: (str(p.subdir), list(p.virtual_packages)) for p in lf.platforms()}
    names = align_rows(rows, platforms)
    envs = {}
    for name, e in lf.environments():
        raw_env = (raw.get("environments") or {}).get(name) or {}
        envs[name] = {"channels": [str(c) for c in e.channels()], "options": raw_env.get("options") or {},
                      "records": {names[p.name]: list(e.conda_repodata_records_for_platform(p) or [])
                                  for p in e.platforms()},
                      "pypi": {names[p.name]: len(e.pypi_packages_for_platform(p) or []) for p in e.platforms()}}
    return LockView(int(raw.get("version", 0)), {names[n]: v for n, v in rows.items()}, envs)


# ---------------------------------------------------------------------------------------------
# The verdict


def verdict(manifest: dict[str, Any], lock_path: Path, root: Path) -> list[Verdict]:
    """One :class:`Verdict` per environment pixi derives from ``manifest``, plus one for each
    environment the lock has and the manifest does not (Rule 3)."""
    envs = environments(manifest, root)
    ws = manifest.get("workspace") or manifest.get("project") or {}
    view = read_lock_view(lock_path, [parse_platform(p) for p in ws.get("platforms") or []])
    out = []
    if view.version > 7:
        return [Verdict(e.name, [LockVersionTooNew(view.version)]) for e in envs]
    for env in envs:
        out.append(check_environment(env, view))
    for extra in sorted(set(view.envs) - {e.name for e in envs}):
        out.append(Verdict(extra, [EnvironmentRemoved()]))
    return out


def check_environment(env: Environment, view: LockView) -> Verdict:
    v = Verdict(env.name)
    if env.unsupported:
        v.reasons.append(NotChecked(tuple(env.unsupported)))
        return v
    locked = view.envs.get(env.name)
    if locked is None:
        v.reasons.append(EnvironmentMissing())
        return v
    v.reasons += _channels(env, locked)
    v.reasons += _options(locked)
    v.reasons += _platform_rows(env, locked, view)
    if v.reasons:
        return v  # pixi discards the locked content before the per-platform checks
    for plat in env.platforms:
        v.reasons += _platform_packages(env, plat, _row_for(plat, locked, view), locked)
    return v


def _channels(env: Environment, locked: dict) -> list[Unsat]:
    """Rule 4 (sat/environment.rs:37-69): equal lists; an extended list is still stale."""
    have = [normalize_channel(c, Path("/")) for c in locked["channels"]]
    if have == env.channels:
        return []
    if env.channels[:len(have)] == have:
        return [ChannelsExtended(tuple(have), tuple(env.channels))]
    return [ChannelsMismatch(tuple(have), tuple(env.channels))]


def _options(locked: dict) -> list[Unsat]:
    """Rule 10 (sat/environment.rs:210-244): defaults strict / highest for our environments."""
    opts = locked["options"]
    out: list[Unsat] = []
    if opts.get("strategy", "highest") != "highest":
        out.append(SolveStrategyMismatch(opts["strategy"]))
    if opts.get("channel-priority", "strict") != "strict":
        out.append(ChannelPriorityMismatch(opts["channel-priority"]))
    return out


def _platform_rows(env: Environment, locked: dict, view: LockView) -> list[Unsat]:
    """Rules 7 and 8 (sat/environment.rs:71-177): no additional platforms; shared names agree on
    subdir and non-default virtual packages (compared as sorted strings)."""
    names = {p.name: p for p in env.platforms}
    subdirs = {p.subdir for p in env.platforms}
    out: list[Unsat] = []
    for row in sorted(locked["records"]):
        subdir, vps = view.rows.get(row, (row, []))
        if row not in names and subdir not in subdirs:
            out.append(AdditionalPlatformsInLockFile(row))
        elif row in names:
            p = names[row]
            want = sorted(identity(p.subdir, list(p.virtual_packages))[1])
            have = sorted(identity(subdir, vps)[1])
            if subdir != p.subdir or want != have:
                out.append(PlatformDefinitionChanged(row, subdir, tuple(have), p.subdir, tuple(want)))
    return out


def _row_for(plat: Platform, locked: dict, view: LockView) -> Optional[str]:
    """Rule 9 (sat/platform.rs:91-124): the row of the platform's name, else a bare-subdir row with
    no virtual packages or with every declared one."""
    if plat.name in locked["records"]:
        return plat.name
    if plat.subdir in locked["records"]:
        vps = view.rows.get(plat.subdir, (plat.subdir, []))[1]
        if not vps or set(plat.virtual_packages) <= set(vps):
            return plat.subdir
    return None


def solver_virtual_packages(plat: Platform) -> list[VirtualPkg]:
    """Rule 17 (lf/platform_setup.rs, rattler_virtual_packages): the platform's packages as the
    solver sees them: build "0", and __archspec as version 1 with the microarchitecture as build."""
    out = []
    for s in plat.virtual_packages:
        v = VirtualPkg.parse(s)
        if v.name == "__archspec":
            out.append(VirtualPkg("__archspec", "1", v.build))
        else:
            out.append(VirtualPkg(v.name, v.version, "0"))
    return out


def _platform_packages(env: Environment, plat: Platform, row: Optional[str], locked: dict) -> list[Unsat]:
    """Rule 13 (sat/platform.rs:172-1270): unique names, every requirement (the manifest's, then each
    visited record's ``depends``) satisfied by a locked record or a virtual package, nothing unused."""
    records = locked["records"].get(row, []) if row else []
    where = f"{plat.name}"
    if row and locked["pypi"].get(row):
        return [TooManyPypiPackages(where)]
    by_name: dict[str, Any] = {}
    for r in records:
        n = r.name.normalized
        if n in by_name:
            return [DuplicateEntry(where, n)]
        by_name[n] = r
    if not env.dependencies:
        return [TooManyCondaPackages(where)] if records else []
    return _walk(where, env, by_name, solver_virtual_packages(plat))


def _walk(where: str, env: Environment, by_name: dict[str, Any], vps: list[VirtualPkg]) -> list[Unsat]:
    from rattler import MatchSpec

    out: list[Unsat] = []
    stack = [(spec, f"environment {env.name}") for _, spec in reversed(env.dependencies)]
    seen: set[str] = set()
    while stack:
        text, by = stack.pop()
        spec = MatchSpec(text, strict=False)
        name = spec.name.normalized
        rec = by_name.get(name)
        if rec is None:
            if not any(_vp_matches(spec, v) for v in vps if v.name == name):
                out.append(UnsatisfiableMatchSpec(where, text, by))
            continue
        if not spec.matches(rec):
            out.append(UnsatisfiableMatchSpec(where, text, by, f"{name} {rec.version} {rec.build}"))
            continue
        if name in seen:
            continue
        seen.add(name)
        stack += [(d, name) for d in rec.depends]
    unused = sorted(set(by_name) - seen)
    if unused:
        out.append(TooManyCondaPackages(where, tuple(unused)))
    return out


def _vp_matches(spec: MatchSpec, v: VirtualPkg) -> bool:
    from rattler import Version, VersionSpec

    if spec.version is not None and not VersionSpec(str(spec.version)).matches(Version(v.version)):
        return False
    return spec.build is None or fnmatch.fnmatchcase(v.build, str(spec.build))

