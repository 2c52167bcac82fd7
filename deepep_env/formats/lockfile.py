"""pixi.lock (v7, rattler_lock) read into plain data, and written from solved records.

Reading goes through py-rattler, so every lock version pixi ever wrote (v1 … v7) reads the same;
what comes out is plain dataclasses that the check, the diff, the export and the installer share.

Writing: one pixi.lock holds every environment (the project's root ``pixi.lock``, the file pixi
reads beside pixi.toml). :func:`write_env` replaces one environment and keeps every other one as
it was: their channels and records are read back and written again by rattler, which writes a
record the same bytes it read (tested), less ``indexed_timestamp`` (:func:`_inputs_only`). rattler
writes the lock; deepep-env prepends one comment line with its provenance per environment (``# deepep-env-lock: {json}``: spec version, our build
ids, channels). YAML comments are ignored by pixi and rattler, so the file stays a plain pixi.lock;
the line is what `lock --check` and reviewers read to see which build ids a lock was made from. A
lock pixi rewrote has no such line: build ids are then read from build strings (``h<id>_N``).
"""
from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Optional, Sequence

from deepep_env.base.atomic import write_bytes
from deepep_env.base.channels.auth import check_url_has_no_secret
from deepep_env.base.errors import UserError
from deepep_env.formats.stamps import LOCK_META
from deepep_env.formats.lock_platforms import ALIAS_RE, aliases, canonical_name
from deepep_env.base.rattler_errors import rattler_errors
from deepep_env.base.readfile import read_text

if TYPE_CHECKING:  # annotations only: rattler loads on first use
    from rattler.lock import LockPlatform

META_PREFIX = "# deepep-env-lock: "
# Its stamp is formats.LOCK_META. v1: one environment's fields at the top level (``env`` names it);
# v2: ``envs`` maps each environment to those fields. Both read; v2 is written.
OUR_BUILD = re.compile(r"^h([0-9a-f]{10})_(\d+)$")


def build_id_of(build: str) -> Optional[str]:
    """The short build id in a build string written by deepep-env (``h<10 hex>_<n>``)."""
    m = OUR_BUILD.match(build or "")
    return m.group(1) if m else None


@dataclass(frozen=True)
class LockedPackage:
    kind: str                      # "conda" or "pypi"
    name: str
    version: str
    build: str = ""
    subdir: str = ""
    url: str = ""
    sha256: Optional[str] = None   # hex, as in the lock
    md5: Optional[str] = None
    size: Optional[int] = None
    depends: tuple[str, ...] = ()
    constrains: tuple[str, ...] = ()
    file_name: str = ""

    @property
    def build_id(self) -> Optional[str]:
        return build_id_of(self.build)

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.name)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "version": self.version, "build": self.build,
                "subdir": self.subdir, "url": self.url, "sha256": self.sha256, "size": self.size}


@dataclass
class LockedEnv:
    name: str
    channels: list[str]
    packages: dict[str, list[LockedPackage]] = field(default_factory=dict)  # platform name → packages
    subdirs: dict[str, str] = field(default_factory=dict)                  # platform name → conda subdir

    def packages_for(self, subdir: str) -> list[LockedPackage]:
        """The packages of the env's platform on ``subdir`` (a spec has one CUDA, so one platform)."""
        return [p for name, pkgs in self.packages.items() if self.subdirs.get(name) == subdir for p in pkgs]


@dataclass
class LockData:
    path: Path
    platforms: dict[str, dict[str, Any]]   # name → {"subdir", "virtual_packages"}
    envs: dict[str, LockedEnv]
    meta: dict[str, dict[str, Any]] = field(default_factory=dict)  # env → deepep-env's provenance
    version: Optional[int] = None          # the lock format (`version:` line), None when not found
    # The rattler LockFile these fields were read from: its records are what install and the writer
    # need, so the file is parsed once.
    rattler: Any = field(default=None, repr=False, compare=False)

    def env(self, name: str) -> Optional[LockedEnv]:
        if name in self.envs:
            return self.envs[name]
        return None

    def conda_records(self, env: str, platform: str) -> list:
        """The rattler ``RepoDataRecord`` s of one environment and platform (what ``install`` needs)."""
        e = self.rattler.environment(env)
        if e is None:
            raise UserError(f"the lock has no environment {env!r}", file=self.path, accepted=", ".join(self.envs))
        names = row_names(self.rattler.platforms())
        for p in e.platforms():
            if names[p.name] == platform:
                return e.conda_repodata_records_for_platform(p) or []
        raise UserError(f"the lock has no platform {platform!r} for {env}", file=self.path,
                        accepted=", ".join(names[p.name] for p in e.platforms()) or "none")

    def meta_for(self, env: str) -> dict[str, Any]:
        return dict(self.meta.get(env) or {})


