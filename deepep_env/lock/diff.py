"""The difference between two locks, as data (rendering lives in :mod:`deepep_env.lock.render`).

A lock diff should read like a changelog: for each environment and platform, what was added,
removed and changed (old → new version and build), the pinned components first — CUDA, NVSHMEM,
NCCL, PyTorch, DeepEP, in the order a reviewer checks them — and which build ids changed
(``h<id>_N`` build strings of the packages deepep-env builds).

Either side may be a path or ``REV:path`` (``git show REV:path``), so a pull request can diff the
committed lock against its base.
"""
from __future__ import annotations

import fnmatch
import re
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from deepep_env.base.argv import operand
from deepep_env.base.errors import UserError
from deepep_env.formats.stamps import LOCK_DIFF
from deepep_env.formats.lockfile import LockData, LockedEnv, LockedPackage, read_lock
from deepep_env.base.readfile import present
from deepep_env.lock.digest import all_digests
from deepep_env.lock.pixi_model import load_manifest

if TYPE_CHECKING:  # annotations only: rattler loads on first use
    from rattler import Version

# Review order of the pinned components (issue 5); every other package follows, by name.
# Names are conda's (normalised, lower case) and PyPI's (`torch`, NVIDIA's `nvidia-*-cu12` wheels, which
# pixi locks carry as `pypi:` entries next to the conda ones).
PINNED_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("cuda", ("cuda*", "nvidia-cuda-*")),
    ("nvshmem", ("nvshmem*", "libnvshmem*", "deepep-nvshmem*", "nvidia-nvshmem-*")),
    ("nccl", ("nccl", "libnccl*", "nvidia-nccl-*")),
    ("pytorch", ("pytorch", "pytorch-*", "libtorch", "torch")),
    ("deepep", ("deep-ep", "deep_ep", "deepep", "deep-ep-*")),
    ("gdrcopy", ("gdrcopy", "libgdrcopy*", "deepep-gdrcopy*")),
    ("python", ("python",)),
)


def component_of(name: str) -> Optional[str]:
    for comp, pats in PINNED_GROUPS:
        if any(fnmatch.fnmatchcase(name, p) for p in pats):
            return comp
    return None


def order_key(name: str) -> tuple[int, str]:
    for i, (_, pats) in enumerate(PINNED_GROUPS):
        if any(fnmatch.fnmatchcase(name, p) for p in pats):
            return (i, name)
    return (len(PINNED_GROUPS), name)


# The package every env holds that is deepep-env's activation (builder/toolpkg.py TOOL).
ACTIVATION_PACKAGE = "deepep-env"


@dataclass(frozen=True)
class PackageEntry:
    name: str
    version: str
    build: str
    kind: str = "conda"
    component: Optional[str] = None
    channel: str = ""


@dataclass(frozen=True)
class PackageChange:
    name: str
    old_version: str
    new_version: str
    old_build: str
    new_build: str
    change: str                       # upgraded, downgraded, rebuilt, content, moved
    kind: str = "conda"
    component: Optional[str] = None
    old_build_id: Optional[str] = None
    new_build_id: Optional[str] = None
    old_channel: str = ""
    new_channel: str = ""

    @property
    def pinned(self) -> bool:
        return self.component is not None


# A conda build string's trailing hash: ``h<hex>_<n>`` (deepep-env writes 10 hex digits, conda-forge 7-8),
# possibly behind variant tags (``cuda129_py312_h1a2b3c4_300``).
_BUILD_HASH = re.compile(r"(?:^|_)h([0-9a-f]{7,64})_\d+$")
# Components whose rebuild is a reviewable event even when the build string is not ours (issue 5:
# a DeepEP or NVSHMEM rebuild with an unchanged version must show up as a changed build id).
_BUILD_ID_COMPONENTS = frozenset({"cuda", "nvshmem", "nccl", "pytorch", "deepep", "gdrcopy"})


def _build_id(p: LockedPackage) -> Optional[str]:
    if p.build_id:
        return p.build_id
    m = _BUILD_HASH.search(p.build or "")
    return m.group(1) if m else (p.build or None)


@dataclass(frozen=True)
class VirtualPackageChange:
    platform: str
    name: str                  # e.g. __cuda
    old: Optional[str]         # the whole spec, e.g. __cuda=12.9; None when added
    new: Optional[str]


