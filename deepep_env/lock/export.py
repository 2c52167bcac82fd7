"""One environment of pixi.lock → a conda-lock v1 file (``ENV.conda-lock.yml``) and its source
(``ENV.environment.yml``), for those who install without pixi: ``conda-lock install`` and
``micromamba create -f`` read the first. pixi.lock stays the one source of truth: both files are
made from it alone, byte for byte the same for the same lock (sorted, no time, no host path).

The packages go through conda-lock's own pydantic models (``conda_lock.lockfile.v2prelim.models``,
written as v1, the version micromamba reads), so conda-lock's parser accepts what is written.
``metadata.sources`` names the environment file beside it: conda-lock parses every source that is
not ``meta.yaml``/``pyproject.toml`` as an environment.yml (a pixi.lock there raised ``KeyError:
'dependencies'``), and micromamba refuses a lock with no source. That file pins every locked
package exactly, so a re-solve from it (``conda-lock -f ENV.environment.yml``) can only give the lock.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import yaml

from deepep_env.base.atomic import write_bytes
from deepep_env.base.errors import StaleError, UserError
from deepep_env.formats.lockfile import LockData, LockedEnv, LockedPackage, read_lock
from deepep_env.lock.solve import default_lock_path
from deepep_env.base.readfile import present

if TYPE_CHECKING:  # annotations only: no import at run time
    from conda_lock.lockfile.v2prelim.models import Lockfile

    from deepep_env.base.project import Project


LOCK_SUFFIX = ".conda-lock.yml"   # micromamba takes a `*-lock.yml` for a conda-lock file
SOURCE_SUFFIX = ".environment.yml"
_DEP = re.compile(r"^\s*([A-Za-z0-9_][A-Za-z0-9_.\-]*)\s*(.*)$")
# conda-lock's platform selectors (src_parser/selectors.py): one that names exactly one subdir.
_SELECTOR = {"linux-64": "linux64", "linux-aarch64": "aarch64", "linux-ppc64le": "ppc64le",
             "osx-64": "osx64", "osx-arm64": "arm64", "win-64": "win64"}


def source_for(lock_file: Path) -> Path:
    """The environment file a conda-lock file names as its source: same folder, same stem."""
    name = lock_file.name
    stem = name[: -len(LOCK_SUFFIX)] if name.endswith(LOCK_SUFFIX) else lock_file.stem
    return lock_file.with_name(stem + SOURCE_SUFFIX)


@dataclass(frozen=True)
class ExportFiles:
    """What one environment exports: each file's path and bytes."""

    env: str
    lock_file: Path
    source_file: Path
    files: dict[Path, bytes]
    packages: int
    platforms: list[str]


@dataclass
class ExportResult:
    env: str
    path: Path
    packages: int
    platforms: list[str]
    status: str = "written"          # "written" | "unchanged" | "fresh"

    def to_dict(self) -> dict:
        return {"env": self.env, "path": str(self.path), "packages": self.packages, "platforms": self.platforms,
                "status": self.status}


