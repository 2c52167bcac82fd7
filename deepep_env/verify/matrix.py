"""What the records prove: env × platform × test, the plan's verdict, the records a lock change drops.

A record *matches* the lock when its digest is the current digest of its lock environment and
platform (:func:`deepep_env.lock.digest.all_digests`); only a passing record that matches
verifies an environment. *Passing* is :func:`deepep_env.verify.verdict.counts_as_pass` (the output's
evidence, never ``passed`` alone), and where the spec (``[verify] ranks``) or the user (``verified
--ranks N``) asks for N ranks, a record counts for the claim only with at least N.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from deepep_env.base.errors import UserError
from deepep_env.envspec.load import load_spec_file
from deepep_env.formats.lockfile import read_lock
from deepep_env.lock.digest import all_digests
from deepep_env.verify.records import Record, load_records, lock_identity
from deepep_env.verify.verdict import counts_as_pass

if TYPE_CHECKING:  # annotations only
    from pathlib import Path

    from deepep_env.lock.workspace import Workspace
    from deepep_env.base.project import Project


def current_digests(project: Project) -> tuple[dict[tuple[str, str], str], Optional[str]]:
    """(lock env, platform) → digest of the project's pixi.lock, and why there are none (no lock)."""
    try:
        return all_digests(read_lock(project.pixi_lock)), None
    except UserError as err:
        return {}, str(err)


def spec_ranks(project: Project, env: str) -> Optional[int]:
    """The ranks the env's spec asks a verifying record to have used (``[verify] ranks``), if any."""
    path = project.spec_path(env)
    if env not in project.spec_names():
        return None
    try:
        return load_spec_file(path).verify.ranks
    except UserError:
        return None


def enough_ranks(rec: Record, need: Optional[int]) -> bool:
    """Whether ``rec`` ran with at least ``need`` ranks (no need: any record; unknown ranks: not enough)."""
    ranks = rec.data.get("ranks")
    return need is None or (isinstance(ranks, int) and ranks >= need)


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
    need: Optional[int] = None                             # ranks the spec or the user asks for

    def newest(self, current_only: bool, digests: dict[tuple[str, str], str]) -> Optional[Record]:
        """The newest record (matching the lock, with the ranks asked for, when ``current_only``)."""
        recs = [r for r in self.records if matches(r, digests) and enough_ranks(r, self.need)] \
            if current_only else self.records
        return recs[-1] if recs else None

    def to_dict(self, digests: dict[tuple[str, str], str]) -> dict[str, Any]:
        cur = self.newest(True, digests)
        # the record that decides the cell: the newest one that speaks to the claim (matching the lock,
        # with the ranks asked for), else the newest of all; a later one-rank run on a two-GPU claim
        # neither verifies nor hides it
        last = cur or self.records[-1]
        with_figures = last if last.data.get("figures") else \
            next((r for r in reversed(self.records) if r.data.get("figures")), None)
        return {
            "env": self.env, "platform": self.platform, "test": self.test,
            "status": "pass" if counts_as_pass(last.data) else "fail",
            "ranks": last.data.get("ranks"), "ranks_required": self.need,
            "matches_lock": matches(last, digests),
            "verified": bool(cur is not None and counts_as_pass(cur.data)),
            "records": len(self.records),
            "current_records": sum(1 for r in self.records if matches(r, digests)),
            "newest": {"time": last.data.get("time"), "node": last.data["host"].get("node"),
                       "exit_code": last.data.get("exit_code"), "digest": last.data.get("digest"),
                       "path": str(last.path)},
            "figures": dict(with_figures.data.get("figures") or {}) if with_figures else {},
        }


