"""Admission: one short DeepEP run's figures, per rank, against the floors of the env's records.

:func:`judge_run` compares a run's ``rank_figures`` with the floors of :mod:`deepep_env.verify.floors`
and returns one :class:`Refusal` per failing figure and rank (none: admitted). Three checks:

1. every rank that prints a judged figure printed it (a rank that did not: the run stopped — a hang
   or a crash — before that rank finished);
2. each figure of each rank reaches its floor (a time stays under its ceiling);
3. the slowest rank reaches ``rank_ratio`` (0.9) x the median rank of the same run, per figure (one
   slow GPU on a node whose other ranks are fast).

:func:`admission_record` is what was compared and decided, valid for a stated time (24 h by default),
written like a test record (:func:`write_admission`: ``verified/ENV/admissions/<time>-<node>.json``,
beside the records, never read as one).
"""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

from deepep_env import __version__
from deepep_env.base.atomic import write_text
from deepep_env.formats.stamps import Format
from deepep_env.verify.floors import JUDGED, Floor, expected_ranks, lower_is_better, unit
from deepep_env.verify.records import VERIFIED_DIR, safe_name

if TYPE_CHECKING:  # annotations only
    from deepep_env.base.project import Project

# Declared here, not in formats/stamps.py (imported by the activation closure); convention 1.
ADMISSION = Format("deepep-env/admission", 1, "admission record")
ADMISSIONS_DIR = "admissions"
DEFAULT_VALID_HOURS = 24.0


@dataclass(frozen=True)
class Refusal:
    figure: str
    rank: Optional[str]
    value: Optional[float]
    bound: Optional[float]
    why: str

    def line(self) -> str:
        who = f"rank {self.rank}" if self.rank is not None else "run"
        if self.value is None:
            return f"{who} {self.figure}: {self.why}"
        op = ">" if lower_is_better(self.figure) else "<"
        return f"{who} {self.figure} {self.value:g} {unit(self.figure)} {op} {self.bound:.4g} ({self.why})"

    def to_dict(self) -> dict[str, Any]:
        return {"figure": self.figure, "rank": self.rank, "value": self.value, "bound": self.bound, "why": self.why,
                "line": self.line()}


def _missing(figures: dict[str, dict[str, float]], floors: dict[str, Floor], ranks: list[str],
             stopped: str) -> list[Refusal]:
    out = []
    for name in floors:
        silent = [r for r in ranks if name not in figures.get(r, {})]
        if silent:
            out.append(Refusal(name, ",".join(silent), None, None,
                               f"rank(s) {', '.join(silent)} printed none ({stopped})"))
    return out


def _below_floor(figures: dict[str, dict[str, float]], floors: dict[str, Floor]) -> list[Refusal]:
    return [Refusal(name, r, figs[name], fl.bound, fl.source)
            for r, figs in figures.items() for name, fl in floors.items()
            if name in figs and not fl.ok(figs[name])]


def _slow_ranks(figures: dict[str, dict[str, float]], names: Sequence[str], rank_ratio: float) -> list[Refusal]:
    out = []
    for name in names:
        vals = {r: f[name] for r, f in figures.items() if name in f}
        if len(vals) < 2:
            continue
        med = statistics.median(vals.values())
        low = lower_is_better(name)
        bound = med / rank_ratio if low else med * rank_ratio
        out += [Refusal(name, r, v, bound, f"{'1/' if low else ''}{rank_ratio:g} x the run's median rank {med:g}")
                for r, v in vals.items() if (v > bound if low else v < bound)]
    return out


def judge_run(test: str, figures: dict[str, dict[str, float]], floors: dict[str, Floor], ranks: int, *,
              rank_ratio: float = 0.9, stopped: str = "the run stopped before it: a hang or a crash") -> list[Refusal]:
    """Every reason to refuse the run (empty: admitted). ``figures``: its ``rank_figures``."""
    want = expected_ranks(test, ranks)
    out = _missing(figures, floors, want, stopped)
    out += _below_floor(figures, floors)
    judged = [n for n in JUDGED if n in floors] + [n for n in floors if n not in JUDGED]
    out += _slow_ranks(figures, judged, rank_ratio)
    return out


@dataclass
class TestAdmission:
    """One test's admission: its figures, the floors, the records behind them and the verdict."""

    test: str
    ranks: int
    admitted: bool
    lines: list[str]                        # one per refusal (or the reason there is no verdict)
    figures: dict[str, dict[str, float]] = field(default_factory=dict)
    floors: dict[str, Floor] = field(default_factory=dict)
    records: list[str] = field(default_factory=list)
    attempts: int = 1
    evidence: str = ""
    refusals: list[Refusal] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"test": self.test, "ranks": self.ranks, "admitted": self.admitted, "attempts": self.attempts,
                "evidence": self.evidence, "lines": self.lines, "refusals": [r.to_dict() for r in self.refusals],
                "rank_figures": self.figures, "floors": {k: f.to_dict() for k, f in self.floors.items()},
                "records": self.records}


def _utc(t: datetime) -> str:
    return t.astimezone(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def admission_record(env: str, identity: dict[str, Any], host: dict[str, Any], tests: Sequence[TestAdmission], *,
                     source: str, valid_hours: float = DEFAULT_VALID_HOURS,
                     now: Optional[datetime] = None) -> dict[str, Any]:
    """What was compared and decided; ``admitted`` only when every test was."""
    when = (now or datetime.now(timezone.utc)).replace(microsecond=0)
    return {
        "format": ADMISSION.stamp,
        "env": env,
        **identity,
        "host": host,
        "source": source,
        "admitted": bool(tests) and all(t.admitted for t in tests),
        "tests": [t.to_dict() for t in tests],
        "time": _utc(when),
        "valid_until": _utc(when + timedelta(hours=valid_hours)),
        "tool_version": __version__,
    }


def admission_path(project: Project, rec: dict[str, Any]) -> Path:
    stamp = rec["time"].replace("-", "").replace(":", "")
    node = safe_name(str(rec["host"].get("node") or "host"))
    return project.root / VERIFIED_DIR / safe_name(rec["env"], 128) / ADMISSIONS_DIR / f"{stamp}-{node}.json"


def write_admission(project: Project, rec: dict[str, Any]) -> Path:
    """Atomic write; a second admission of the same second and node gets a ``-N`` suffix."""
    path = first = admission_path(project, rec)
    n = 1
    while path.exists():
        n += 1
        path = first.with_name(f"{first.stem}-{n}.json")
    return write_text(path, json.dumps(rec, indent=1, sort_keys=True) + "\n")


def is_admission(data: Any) -> bool:
    """A JSON document stamped as an admission record this version reads."""
    return ADMISSION.accepts(data)