def _dependencies(depends: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for dep in depends:
        m = _DEP.match(dep)
        if not m:
            continue
        out[m.group(1)] = m.group(2).strip() or "*"
    return out


def _content_hash(pkgs: list[LockedPackage]) -> str:
    h = hashlib.sha256()
    for p in sorted(pkgs, key=lambda p: p.url):
        h.update(f"{p.url}\0{p.sha256 or ''}\n".encode())
    return h.hexdigest()


def _env_of(data: LockData, env: str) -> LockedEnv:
    e = data.env(env)
    if e is None:
        raise UserError(f"the lock has no environment {env!r}", file=data.path, accepted=", ".join(data.envs))
    return e


def _per_subdir(data: LockData, e: LockedEnv, platform: Optional[str]) -> list[tuple[str, list[LockedPackage]]]:
    """conda-lock keys everything by subdir; pixi's rich platforms can put several platforms (e.g.
    ``linux-64-cuda129`` and ``linux-64-cuda130``) on one subdir. Identical package sets export once;
    different ones need ``--platform`` to say which."""
    by: dict[str, list[tuple[str, list[LockedPackage]]]] = {}
    for plat, pkgs in sorted(e.packages.items()):
        if platform and plat != platform:
            continue
        by.setdefault(data.platforms.get(plat, {}).get("subdir", plat), []).append((plat, pkgs))
    if platform and not by:
        raise UserError(f"the lock has no platform {platform!r} in this environment", file=data.path,
                        field="--platform", accepted=", ".join(sorted(e.packages)))
    out = []
    for subdir, plats in sorted(by.items()):
        urls = {frozenset(p.url for p in pkgs) for _, pkgs in plats}
        if len(urls) > 1:
            raise UserError(f"platforms {', '.join(p for p, _ in plats)} share subdir {subdir} with different packages; "
                            "conda-lock has one package set per subdir", file=data.path, field="--platform",
                            accepted=" or ".join(p for p, _ in plats))
        out.append((subdir, sorted(plats[0][1], key=lambda p: (p.kind, p.name))))
    return out


def _refuse_source_package(p: LockedPackage, env: str, path: Path) -> None:
    if p.kind == "conda" and (not p.sha256 or "://" not in p.url):
        raise UserError(f"{p.name} is a pixi-build source package (built from {p.url or 'a source'}): "
                        "conda-lock has no form for it", file=path, field=f"environments.{env}",
                        accepted="a lock whose packages are all built (lock the source package's output)")


def _locked_dependency(p: LockedPackage, subdir: str) -> Any:
    from conda_lock.lockfile.v2prelim.models import HashModel, LockedDependency

    if p.kind == "pypi":
        return LockedDependency(name=p.name, version=p.version, manager="pip", platform=subdir, dependencies={},
                                url=p.url, hash=HashModel(), categories={"main"})
    return LockedDependency(name=p.name, version=p.version, manager="conda", platform=subdir,
                            dependencies=_dependencies(p.depends), url=p.url,
                            hash=HashModel(md5=p.md5, sha256=p.sha256), categories={"main"}, build=p.build)


def _model(data: LockData, env: str, source_name: str, per_subdir: list[tuple[str, list[LockedPackage]]]) -> Lockfile:
    """The conda-lock ``Lockfile`` model of one environment."""
    from conda_lock.lockfile.v2prelim.models import Lockfile, LockMeta
    from conda_lock.models.channel import Channel

    e = _env_of(data, env)
    packages: list = []
    content_hash: dict[str, str] = {}
    for subdir, pkgs in per_subdir:
        content_hash[subdir] = _content_hash([p for p in pkgs if p.kind == "conda"])
        for p in pkgs:
            _refuse_source_package(p, env, data.path)
            packages.append(_locked_dependency(p, subdir))
    # conda-lock: "paths to source files, relative to the parent directory of the lockfile".
    meta = LockMeta(content_hash=content_hash, channels=[Channel.from_string(c.rstrip("/")) for c in e.channels],
                    platforms=[s for s, _ in per_subdir], sources=[source_name])
    model = Lockfile(package=packages, metadata=meta)
    model.alphasort_inplace()
    return model


def to_conda_lock(lock_path: Path, env: str, *, output: Optional[Path] = None,
                  platform: Optional[str] = None) -> Lockfile:
    """The conda-lock ``Lockfile`` model of one environment of a pixi lock (sources: the environment
    file beside ``output``)."""
    out = Path(output) if output else Path(f"{env}{LOCK_SUFFIX}")
    data = read_lock(lock_path)
    return _model(data, env, source_for(out).name, _per_subdir(data, _env_of(data, env), platform))


def _header(lines: list[str]) -> str:
    return "".join(f"# {ln}".rstrip() + "\n" for ln in lines)


def _lock_bytes(model: Any, env: str, name: str) -> bytes:
    head = _header([
        f"conda-lock file of environment {env}, generated from pixi.lock by `deepep-env export`. Do not edit:",
        "pixi.lock is the source of truth; after a relock run `deepep-env export --all` (CI runs it with --check).",
        "Install it without pixi:",
        f"    conda-lock install -n YOURENV {name}",
        f"    micromamba create -n YOURENV -f {name}",
    ])
    body = yaml.safe_dump(model.to_v1().dict_for_output(), sort_keys=False, default_flow_style=False)
    return (head + body).encode("utf-8")


def _scalar(value: str) -> str:
    """``value`` as one YAML list item's scalar (quoted only where YAML needs it)."""
    return yaml.safe_dump([value], default_flow_style=False, width=1 << 16)[2:].rstrip("\n")


def _pin(p: LockedPackage) -> str:
    return f"{p.name}=={p.version}" if p.kind == "pypi" else f"{p.name} =={p.version} {p.build}"


def _pins(per_subdir: list[tuple[str, list[LockedPackage]]], kind: str, path: Path) -> list[str]:
    """Every package of ``kind`` pinned exactly; a pin not on every subdir carries its subdir's selector."""
    where: dict[str, list[str]] = {}
    for subdir, pkgs in per_subdir:
        for p in pkgs:
            if p.kind == kind:
                where.setdefault(_pin(p), []).append(subdir)
    lines = []
    for pin, subdirs in sorted(where.items()):
        if len(subdirs) == len(per_subdir):
            lines.append(_scalar(pin))
            continue
        for s in subdirs:
            if s not in _SELECTOR:
                raise UserError(f"conda-lock has no platform selector for subdir {s}", file=path,
                                accepted=", ".join(_SELECTOR))
            lines.append(f"{_scalar(pin)}  # [{_SELECTOR[s]}]")
    return lines


def _source_bytes(data: LockData, env: str, per_subdir: list[tuple[str, list[LockedPackage]]]) -> bytes:
    head = _header([
        f"The source of {env}{LOCK_SUFFIX} (its metadata.sources), generated from pixi.lock by",
        "`deepep-env export`: every locked package pinned exactly. Do not edit.",
    ])
    top = {"name": env, "channels": [c.rstrip("/") for c in _env_of(data, env).channels],
           "platforms": [s for s, _ in per_subdir]}
    lines = [yaml.safe_dump(top, sort_keys=False, default_flow_style=False).rstrip("\n"), "dependencies:"]
    lines += [f"- {ln}" for ln in _pins(per_subdir, "conda", data.path)]
    pip = _pins(per_subdir, "pypi", data.path)
    if pip:
        lines += ["- pip:"] + [f"  - {ln}" for ln in pip]
    return (head + "\n".join(lines) + "\n").encode("utf-8")


def render_env(data: LockData, env: str, lock_file: Path, platform: Optional[str] = None) -> ExportFiles:
    """The two files of ``env``'s export, as bytes (nothing written)."""
    source = source_for(lock_file)
    per_subdir = _per_subdir(data, _env_of(data, env), platform)
    model = _model(data, env, source.name, per_subdir)
    files = {lock_file: _lock_bytes(model, env, lock_file.name), source: _source_bytes(data, env, per_subdir)}
    return ExportFiles(env=env, lock_file=lock_file, source_file=source, files=files,
                       packages=len(model.package), platforms=list(model.metadata.platforms))


def stale(files: dict[Path, bytes]) -> list[Path]:
    """The files whose bytes on disk are not these (missing ones included)."""
    return [p for p, b in files.items() if not (p.is_file() and p.read_bytes() == b)]


def write_files(files: dict[Path, bytes]) -> bool:
    """Write the files that differ, each atomically (temp + rename); True when any was written."""
    todo = stale(files)
    for p in todo:
        write_bytes(p, files[p])
    return bool(todo)


def export_conda_lock(env: str, project: Project, *, lock_path: Optional[str | Path] = None,
                      output: Optional[str | Path] = None, platform: Optional[str] = None,
                      check: bool = False) -> ExportResult:
    """``deepep-env export ENV``: ``lockfiles/ENV.conda-lock.yml`` and its source (``--check``: write
    nothing, :class:`StaleError` naming the first file that differs)."""
    src = Path(lock_path) if lock_path else default_lock_path(project, env)
    if not present(src):
        raise UserError("no lock to export", file=src, accepted=f"run `deepep-env lock {env}` first")
    out = Path(output) if output else project.root / "lockfiles" / f"{env}{LOCK_SUFFIX}"
    ex = render_env(read_lock(src), env, out, platform)
    res = ExportResult(env=env, path=out, packages=ex.packages, platforms=ex.platforms)
    if check:
        bad = stale(ex.files)
        if bad:
            raise StaleError(f"out of step with {src.name}" if bad[0].exists() else "missing", file=bad[0],
                             accepted=f"run `deepep-env export {env}`")
        res.status = "fresh"
        return res
    res.status = "written" if write_files(ex.files) else "unchanged"
    return res
