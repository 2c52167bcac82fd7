"""What the records prove: env × platform × test, the plan's verdict, the records a lock change drops.

A record *matches* the lock when its digest is the current digest of its lock environment and
platform (:func:`deepep_env.lock.digest.all_digests`); only a passing record that matches
verifies an environment.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from deepep_env.verify.records import Record, load_records

if TYPE_CHECKING:  # annotations only
    from pathlib import Path

    from deepep_env.lock.workspace import Workspace
    from deepep_env.base.project import Project


def current_digests(project: Project) -> tuple[dict[tuple[str, str], str], Optional[str]]:
    """(lock env, platform) → digest of the project's pixi.lock, and why there are none (no lock)."""
    from deepep_env.base.errors import UserError
    from deepep_env.formats.lockfile import read_lock
    from deepep_env.lock.digest import all_digests

    try:
        return all_digests(read_lock(project.pixi_lock)), None
    except UserError as err:
        return {}, str(err)


def matches(rec: Record, digests: dict[tuple[str, str], str]) -> bool:
    d = rec.data
    digest = d.get("digest")
    return bool(digest) and digests.get((str(d.get("lock_env")), str(d.get("lock_platform")))) == digest


@dataclass
class Cell:
    env: str
    platform: str
    test: str
    records: list[Record] = field(default_factory=list)   # oldest first

    def newest(self, current_only: bool, digests: dict[tuple[str, str], str]) -> Optional[Record]:
        recs = [r for r in self.records if matches(r, digests)] if current_only else self.records
        return recs[-1] if recs else None

    def to_dict(self, digests: dict[tuple[str, str], str]) -> dict[str, Any]:
        last = self.records[-1]
        cur = self.newest(True, digests)
        with_figures = next((r for r in reversed(self.records) if r.data.get("figures")), None)
        return {
            "env": self.env, "platform": self.platform, "test": self.test,
            "status": "pass" if last.data.get("passed") else "fail",
            "matches_lock": matches(last, digests),
            "verified": bool(cur is not None and cur.data.get("passed")),
            "records": len(self.records),
            "current_records": sum(1 for r in self.records if matches(r, digests)),
            "newest": {"time": last.data.get("time"), "node": last.data["host"].get("node"),
                       "exit_code": last.data.get("exit_code"), "digest": last.data.get("digest"),
                       "path": str(last.path)},
            "figures": dict(with_figures.data.get("figures") or {}) if with_figures else {},
        }


def build_matrix(project: Project, env: Optional[str] = None, base: Optional[Path] = None) -> dict[str, Any]:
    """``deepep-env verified --json``; ``base``: the ``verified/`` folder of a channel instead of the project's."""
    records, warnings = load_records(project, env, base)
    digests, why = current_digests(project)
    cells: dict[tuple[str, str, str], Cell] = {}
    for r in records:
        cells.setdefault(r.key, Cell(*r.key)).records.append(r)
    rows = [cells[k].to_dict(digests) for k in sorted(cells)]
    out: dict[str, Any] = {"cells": rows, "records": len(records), "warnings": warnings,
                           "lock": str(project.pixi_lock.name)}
    if why:
        out["lock_error"] = why
    return out


def plan_verification(project: Project, env: str, ws: Optional[Workspace] = None) -> dict[str, Any]:
    """``plan``: whether ``env`` has a passing record for its current digest."""
    from deepep_env.verify.records import lock_identity

    ident = lock_identity(project, env, ws=ws)
    records, _ = load_records(project, env)
    same = [r for r in records if ident.get("digest") and r.data.get("digest") == ident["digest"]]
    passing = [r for r in same if r.data.get("passed")]
    if not ident.get("digest"):
        status = "not locked"
    elif passing:
        status = "verified"
    elif same:
        status = "failing"
    else:
        status = "unverified"
    return {"status": status, "digest": ident.get("digest"), "lock_platform": ident.get("lock_platform"),
            "records": len(records), "matching": len(same),
            "passing": [{"test": r.data["test"], "platform": r.data["host"].get("platform"),
                         "node": r.data["host"].get("node"), "time": r.data["time"], "path": str(r.path)}
                        for r in passing],
            "stale": len(records) - len(same)}


def dropped_records(project: Project, old: dict[tuple[str, str], str], new: dict[tuple[str, str], str],
                    envs: Optional[list[str]] = None) -> list[Record]:
    """Passing records valid under the ``old`` lock's digests and not under the ``new`` one's."""
    records, _ = load_records(project)
    out = []
    for r in records:
        d = r.data
        key = (str(d.get("lock_env")), str(d.get("lock_platform")))
        if envs and key[0] not in envs and d.get("env") not in envs:
            continue
        if d.get("passed") and d.get("digest") and old.get(key) == d["digest"] and new.get(key) != d["digest"]:
            out.append(r)
    return out
