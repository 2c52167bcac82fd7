"""``lockfiles/``: the conda-lock export of every environment of pixi.lock, kept in step with it.

``deepep-env export --all`` writes, per environment that has packages, ``lockfiles/ENV.conda-lock.yml``
and its source ``lockfiles/ENV.environment.yml`` (deepep_env/lock/export.py), each atomically, and
removes the exports of environments pixi.lock no longer has. ``--check`` writes nothing and fails
in one line naming the first file that is not what pixi.lock exports now: a relock without a
re-export fails CI, and a PR that changes an environment shows the change in both files.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from deepep_env.base.errors import StaleError, UserError
from deepep_env.lock.export import LOCK_SUFFIX, SOURCE_SUFFIX, render_env, stale, write_files
from deepep_env.formats.lockfile import LockData, read_lock

if TYPE_CHECKING:  # annotations only: no import at run time
    from deepep_env.base.project import Project


LOCKFILES = "lockfiles"


@dataclass
class ExportsResult:
    folder: Path
    environments: list[str]
    status: str                                   # "written" | "unchanged" | "fresh"
    files: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"folder": str(self.folder), "environments": self.environments, "status": self.status,
                "files": [str(p) for p in self.files], "removed": [str(p) for p in self.removed]}


def exported_envs(data: LockData) -> list[str]:
    """The environments that export: those with packages (pixi's empty ``default`` has none)."""
    return sorted(n for n, e in data.envs.items() if any(e.packages.values()))


def planned(data: LockData, folder: Path) -> dict[Path, bytes]:
    """Every file ``folder`` should hold, with its bytes."""
    files: dict[Path, bytes] = {}
    for env in exported_envs(data):
        files.update(render_env(data, env, folder / f"{env}{LOCK_SUFFIX}").files)
    return files


def leftovers(folder: Path, files: dict[Path, bytes]) -> list[Path]:
    """Exports in ``folder`` of environments the lock no longer has."""
    if not folder.is_dir():
        return []
    ours = [p for p in folder.iterdir() if p.name.endswith((LOCK_SUFFIX, SOURCE_SUFFIX)) and p.is_file()]
    return sorted(p for p in ours if p not in files)


def _first_difference(files: dict[Path, bytes], extra: list[Path], lock: Path) -> Optional[StaleError]:
    bad = stale(files)
    how = "run `deepep-env export --all`"
    if bad:
        more = f" (and {len(bad) - 1} more file{'s' if len(bad) > 2 else ''})" if len(bad) > 1 else ""
        why = "missing" if not bad[0].exists() else f"out of step with {lock.name}"
        return StaleError(why + more, file=bad[0], accepted=how)
    if extra:
        return StaleError(f"no environment of {lock.name} exports this file", file=extra[0], accepted=how)
    return None


def sync_exports(project: Project, *, lock_path: Optional[str | Path] = None, folder: Optional[str | Path] = None,
                 check: bool = False) -> ExportsResult:
    """``deepep-env export --all [--check]``."""
    src = Path(lock_path) if lock_path else project.pixi_lock
    if not src.is_file():
        raise UserError("no lock to export", file=src, accepted="run `deepep-env lock ENV` first")
    out = Path(folder) if folder else project.root / LOCKFILES
    data = read_lock(src)
    files = planned(data, out)
    extra = leftovers(out, files)
    res = ExportsResult(folder=out, environments=exported_envs(data), status="fresh", files=sorted(files))
    if check:
        err = _first_difference(files, extra, src)
        if err is not None:
            raise err
        return res
    changed = write_files(files)
    for p in extra:
        p.unlink()
    res.removed = extra
    res.status = "written" if changed or extra else "unchanged"
    return res