@dataclass(frozen=True)
class BuildIdChange:
    env: str
    platform: str
    package: str
    old: Optional[str]
    new: Optional[str]


@dataclass
class PlatformDiff:
    env: str
    platform: str
    added: list[PackageEntry] = field(default_factory=list)
    removed: list[PackageEntry] = field(default_factory=list)
    changed: list[PackageChange] = field(default_factory=list)
    unchanged: int = 0

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


@dataclass
class LockDiff:
    old: str
    new: str
    envs_added: list[str] = field(default_factory=list)
    envs_removed: list[str] = field(default_factory=list)
    channels_changed: list[dict[str, Any]] = field(default_factory=list)
    platforms_added: list[str] = field(default_factory=list)
    platforms_removed: list[str] = field(default_factory=list)
    platforms_changed: list[dict[str, Any]] = field(default_factory=list)   # subdir of a named platform
    virtual_packages: list[VirtualPackageChange] = field(default_factory=list)
    sections: list[PlatformDiff] = field(default_factory=list)
    build_ids: list[BuildIdChange] = field(default_factory=list)
    # (env, platform) → digest of the locked package set on each side (deepep_env.lock.digest):
    # what test records are bound to, so a reader can say which records a change invalidates.
    digests_old: dict[tuple[str, str], str] = field(default_factory=dict)
    digests_new: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.envs_added or self.envs_removed or self.channels_changed or self.platforms_added
                    or self.platforms_removed or self.platforms_changed or self.virtual_packages
                    or any(not s.empty for s in self.sections))

    def activation_moved(self) -> list[dict[str, str]]:
        """Each env whose activation package (``deepep-env``: the code that computes the overlay its
        tests run under, builder/toolpkg.py) changes: every record of that env goes stale with it."""
        return [{"env": s.env, "platform": s.platform, "old": f"{c.old_version}-{c.old_build}",
                 "new": f"{c.new_version}-{c.new_build}"}
                for s in self.sections for c in s.changed if c.name == ACTIVATION_PACKAGE]

    def summary(self) -> dict[str, int]:
        return {"added": sum(len(s.added) for s in self.sections),
                "removed": sum(len(s.removed) for s in self.sections),
                "changed": sum(len(s.changed) for s in self.sections),
                "build_ids_changed": len(self.build_ids),
                "virtual_packages_changed": len(self.virtual_packages)}

    def to_dict(self) -> dict[str, Any]:
        def sec(s: PlatformDiff) -> dict[str, Any]:
            return {"env": s.env, "platform": s.platform,
                    "added": [asdict(a) for a in s.added], "removed": [asdict(r) for r in s.removed],
                    "changed": [{**asdict(c), "pinned": c.pinned} for c in s.changed], "unchanged": s.unchanged}

        return {"format": LOCK_DIFF.stamp, "old": self.old, "new": self.new, "empty": self.empty,
                "summary": self.summary(), "envs_added": self.envs_added, "envs_removed": self.envs_removed,
                "channels_changed": self.channels_changed, "platforms_added": self.platforms_added,
                "platforms_removed": self.platforms_removed, "platforms_changed": self.platforms_changed,
                "virtual_packages": [asdict(v) for v in self.virtual_packages],
                "sections": [sec(s) for s in self.sections],
                "build_ids": [asdict(b) for b in self.build_ids],
                "activation_moved": self.activation_moved()}


