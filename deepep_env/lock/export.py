"""pixi.lock → ``conda-lock.yml`` through conda-lock's own pydantic models (conda-lock 4.x,
``conda_lock.lockfile.v2prelim.models``), for teams that review conda-lock files.

conda-lock itself cannot solve here (it needs a conda executable; field notes §5), but its models
and writer are pure: the export builds the models from the locked records and lets conda-lock
serialise them, so the file is exactly what conda-lock would read back.
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from deepep_env.atomic import write_bytes
from deepep_env.errors import UserError
from deepep_env.lock.lockfile import LockedPackage, read_lock
from deepep_env.lock.solve import default_lock_path
from deepep_env.readfile import present

_DEP = re.compile(r"^\s*([A-Za-z0-9_][A-Za-z0-9_.\-]*)\s*(.*)$")


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


@dataclass
class ExportResult:
    env: str
    path: Path
    packages: int
    platforms: list[str]

    def to_dict(self) -> dict:
        return {"env": self.env, "path": str(self.path), "packages": self.packages, "platforms": self.platforms}


def _per_subdir(data, e, lock_path: Path, platform: Optional[str]) -> list[tuple[str, list[LockedPackage]]]:
    """conda-lock keys everything by subdir; pixi's rich platforms can put several platforms (e.g.
    ``linux-64-cuda129`` and ``linux-64-cuda130``) on one subdir. Identical package sets export once;
    different ones need ``--platform`` to say which."""
    by: dict[str, list[tuple[str, list[LockedPackage]]]] = {}
    for plat, pkgs in sorted(e.packages.items()):
        if platform and plat != platform:
            continue
        by.setdefault(data.platforms.get(plat, {}).get("subdir", plat), []).append((plat, pkgs))
    if platform and not by:
        raise UserError(f"the lock has no platform {platform!r} in this environment", file=lock_path,
                        field="--platform", accepted=", ".join(sorted(e.packages)))
    out = []
    for subdir, plats in sorted(by.items()):
        urls = {frozenset(p.url for p in pkgs) for _, pkgs in plats}
        if len(urls) > 1:
            raise UserError(f"platforms {', '.join(p for p, _ in plats)} share subdir {subdir} with different packages; "
                            "conda-lock has one package set per subdir", file=lock_path, field="--platform",
                            accepted=" or ".join(p for p, _ in plats))
        out.append((subdir, plats[0][1]))
    return out


def to_conda_lock(lock_path: Path, env: str, *, output: Optional[Path] = None, platform: Optional[str] = None):
    """The conda-lock ``Lockfile`` model of one environment of a pixi lock."""
    from conda_lock.lockfile.v2prelim.models import (
        HashModel, LockedDependency, Lockfile, LockMeta,
    )
    from conda_lock.models.channel import Channel

    data = read_lock(lock_path)
    e = data.env(env)
    if e is None:
        raise UserError(f"the lock has no environment {env!r}", file=lock_path, accepted=", ".join(data.envs))
    packages: list = []
    content_hash: dict[str, str] = {}
    subdirs: list[str] = []
    for subdir, pkgs in _per_subdir(data, e, lock_path, platform):
        subdirs.append(subdir)
        conda = [p for p in pkgs if p.kind == "conda"]
        content_hash[subdir] = _content_hash(conda)
        for p in pkgs:
            if p.kind == "pypi":
                packages.append(LockedDependency(
                    name=p.name, version=p.version, manager="pip", platform=subdir, dependencies={},
                    url=p.url, hash=HashModel(), categories={"main"}))
                continue
            if not p.sha256 or "://" not in p.url:
                raise UserError(f"{p.name} is a pixi-build source package (built from {p.url or 'a source'}): "
                                "conda-lock has no form for it", file=lock_path, field=f"environments.{env}",
                                accepted="a lock whose packages are all built (lock the source package's output)")
            packages.append(LockedDependency(
                name=p.name, version=p.version, manager="conda", platform=subdir,
                dependencies=_dependencies(p.depends), url=p.url,
                hash=HashModel(md5=p.md5, sha256=p.sha256), categories={"main"}, build=p.build))
    # conda-lock: "paths to source files, relative to the parent directory of the lockfile".
    rel = os.path.relpath(lock_path.resolve(), (output or lock_path).resolve().parent)
    meta = LockMeta(content_hash=content_hash, channels=[Channel.from_string(c.rstrip("/")) for c in e.channels],
                    platforms=subdirs, sources=[rel])
    return Lockfile(package=packages, metadata=meta)


def export_conda_lock(env: str, project, *, lock_path: Optional[str | Path] = None,
                      output: Optional[str | Path] = None, platform: Optional[str] = None) -> ExportResult:
    """``deepep-env export ENV --format conda-lock``: write ``conda-lock.yml`` beside the lock."""
    from conda_lock.lockfile import write_conda_lock_file

    src = Path(lock_path) if lock_path else default_lock_path(project, env)
    if not present(src):
        raise UserError("no lock to export", file=src, accepted=f"run `deepep-env lock {env}` first")
    out = Path(output) if output else project.root / f"{env}.conda-lock.yml"
    model = to_conda_lock(src, env, output=out, platform=platform)
    with tempfile.TemporaryDirectory(prefix="deepep-env-export-") as tmp:
        f = Path(tmp) / out.name
        write_conda_lock_file(model, f, metadata_choices=None)
        write_bytes(out, f.read_bytes())
    return ExportResult(env=env, path=out, packages=len(model.package), platforms=list(model.metadata.platforms))
