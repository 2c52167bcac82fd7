"""What the records prove: env × platform × test, the plan's verdict, the records a lock change drops.

A record *matches* the lock when its digest is the current digest of its lock environment and
platform (:func:`deepep_env.lock.digest.all_digests`); only a passing record that matches
verifies an environment. *Passing* is :func:`deepep_env.verify.verdict.counts_as_pass` (the output's
evidence, never ``passed`` alone), and where the spec (``[verify] ranks``) or the user (``verified
--ranks N``) asks for N ranks, a record counts for the claim only with at least N. Under a trust
policy (``--trust FILE``, else the spec's ``[verify] trust``) a record counts only with a signature of a
trusted key over exactly it (:func:`deepep_env.verify.attest.check_signature`); without one, every cell
still says whether its record is signed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from deepep_env.base.errors import UserError
from deepep_env.base.project import pixi_env_name
from deepep_env.envspec.load import load_spec_file
from deepep_env.formats.lockfile import read_lock
from deepep_env.lock.digest import all_digests
from deepep_env.verify.attest import SignatureCheck, check_signature
from deepep_env.verify.keys import TrustPolicy, load_trust
from deepep_env.verify.records import Record, load_records, lock_identity
from deepep_env.verify.verdict import counts_as_pass, verifies

if TYPE_CHECKING:  # annotations only
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


def spec_trust(project: Project, env: str) -> Optional[TrustPolicy]:
    """The trust file the env's spec names (``[verify] trust``, relative to the project root), read; a
    named file that cannot be read is refused in one line (a policy never silently lapses)."""
    if env not in project.spec_names():
        return None
    try:
        rel = load_spec_file(project.spec_path(env)).verify.trust
    except UserError:
        return None
    return load_trust(project.root / rel) if rel else None


def policy_for(project: Project, env: str, trust: Optional[TrustPolicy]) -> Optional[TrustPolicy]:
    """``--trust FILE`` when given, else the spec's ``[verify] trust``, else none."""
    return trust if trust is not None else spec_trust(project, env)


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
    policy: Optional[TrustPolicy] = None                   # a record counts only when a trusted key signed it
    checks: dict[Path, SignatureCheck] = field(default_factory=dict)

    def check(self, r: Record) -> SignatureCheck:
        if r.path not in self.checks:
            self.checks[r.path] = check_signature(r, self.policy)
        return self.checks[r.path]

    def trusted(self, r: Record) -> bool:
        return self.policy is None or self.check(r).ok

    def newest(self, current_only: bool, digests: dict[tuple[str, str], str]) -> Optional[Record]:
        """The newest record (matching the lock, with the ranks asked for and trusted, when ``current_only``)."""
        recs = [r for r in self.records if matches(r, digests) and enough_ranks(r, self.need) and self.trusted(r)] \
            if current_only else self.records
        return recs[-1] if recs else None

    def why_untrusted(self, digests: dict[tuple[str, str], str]) -> Optional[str]:
        """Under a policy, why the newest passing record for the lock does not verify (None: nothing to say)."""
        if self.policy is None:
            return None
        recs = [r for r in self.records if matches(r, digests) and enough_ranks(r, self.need) and counts_as_pass(r.data)]
        return self.check(recs[-1]).why if recs and not self.check(recs[-1]).ok else None

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
            "activation": activation_summary(last.data),
            "signature": self.check(last).to_dict(),
            "trust": self.policy.source if self.policy is not None else None,
            "untrusted_why": None if cur is not None else self.why_untrusted(digests),
        }


def activation_summary(data: dict[str, Any]) -> dict[str, Any]:
    """What a record says it ran under (record v2's ``activation``): its package, digest and variables;
    a v1 record (written before issue 50) did not keep it, and says so."""
    act = data.get("activation")
    if not isinstance(act, dict):
        return {"recorded": False, "why": "v1 record"
                if "activation" not in data else "none (no prefix)"}
    if act.get("variables") is None:
        return {"recorded": False, "package": act.get("package"), "why": act.get("why")}
    return {"recorded": True, "package": act.get("package"), "digest": act.get("digest"),
            "variables": list(act["variables"])}