def _pypi_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pixi_update_json(d: LockDiff, explicit: Optional[Callable[[str], tuple[set[str], set[str]]]] = None) -> dict[str, Any]:
    """The shape of ``pixi update --json`` (pixi's ``LockFileJsonDiff``: ``{"version": 1, "environment":
    {env: {platform: [{name, before, after, type, explicit}]}}}``), which pixi-diff-to-markdown and
    other pixi tooling read. ``explicit`` is pixi's: the package is one of the environment's manifest
    dependencies (``explicit(env)`` gives the conda and PyPI names), and the key is left out when
    false. Changes of bytes only (same version and build) have no place in it: they stay in
    ``--format json``."""
    def rec(version: str, build: str, kind: str) -> dict[str, str]:
        return {"version": version, "build": build} if kind == "conda" else {"version": version}

    def row(env: str, name: str, kind: str, before: Optional[dict], after: Optional[dict]) -> dict[str, Any]:
        out: dict[str, Any] = {"name": name, "before": before, "after": after, "type": kind}
        conda, pypi = explicit(env) if explicit else (set(), set())
        if (kind == "conda" and name.lower() in conda) or (kind != "conda" and _pypi_name(name) in pypi):
            out["explicit"] = True
        return out

    envs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for s in d.sections:
        rows = [row(s.env, a.name, a.kind, None, rec(a.version, a.build, a.kind)) for a in s.added]
        rows += [row(s.env, r.name, r.kind, rec(r.version, r.build, r.kind), None) for r in s.removed]
        rows += [row(s.env, c.name, c.kind, rec(c.old_version, c.old_build, c.kind), rec(c.new_version, c.new_build, c.kind))
                 for c in s.changed if (c.old_version, c.old_build) != (c.new_version, c.new_build)]
        if rows:
            envs.setdefault(s.env, {})[s.platform] = sorted(rows, key=lambda r: r["name"])
    return {"version": 1, "environment": envs}


def manifest_explicit(path: Path) -> Callable[[str], tuple[set[str], set[str]]]:
    """``explicit`` for :func:`pixi_update_json` from the pixi.toml at ``path``."""
    m = load_manifest(path)

    def names(env: str) -> tuple[set[str], set[str]]:
        conda, pypi = m.explicit(env)
        return {n.lower() for n in conda}, {_pypi_name(n) for n in pypi}

    return names


def manifest_beside(new: str, cwd: Optional[Path] = None) -> Path:
    """The pixi.toml a diff's NEW side belongs to: beside the lock (``REV:path``: beside ``path`` in
    the working tree)."""
    m = _REV_PATH.match(new)
    rel = new if present(Path(new)) or not m else m.group("path")
    return Path(cwd or ".") / Path(rel).parent / "pixi.toml"


def _channel_of(url: str, channels: list[str], kind: str = "conda") -> str:
    if kind != "conda":
        return ""  # PyPI packages come from an index, not a channel
    best = ""
    for c in channels:
        cc = c if c.endswith("/") else c + "/"
        if url.startswith(cc) and len(cc) > len(best):
            best = cc
    if best:
        return best
    # A package URL is <channel>/<subdir>/<file>
    return url.rsplit("/", 2)[0] + "/" if url.count("/") >= 3 else url


def _vkey(v: str) -> Optional[Version]:
    from rattler import Version

    try:
        return Version(v)
    except Exception:  # noqa: BLE001 - pypi versions rattler does not parse
        return None


def _change_kind(o: LockedPackage, n: LockedPackage, oc: str, nc: str) -> str:
    if o.version != n.version:
        ov, nv = _vkey(o.version), _vkey(n.version)
        if ov is not None and nv is not None:
            return "upgraded" if nv > ov else "downgraded"
        return "changed"
    if o.build != n.build:
        return "rebuilt"
    if o.sha256 and n.sha256 and o.sha256 != n.sha256:
        return "content"      # same name-version-build, different bytes: not reproducible, review it
    if oc != nc:
        return "moved"
    return ""


def _index(pkgs: list[LockedPackage]) -> dict[tuple[str, str], LockedPackage]:
    return {(p.kind, p.name): p for p in pkgs}


def _env_pairs(old: LockData, new: LockData, d: LockDiff) -> list[tuple[str, Optional[str], Optional[str]]]:
    """(label, old env, new env) to compare."""
    if len(old.envs) == 1 and len(new.envs) == 1 and set(old.envs) != set(new.envs):
        # Two single-environment locks (e.g. two specs' locks): compare them with each other
        # rather than reporting one environment removed and another added.
        (on,), (nn,) = tuple(old.envs), tuple(new.envs)
        return [(f"{on} → {nn}", on, nn)]
    d.envs_added = sorted(set(new.envs) - set(old.envs))
    d.envs_removed = sorted(set(old.envs) - set(new.envs))
    return [(n, n if n in old.envs else None, n if n in new.envs else None)
            for n in sorted(set(old.envs) | set(new.envs))]