def build_matrix(project: Project, env: Optional[str] = None, base: Optional[Path] = None,
                 ranks: Optional[int] = None) -> dict[str, Any]:
    """``deepep-env verified --json``; ``base``: the ``verified/`` folder of a channel instead of the project's;
    ``ranks``: what the user asks a verifying record to have used (the spec's ``[verify] ranks`` when higher)."""
    records, warnings = load_records(project, env, base)
    digests, why = current_digests(project)
    cells: dict[tuple[str, str, str], Cell] = {}
    need: dict[str, Optional[int]] = {}
    for r in records:
        e = r.key[0]
        if e not in need:
            need[e] = max((n for n in (ranks, spec_ranks(project, e)) if n is not None), default=None)
        cells.setdefault(r.key, Cell(*r.key, need=need[e])).records.append(r)
    rows = [cells[k].to_dict(digests) for k in sorted(cells)]
    # every locked env without any record: a row of its own, `none`, saying why (issue 51.6)
    have = {c["env"] for c in rows}
    nones = [none_row(project, e, plat) for (e, plat) in sorted(digests) if e not in have and env in (None, e)] \
        if base is None else []
    out: dict[str, Any] = {"cells": rows, "none": nones, "records": len(records), "warnings": warnings,
                           "lock": str(project.pixi_lock.name)}
    if why:
        out["lock_error"] = why
    return out


def target_platforms(project: Project, env: str) -> list[str]:
    """The platform profiles the env's spec targets (none when it has no readable spec)."""
    try:
        return list(load_spec_file(project.spec_path(env)).platforms) if env in project.spec_names() else []
    except UserError:
        return []


def no_record_why(project: Project, env: str) -> str:
    """Why a locked env has no test record: no machine of the hardware its spec targets ran its tests."""
    from deepep_env.platform.profiles import get_profile   # lazy: only where an env has no record

    platforms = target_platforms(project, env)
    gpus: list[str] = []
    for name in platforms:
        try:
            gpus += [g for g in get_profile(name).gpu_models if g not in gpus]
        except UserError:
            continue
    where = f"no {'/'.join(gpus)} machine" if gpus else "no machine of its platform"
    on = f" ({', '.join(platforms)})" if platforms else ""
    return (f"{where}{on} has run its tests with this lock "
            f"(`deepep-env task deepep-test-intranode -e {env}` there records one)")


def none_row(project: Project, env: str, lock_platform: str) -> dict[str, Any]:
    """The matrix row of a locked env without any test record: ``platform`` is what its spec targets."""
    return {"env": env, "platform": ", ".join(target_platforms(project, env)) or lock_platform, "test": "-",
            "status": "none", "lock_platform": lock_platform, "ranks": None, "ranks_required": None,
            "matches_lock": False, "verified": False, "records": 0, "current_records": 0,
            "newest": {"time": None, "node": None, "exit_code": None, "digest": None, "path": None},
            "figures": {}, "why": "no record: " + no_record_why(project, env)}


def plan_verification(project: Project, env: str, ws: Optional[Workspace] = None) -> dict[str, Any]:
    """``plan``: whether ``env`` has a passing record for its current digest."""
    ident = lock_identity(project, env, ws=ws)
    records, _ = load_records(project, env)
    need = spec_ranks(project, env)
    same = [r for r in records if ident.get("digest") and r.data.get("digest") == ident["digest"]]
    passes = [r for r in same if counts_as_pass(r.data)]
    passing = [r for r in passes if enough_ranks(r, need)]
    if not ident.get("digest"):
        status = "not locked"
    elif passing:
        status = "verified"
    elif passes:
        status = "too few ranks"
    elif same:
        status = "failing"
    else:
        status = "unverified"
    return {"status": status, "digest": ident.get("digest"), "lock_platform": ident.get("lock_platform"),
            "why": no_record_why(project, env) if status == "unverified" and not records else None,
            "records": len(records), "matching": len(same), "ranks_required": need,
            "passing": [{"test": r.data["test"], "platform": r.data["host"].get("platform"), "ranks": r.data.get("ranks"),
                         "node": r.data["host"].get("node"), "time": r.data["time"], "path": str(r.path)}
                        for r in passing],
            "short": [{"test": r.data["test"], "ranks": r.data.get("ranks"), "path": str(r.path)}
                      for r in passes if r not in passing],
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
        if counts_as_pass(d) and d.get("digest") and old.get(key) == d["digest"] and new.get(key) != d["digest"]:
            out.append(r)
    return out