def _hex(b: Any) -> Optional[str]:
    if b is None:
        return None
    return b.hex() if isinstance(b, (bytes, bytearray)) else str(b)


def read_meta(text: str, path: Path) -> dict[str, dict[str, Any]]:
    """env → provenance fields, from the header line (none: a lock pixi or rattler wrote)."""
    for line in text.splitlines()[:5]:
        if line.startswith(META_PREFIX):
            try:
                meta = json.loads(line[len(META_PREFIX):])
            except ValueError:
                meta = None
            if LOCK_META.check(meta, file=path, field="# deepep-env-lock") == 1:   # one env per header
                return {str(meta.get("env")): {k: v for k, v in meta.items() if k not in ("format", "env")}}
            envs = meta.get("envs")
            if not isinstance(envs, dict) or not all(isinstance(v, dict) for v in envs.values()):
                raise UserError("'envs' must map environment names to objects", file=path, field="# deepep-env-lock")
            return envs
    return {}


_VERSION_LINE = re.compile(r"^version:\s*(\d+)\s*$", re.M)


def _read_version(text: str) -> Optional[int]:
    m = _VERSION_LINE.search(text)
    return int(m.group(1)) if m else None


def row_names(platforms: Iterable[LockPlatform]) -> dict[str, str]:
    """On-disk platform name → the name readers use: a ``pN`` alias (pixi's and ours, see
    formats/lock_platforms.py) becomes the spec's name for its identity (``linux-64-cuda130``), as pixi's
    ``align_platform_names`` restores the manifest's; any other name stays."""
    disk = {p.name: (str(p.subdir), list(p.virtual_packages)) for p in platforms}
    out = {n: n for n in disk}
    for n, (subdir, vps) in disk.items():
        name = canonical_name(subdir, vps) if ALIAS_RE.match(n) else ""
        if name and name not in disk and name not in out.values():
            out[n] = name
    return out


def read_lock(path: str | Path) -> LockData:
    """Parse a pixi.lock into :class:`LockData`; a malformed file is a one-line :class:`UserError`."""
    from rattler import LockFile

    path = Path(path)
    text = read_text(path, what="lock", missing="lock file not found",
                     accepted="a pixi.lock (v1-v7) written by `deepep-env lock ENV`")
    # Versions 1-3 (the conda-lock layout pixi wrote until 0.13) read too: rattler_lock upgrades them,
    # and real pixi repositories carry such locks in their history (prefix-dev/pixi examples/qgis).
    version = _read_version(text)
    with rattler_errors("not a readable pixi.lock ({error})", file=path, first_line=True,
                        accepted="a pixi.lock (v1-v7); regenerate it with `deepep-env lock ENV`"):
        lf = LockFile.from_path(path)
        names = row_names(lf.platforms())
        platforms = {names[p.name]: {"subdir": str(p.subdir), "virtual_packages": list(p.virtual_packages)}
                     for p in lf.platforms()}
        envs: dict[str, LockedEnv] = {}
        for name, e in lf.environments():
            le = LockedEnv(name=name, channels=[str(c) for c in e.channels()])
            for plat, pkgs in e.packages_by_platform().items():
                le.packages[names[plat.name]] = [_locked(p, str(plat.subdir)) for p in pkgs]
                le.subdirs[names[plat.name]] = str(plat.subdir)
            envs[name] = le
    refuse_secrets(lf, path)
    return LockData(path=path, platforms=platforms, envs=envs, meta=read_meta(text, path), version=version, rattler=lf)