def _platform_pairs(oe: Optional[LockedEnv], ne: Optional[LockedEnv]) -> list[tuple[str, Optional[str], Optional[str]]]:
    """(label, old platform, new platform): by name, and a platform renamed on the same subdir
    (``linux-64-cuda129`` → ``linux-64-cuda130``: a CUDA bump) compared with its predecessor, so the
    review shows what moved rather than everything removed and added."""
    old = {n: oe.subdirs.get(n, n) for n in oe.packages} if oe else {}
    new = {n: ne.subdirs.get(n, n) for n in ne.packages} if ne else {}
    pairs: list[tuple[str, Optional[str], Optional[str]]] = [(p, p, p) for p in sorted(set(old) & set(new))]
    gone = sorted(set(old) - set(new))
    came = sorted(set(new) - set(old))
    for o in list(gone):
        same = [n for n in came if new[n] == old[o]]
        if len(same) == 1 and sum(old[x] == old[o] for x in gone) == 1:
            pairs.append((f"{o} → {same[0]}", o, same[0]))
            gone.remove(o)
            came.remove(same[0])
    pairs += [(p, p, None) for p in gone] + [(p, None, p) for p in came]
    return sorted(pairs)


def _section(d: LockDiff, env_name: str, label: str, opkgs: list[LockedPackage], npkgs: list[LockedPackage],
             och: list[str], nch: list[str]) -> PlatformDiff:
    opk, npk = _index(opkgs), _index(npkgs)
    sec = PlatformDiff(env=env_name, platform=label)
    for key in sorted(set(opk) | set(npk), key=lambda k: (order_key(k[1]), k[0])):
        o, n = opk.get(key), npk.get(key)
        if o is None:
            assert n is not None   # the key is in one of the two
            sec.added.append(PackageEntry(n.name, n.version, n.build, n.kind, component_of(n.name),
                                          _channel_of(n.url, nch, n.kind)))
        elif n is None:
            sec.removed.append(PackageEntry(o.name, o.version, o.build, o.kind, component_of(o.name),
                                            _channel_of(o.url, och, o.kind)))
        else:
            oc, nc = _channel_of(o.url, och, o.kind), _channel_of(n.url, nch, n.kind)
            kind = _change_kind(o, n, oc, nc)
            if not kind:
                sec.unchanged += 1
                continue
            sec.changed.append(PackageChange(
                name=n.name, old_version=o.version, new_version=n.version, old_build=o.build,
                new_build=n.build, change=kind, kind=n.kind, component=component_of(n.name),
                old_build_id=o.build_id, new_build_id=n.build_id, old_channel=oc, new_channel=nc))
            if (o.build_id or n.build_id) and o.build_id != n.build_id:
                d.build_ids.append(BuildIdChange(env_name, label, n.name, o.build_id, n.build_id))
            elif (n.kind == "conda" and o.build != n.build
                  and component_of(n.name) in _BUILD_ID_COMPONENTS):
                d.build_ids.append(BuildIdChange(env_name, label, n.name, _build_id(o), _build_id(n)))
    return sec


def diff_data(old: LockData, new: LockData, *, old_label: str = "", new_label: str = "") -> LockDiff:
    d = LockDiff(old=old_label or str(old.path), new=new_label or str(new.path))
    pairs = _env_pairs(old, new, d)
    d.platforms_added = sorted(set(new.platforms) - set(old.platforms))
    d.platforms_removed = sorted(set(old.platforms) - set(new.platforms))
    _platform_changes(old, new, d)
    for env_name, o_name, n_name in pairs:
        oe = old.envs.get(o_name) if o_name else None
        ne = new.envs.get(n_name) if n_name else None
        och = list(oe.channels) if oe else []
        nch = list(ne.channels) if ne else []
        if oe and ne and och != nch:
            d.channels_changed.append({"env": env_name, "old": och, "new": nch})
        for label, op, np_ in _platform_pairs(oe, ne):
            opkgs = oe.packages.get(op, []) if oe and op else []
            npkgs = ne.packages.get(np_, []) if ne and np_ else []
            d.sections.append(_section(d, env_name, label, opkgs, npkgs, och, nch))
    return d


def _vp_name(spec: str) -> str:
    return spec.split("=", 1)[0].strip()


