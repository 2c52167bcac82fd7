"""pixi.lock (v7, rattler_lock) read into plain data, and written from solved records.

Reading goes through py-rattler, so every lock version pixi ever wrote (v1 … v7) reads the same;
what comes out is plain dataclasses that the check, the diff, the export and the installer share.

Writing: rattler writes the lock; deepep-env prepends one comment line with its provenance
(``# deepep-env-lock: {json}``: env, spec version, our build ids, channels). YAML comments are
ignored by pixi and rattler, so the file stays a plain pixi.lock; the line is what `lock --check`
and reviewers read to see which build ids a lock was made from.
"""
from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from deepep_env.errors import UserError

META_PREFIX = "# deepep-env-lock: "
META_FORMAT = "deepep-env/lock-meta/v1"
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


@dataclass
class LockData:
    path: Path
    platforms: dict[str, dict[str, Any]]   # name → {"subdir", "virtual_packages"}
    envs: dict[str, LockedEnv]
    meta: dict[str, Any] = field(default_factory=dict)
    version: Optional[int] = None          # the lock format (`version:` line), None when not found

    def env(self, name: str) -> Optional[LockedEnv]:
        if name in self.envs:
            return self.envs[name]
        return None


def _hex(b: Any) -> Optional[str]:
    if b is None:
        return None
    return b.hex() if isinstance(b, (bytes, bytearray)) else str(b)


def _read_meta(text: str) -> dict[str, Any]:
    for line in text.splitlines()[:5]:
        if line.startswith(META_PREFIX):
            try:
                meta = json.loads(line[len(META_PREFIX):])
            except ValueError:
                return {}
            return meta if isinstance(meta, dict) else {}
    return {}


_VERSION_LINE = re.compile(r"^version:\s*(\d+)\s*$", re.M)


def _read_version(text: str) -> Optional[int]:
    m = _VERSION_LINE.search(text)
    return int(m.group(1)) if m else None


def read_lock(path: str | Path) -> LockData:
    """Parse a pixi.lock into :class:`LockData`; a malformed file is a one-line :class:`UserError`."""
    from rattler import LockFile

    path = Path(path)
    if path.is_dir():
        raise UserError("is a directory, not a lock file", file=path, accepted="a pixi.lock file")
    if not path.is_file():
        raise UserError("lock file not found", file=path, accepted="a pixi.lock written by `deepep-env lock ENV`")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError("not a pixi.lock (not UTF-8 text)", file=path, accepted="a pixi.lock (v1-v7)") from None
    except OSError as exc:
        raise UserError(f"cannot read lock: {exc.strerror or exc}", file=path) from None
    # Versions 1-3 (the conda-lock layout pixi wrote until 0.13) read too: rattler_lock upgrades them,
    # and real pixi repositories carry such locks in their history (prefix-dev/pixi examples/qgis).
    version = _read_version(text)
    try:
        lf = LockFile.from_path(path)
        platforms = {p.name: {"subdir": str(p.subdir), "virtual_packages": list(p.virtual_packages)}
                     for p in lf.platforms()}
        envs: dict[str, LockedEnv] = {}
        for name, e in lf.environments():
            le = LockedEnv(name=name, channels=[str(c) for c in e.channels()])
            for plat, pkgs in e.packages_by_platform().items():
                le.packages[plat.name] = [_locked(p, str(plat.subdir)) for p in pkgs]
            envs[name] = le
    except UserError:
        raise
    except BaseException as exc:  # noqa: BLE001 - rattler raises its own types (and Rust panics)
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"not a readable pixi.lock ({first})", file=path,
                        accepted="a pixi.lock (v1-v7); regenerate it with `deepep-env lock ENV`") from None
    return LockData(path=path, platforms=platforms, envs=envs, meta=_read_meta(text), version=version)


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


def conda_records(path: str | Path, env: str, platform: str) -> list:
    """The rattler ``RepoDataRecord`` s of one environment and platform (what ``install`` needs)."""
    from rattler import LockFile

    try:
        lf = LockFile.from_path(Path(path))
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise UserError(f"not a readable pixi.lock ({str(exc).splitlines()[0] if str(exc) else exc!r})",
                        file=path) from None
    e = lf.environment(env)
    if e is None:
        raise UserError(f"the lock has no environment {env!r}", file=path,
                        accepted=", ".join(n for n, _ in lf.environments()))
    for p in e.platforms():
        if p.name == platform:
            return e.conda_repodata_records_for_platform(p) or []
    raise UserError(f"the lock has no platform {platform!r} for {env}", file=path,
                    accepted=", ".join(p.name for p in e.platforms()) or "none")


def write_lock(path: Path, *, env: str, channels: list[str], platforms: dict[str, list[str]],
               records: dict[str, list], meta: dict[str, Any]) -> tuple[bytes, bool]:
    """Write a pixi.lock v7 atomically; returns (its bytes, whether the file changed). ``platforms``:
    subdir → virtual package strings; ``records``: subdir → rattler RepoDataRecords (URLs already as
    the lock must name them). An unchanged lock is not rewritten (its mtime stays)."""
    from rattler import LockChannel, LockFile, LockPlatform

    from deepep_env.atomic import write_bytes

    lf = LockFile([LockPlatform(s, virtual_packages=list(v)) for s, v in platforms.items()])
    # Field notes §5: use the LockPlatform objects the lock itself hands back.
    by_name = {p.name: p for p in lf.platforms()}
    lf.set_channels(env, [LockChannel(c) for c in channels])
    for subdir, recs in records.items():
        for rec in sorted(recs, key=lambda r: r.name.normalized):
            lf.add_conda_package(env, by_name[subdir], rec)
    with tempfile.TemporaryDirectory(prefix="deepep-env-lock-") as tmp:
        tmp_path = Path(tmp) / "pixi.lock"
        lf.to_path(tmp_path)
        body = tmp_path.read_bytes()
    header = (META_PREFIX + json.dumps({"format": META_FORMAT, **meta}, sort_keys=True, separators=(",", ":"))
              + "\n").encode("utf-8")
    data = header + body
    if path.is_file() and path.read_bytes() == data:
        return data, False
    write_bytes(path, data)
    return data, True