def refuse_secrets(lf: Any, path: Path) -> None:
    """A lock is committed and reviewed: a credential in a channel or package URL (written by hand or
    by another tool) is refused on read, in one line that does not repeat it, before any report of
    the lock could print it. ``lf``: the rattler LockFile; every reader of a lock calls this
    (``read_lock``: install, diff, lock --check; ``pixi verdict``)."""
    names = row_names(lf.platforms())
    for name, env in lf.environments():
        for c in env.channels():
            check_url_has_no_secret(str(c), field=f"environments.{name}.channels", file=path)
        for plat, pkgs in env.packages_by_platform().items():
            for p in pkgs:
                check_url_has_no_secret(str(p.location), field=f"environments.{name}.packages.{names[plat.name]}",
                                        file=path)


def _locked(p: Any, subdir: str) -> LockedPackage:
    from rattler import CondaLockedSourcePackage, PypiLockedPackage

    if isinstance(p, PypiLockedPackage):
        version = getattr(p, "version", None)
        return LockedPackage(kind="pypi", name=str(p.name), version="" if version is None else str(version),
                             url=str(p.location), subdir=subdir)
    if isinstance(p, CondaLockedSourcePackage):
        # pixi-build source packages (`conda: .` or a git/path location) have a package record but no
        # repodata record (no URL, no sha256): found in real pixi ≥0.40 locks (prefix-dev/pixi
        # tests/data/pixi-build/*), which made read_lock fail on them.
        r = p.package_record
        r = r() if callable(r) else r
        if r is None:
            # v7 source packages may carry no record at all (a name and a location only).
            version = getattr(p, "version", None)
            return LockedPackage(kind="conda", name=str(p.name), version="" if version is None else str(version),
                                 subdir=subdir, url=str(p.location))
        return LockedPackage(
            kind="conda", name=r.name.normalized, version=str(r.version), build=str(r.build),
            subdir=str(r.subdir), url=str(p.location), depends=tuple(r.depends), constrains=tuple(r.constrains),
        )
    r = p.repo_data_record()
    return LockedPackage(
        kind="conda", name=r.name.normalized, version=str(r.version), build=str(r.build), subdir=str(r.subdir),
        url=r.url, sha256=_hex(r.sha256), md5=_hex(r.md5), size=r.size,
        depends=tuple(r.depends), constrains=tuple(r.constrains), file_name=r.file_name,
    )


@dataclass
class EnvSection:
    """One environment as the writer needs it: channels, and per platform the rattler records."""

    channels: list[str]
    records: dict[str, list]                      # platform name → RepoDataRecords
    meta: dict[str, Any] = field(default_factory=dict)


def _existing_sections(path: Path) -> tuple[dict[str, EnvSection], dict[str, tuple[str, list[str]]]]:
    """Every environment of the lock at ``path`` (none if absent), and its platform rows by name:
    (subdir, virtual packages)."""
    if not path.exists():
        return {}, {}
    data = read_lock(path)   # a lock we cannot read is one clear line, never overwritten
    for name, env in data.envs.items():
        pypi = [p.name for pkgs in env.packages.values() for p in pkgs if p.kind != "conda" or not p.sha256]
        if pypi:
            raise UserError(f"environment {name!r} has packages deepep-env does not write ({', '.join(pypi[:3])}); "
                            "not rewriting the lock", file=path, accepted="a lock of conda binary packages only")
    lf = data.rattler
    names = row_names(lf.platforms())
    plats = {names[p.name]: (str(p.subdir), list(p.virtual_packages)) for p in lf.platforms()}
    out: dict[str, EnvSection] = {}
    for name, e in lf.environments():
        recs = {names[p.name]: list(e.conda_repodata_records_for_platform(p) or []) for p in e.platforms()}
        out[name] = EnvSection([str(c) for c in e.channels()], recs, data.meta_for(name))
    return out, plats


def env_sections(path: Path) -> dict[str, EnvSection]:
    """Every environment of the lock at ``path`` as the writer takes them (none if absent)."""
    return _existing_sections(path)[0]