def build_matrix(project: Project, env: Optional[str] = None, base: Optional[Path] = None,
                 ranks: Optional[int] = None, trust: Optional[TrustPolicy] = None) -> dict[str, Any]:
    """``deepep-env verified --json``; ``base``: the ``verified/`` folder of a channel instead of the project's;
    ``ranks``: what the user asks a verifying record to have used (the spec's ``[verify] ranks`` when higher);
    ``trust``: the keys a record must be signed by (else each env's ``[verify] trust``, else none)."""
    records, warnings = load_records(project, env, base)
    digests, why = current_digests(project)
    cells: dict[tuple[str, str, str], Cell] = {}
    need: dict[str, Optional[int]] = {}
    policies: dict[str, Optional[TrustPolicy]] = {}
    for r in records:
        e = r.key[0]
        if e not in need:
            need[e] = max((n for n in (ranks, spec_ranks(project, e)) if n is not None), default=None)
            policies[e] = policy_for(project, e, trust)
        cells.setdefault(r.key, Cell(*r.key, need=need[e], policy=policies[e])).records.append(r)
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


def plan_verification(project: Project, env: str, ws: Optional[Workspace] = None,
                      trust: Optional[TrustPolicy] = None) -> dict[str, Any]:
    """``plan``: whether ``env`` has a passing record for its current digest (signed by a trusted key, under
    a trust policy: ``trust``, else the spec's ``[verify] trust``)."""
    ident = lock_identity(project, env, ws=ws)
    records, _ = load_records(project, env)
    need = spec_ranks(project, env)
    policy = policy_for(project, env, trust)
    same = [r for r in records if ident.get("digest") and r.data.get("digest") == ident["digest"]]
    passes = [r for r in same if counts_as_pass(r.data) and verifies(str(r.data["test"]))]
    beside = [r for r in same if counts_as_pass(r.data) and not verifies(str(r.data["test"]))]
    enough = [r for r in passes if enough_ranks(r, need)]
    checks = {r.path: check_signature(r, policy) for r in enough}
    passing = [r for r in enough if policy is None or checks[r.path].ok]
    if not ident.get("digest"):
        status = "not locked"
    elif passing:
        status = "verified"
    elif enough:
        status = "untrusted"
    elif passes:
        status = "too few ranks"
    elif len(same) > len(beside):
        status = "failing"
    else:
        status = "unverified"
    return {"status": status, "digest": ident.get("digest"), "lock_platform": ident.get("lock_platform"),
            "why": no_record_why(project, env) if status == "unverified" and not records else None,
            "records": len(records), "matching": len(same), "ranks_required": need,
            "trust": policy.source if policy is not None else None,
            "untrusted_why": checks[enough[-1].path].why if status == "untrusted" else None,
            "passing": [{"test": r.data["test"], "platform": r.data["host"].get("platform"), "ranks": r.data.get("ranks"),
                         "node": r.data["host"].get("node"), "time": r.data["time"], "path": str(r.path),
                         "signature": checks[r.path].to_dict()}
                        for r in passing],
            "short": [{"test": r.data["test"], "ranks": r.data.get("ranks"), "path": str(r.path)}
                      for r in passes if r not in passing],
            "other_tests": sorted({str(r.data["test"]) for r in beside}),   # pass, but prove nothing of DeepEP
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


def require_verified(project: Project, env: str, trust: Optional[TrustPolicy] = None,
                     lock_path: Optional[Path] = None) -> dict[str, Any]:
    """``install --require-verified``: the plan's verdict when ``env`` has a passing record (signed by a
    trusted key, under a trust policy) for the digest the install would use; else a one-line refusal.
    ``lock_path``: another lock to install from; its section must have that same digest."""
    v = plan_verification(project, env, trust=trust)
    if v["status"] == "verified" and lock_path is not None and lock_path.resolve() != project.pixi_lock.resolve():
        other = {d for (e, _), d in all_digests(read_lock(lock_path)).items() if e == pixi_env_name(env)}
        if v["digest"] not in other:
            raise UserError(f"{env}: the lock to install has another digest than the verified one ({str(v['digest'])[:19]}…)",
                            file=lock_path, field="--require-verified",
                            accepted="a lock whose section is the verified one, or install without --require-verified")
    if v["status"] == "verified":
        return v
    why = {"not locked": "the env is not locked",
           "untrusted": f"no passing record signed by a key of {v.get('trust')} ({v.get('untrusted_why')})",
           "too few ranks": f"passing records used fewer ranks than [verify] ranks = {v.get('ranks_required')}",
           "failing": "its records for this digest all fail"}.get(v["status"], "no passing record")
    raise UserError(f"{env}: not verified for the lock's digest {str(v.get('digest'))[:19]}…: {why}",
                    field="--require-verified",
                    accepted="a passing test record for this digest" + (", signed by a trusted key" if v.get("trust") else "")
                    + " (`deepep-env task deepep-test-… -e ENV --sign KEY`), or install without --require-verified")