def _platform_changes(old: LockData, new: LockData, d: LockDiff) -> None:
    """Platforms present on both sides whose subdir or virtual packages (``__cuda``, ``__glibc``…)
    changed: a solve against ``__cuda=12.9`` instead of ``__cuda=12.4`` is a change a reviewer must
    see even when no package moved. Locks before v7 record no virtual packages, so a side older than
    v7 is not compared (an upgrade of the lock format is not a change of the machine)."""
    compare_vp = (old.version or 7) >= 7 and (new.version or 7) >= 7
    for plat in sorted(set(old.platforms) & set(new.platforms)):
        op, np_ = old.platforms[plat], new.platforms[plat]
        if str(op.get("subdir") or plat) != str(np_.get("subdir") or plat):
            d.platforms_changed.append({"platform": plat, "old_subdir": str(op.get("subdir") or plat),
                                        "new_subdir": str(np_.get("subdir") or plat)})
        if not compare_vp:
            continue
        ov = {_vp_name(v): str(v) for v in op.get("virtual_packages") or []}
        nv = {_vp_name(v): str(v) for v in np_.get("virtual_packages") or []}
        for name in sorted(set(ov) | set(nv), key=lambda n: (n != "__cuda", n)):
            if ov.get(name) != nv.get(name):
                d.virtual_packages.append(VirtualPackageChange(plat, name, ov.get(name), nv.get(name)))


_REV_PATH = re.compile(r"^(?P<rev>[^:\s]+):(?P<path>.+)$")


def load_lock_arg(arg: str, *, cwd: Optional[Path] = None) -> tuple[LockData, str]:
    """A lock named by path, or by ``REV:path`` in the git repository at ``cwd``."""
    p = Path(arg)
    if present(p):
        return read_lock(p), arg
    m = _REV_PATH.match(arg)
    if not m:
        raise UserError("lock file not found", file=arg, accepted="a path, or REV:path such as HEAD~1:pixi.lock")
    rev = operand(m.group("rev"), field="REV", file=arg, accepted="REV:path such as HEAD~1:pixi.lock")
    rel = m.group("path")
    try:
        out = subprocess.run(["git", "show", "--end-of-options", f"{rev}:{rel}"], cwd=cwd, capture_output=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"cannot run git: {exc}", file=arg) from None
    if out.returncode != 0:
        msg = (out.stderr.decode("utf-8", "replace").strip().splitlines() or ["git show failed"])[0]
        raise UserError(f"cannot read {rel} at {rev}: {msg}", file=arg, accepted="REV:path of a committed lock")
    with tempfile.TemporaryDirectory(prefix="deepep-env-diff-") as tmp:
        f = Path(tmp) / Path(rel).name
        f.write_bytes(out.stdout)
        try:
            data = read_lock(f)
        except UserError as exc:
            # Name the lock as the user did (REV:path), not the temporary file it was read from.
            raise UserError(exc.message, file=arg, field=exc.field, accepted=exc.accepted) from None
    data.path = Path(arg)
    return data, arg


def only_envs(lock: LockData, envs: list[str]) -> LockData:
    """``lock`` with the environments ``envs`` only (and the platforms they use): one environment of
    the project's pixi.lock reviewed on its own."""
    keep = {n: e for n, e in lock.envs.items() if n in envs}
    used = {p for e in keep.values() for p in e.packages}
    return LockData(path=lock.path, platforms={n: v for n, v in lock.platforms.items() if n in used}, envs=keep,
                    meta={n: m for n, m in lock.meta.items() if n in envs}, version=lock.version)


def diff_locks(old: str, new: str, *, cwd: Optional[Path] = None, envs: Optional[list[str]] = None) -> LockDiff:
    """``deepep-env diff OLD NEW [-e ENV]…``."""
    o, ol = load_lock_arg(old, cwd=cwd)
    n, nl = load_lock_arg(new, cwd=cwd)
    if envs:
        unknown = sorted(set(envs) - set(o.envs) - set(n.envs))
        if unknown:
            raise UserError(f"no environment {', '.join(map(repr, unknown))} in either lock", field="--env",
                            accepted=", ".join(sorted(set(o.envs) | set(n.envs))) or "none")
        o, n = only_envs(o, envs), only_envs(n, envs)
    d = diff_data(o, n, old_label=ol, new_label=nl)
    d.digests_old, d.digests_new = all_digests(o), all_digests(n)
    return d