def _refuse_two_records_for_one_url(path: Path, env: str, sections: dict[str, EnvSection]) -> None:
    """A lock names each package file once (rattler keeps one record per URL): environments that
    share a URL must agree on its bytes. Disagreement means the file at that URL was rebuilt with
    other bytes (found on GPUs: a non-reproducible build) — refused, never resolved silently."""
    seen: dict[str, tuple[str, str]] = {}
    for name in [env] + sorted(n for n in sections if n != env):
        for recs in sections[name].records.values():
            for r in recs:
                sha = r.sha256.hex() if isinstance(r.sha256, (bytes, bytearray)) else str(r.sha256)
                first = seen.setdefault(r.url, (name, sha))
                if first[1] != sha:
                    raise UserError(f"{r.url}: environment {first[0]!r} now has sha256 {first[1][:16]}…, environment "
                                    f"{name!r} locks {sha[:16]}…: one file, two contents; nothing written", file=path,
                                    accepted=f"relock {name!r} too (`deepep-env lock {name}`), or make the build "
                                             "reproducible (same id, same bytes)")


def _inputs_only(rec: Any) -> Any:
    """The record without ``indexed_timestamp``: when a channel was indexed is a fact of the machine
    that indexed it, not of the package (two machines indexing the same bytes would write two locks),
    and pixi drops it on any rewrite. Every record, every channel, kept environments too."""
    rec.indexed_timestamp = None
    return rec


def write_env(path: Path, env: str, section: EnvSection, platforms: list) -> tuple[bytes, bool]:
    """Write ``env`` into the pixi.lock at ``path`` (created if absent), every other environment kept
    as it is; atomically. ``platforms``: the workspace's :class:`LockPlatformDef` s in the
    manifest's declaration order, ``env``'s among them (a platform of the same name in the lock is
    replaced: pixi.toml declares one definition per name). As pixi writes it: every workspace
    platform gets a row (pixi's ``default`` environment covers them all), rich platforms under
    ``pN`` aliases numbered in that order, and a ``default`` environment (the project's has no
    dependencies) is kept or written empty. Returns (bytes, changed); an unchanged lock is not
    rewritten (its mtime stays)."""
    return write_envs(path, {env: section}, platforms)


def write_envs(path: Path, new: dict[str, EnvSection], platforms: list,
               drop: Sequence[str] = ()) -> tuple[bytes, bool]:
    """:func:`write_env` for several environments at once: one read of the lock, one write. ``drop``:
    environments to leave out (``lock --prune``: their spec is gone)."""
    from rattler import LockChannel, LockFile, LockPlatform
    from rattler.platform.subdir import Subdir

    sections, old_plats = _existing_sections(path)
    for name in drop:
        sections.pop(name, None)
    sections.update(new)
    for env in sorted(new):
        _refuse_two_records_for_one_url(path, env, sections)
    sections.setdefault("default", EnvSection([], {}))
    defs = dict(old_plats)
    defs.update({p.name: (p.subdir, p.strings) for p in platforms})
    used = {pn for s in sections.values() for pn in s.records} | {p.name for p in platforms}
    alias = aliases([p.name for p in platforms], used)
    lf = LockFile([LockPlatform(alias[n], Subdir(defs[n][0]), list(defs[n][1])) for n in sorted(used)])
    by_name = {p.name: p for p in lf.platforms()}   # field notes §5: the lock's own platform objects
    for name in sorted(sections):
        s = sections[name]
        lf.set_channels(name, [LockChannel(c) for c in s.channels])
        for pname, recs in sorted(s.records.items()):
            for rec in sorted(recs, key=lambda r: (r.name.normalized, str(r.version), str(r.build))):
                lf.add_conda_package(name, by_name[alias[pname]], _inputs_only(rec))
    with tempfile.TemporaryDirectory(prefix="deepep-env-lock-") as tmp:
        tmp_path = Path(tmp) / "pixi.lock"
        lf.to_path(tmp_path)
        body = tmp_path.read_bytes()
    meta = {"format": LOCK_META.stamp, "envs": {n: sections[n].meta for n in sorted(sections) if sections[n].meta}}
    header = (META_PREFIX + json.dumps(meta, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")
    data = header + body
    if path.is_file() and path.read_bytes() == data:
        return data, False
    write_bytes(path, data)
    return data, True
