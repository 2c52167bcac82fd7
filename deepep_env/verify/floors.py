"""The floors a node's DeepEP figures must reach to be admitted, from the evidence: passing records.

Which records: those of the same env that count as a pass (:func:`~deepep_env.verify.verdict.counts_as_pass`)
for the same test, lock digest, platform, GPU model and rank count (:class:`Scope`). Which figures:
per rank and per phase (:func:`~deepep_env.verify.figures.parse_rank_figures`), dispatch and combine
apart; the GB/s of each phase (higher is better) and, for low-latency, the ``min_t`` of a dispatch +
combine round (lower is better). Never the low-latency "Dispatch + combine bandwidth" figure: it is
computed from the *average* time, which one outlier iteration drags down (issue 55: 229 GB/s on a
healthy node whose dispatch and combine lines matched its peers').

A floor is ``ratio`` (0.8) x the median over the records of each record's median rank; for a time,
the median / ``ratio`` is a ceiling. A spec's ``[admit] floors`` replace the records' floor for the
figures they name. Records written before ``rank_figures`` existed give rank 0's aggregate figures
(test_intranode.py's ``Best`` lines, test_ep.py's rank-0 lines); their low-latency figure is the
average above, which is never judged.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from deepep_env.verify.records import Record
from deepep_env.verify.verdict import counts_as_pass

# figure → what a run is judged on (per rank); the rest of a record's figures are kept, not judged.
JUDGED: tuple[str, ...] = (
    "dispatch_fp8_gbps", "dispatch_bf16_gbps", "combine_bf16_gbps",               # test_intranode.py (rank 0)
    "ll_dispatch_gbps", "ll_combine_gbps", "ll_total_min_us",                      # test_low_latency.py
    "ep_dispatch_su_gbps", "ep_cached_dispatch_su_gbps", "ep_expanded_dispatch_su_gbps",
    "ep_combine_su_gbps", "ep_reduced_combine_su_gbps",                            # tests/elastic/test_ep.py
)
RANK0_ONLY = frozenset({"intranode", "internode"})     # only local rank 0 prints the tuning lines
_AGGREGATE_IS_RANK0 = ("dispatch_", "combine_bf16_", "ep_")   # old records' figures that are rank 0's


def lower_is_better(figure: str) -> bool:
    return figure.endswith("_us")


def unit(figure: str) -> str:
    return "us" if figure.endswith("_us") else "GB/s"


def gpu_model(host: dict[str, Any]) -> str:
    """``8 x NVIDIA H200`` → ``NVIDIA H200`` (the fingerprint's ``gpus``); ``?`` when unknown."""
    text = str(host.get("gpus") or "?")
    return text.split(" x ", 1)[1] if " x " in text else text


def rank_figures_of(data: dict[str, Any]) -> dict[str, dict[str, float]]:
    """A record's per-rank figures: its ``rank_figures``, else rank 0's from its aggregate ``figures``."""
    rf = data.get("rank_figures")
    if rf:
        return dict(rf)
    zero = {k: v for k, v in (data.get("figures") or {}).items() if k.startswith(_AGGREGATE_IS_RANK0)}
    return {"0": zero} if zero else {}


def expected_ranks(test: str, ranks: int) -> list[str]:
    """The ranks that print the figures: rank 0 for the intranode/internode tuning lines, else all."""
    return ["0"] if test in RANK0_ONLY else [str(r) for r in range(ranks)]


@dataclass(frozen=True)
class Scope:
    """What a run is compared with: records of this env, test, digest, platform, GPU model and ranks."""

    env: str
    test: str
    digest: Optional[str]
    platform: str
    gpu: str
    ranks: int

    def describe(self) -> str:
        return (f"{self.env} {self.test} on {self.platform} ({self.gpu}, {self.ranks} rank(s), digest "
                f"{(self.digest or 'none')[:19]}…)")

    def matches(self, rec: Record) -> bool:
        d = rec.data
        host = d.get("host") or {}
        return (d.get("env") == self.env and d.get("test") == self.test and counts_as_pass(d)
                and self.digest is not None and d.get("digest") == self.digest
                and str(host.get("platform")) == self.platform and gpu_model(host) == self.gpu
                and d.get("ranks") == self.ranks)


@dataclass(frozen=True)
class Floor:
    figure: str
    bound: float                 # the least a GB/s figure may be; the most a time may be
    median: Optional[float]      # the records' median (None: an absolute floor of the spec)
    source: str                  # where it comes from, in words

    @property
    def lower(self) -> bool:
        return lower_is_better(self.figure)

    def ok(self, value: float) -> bool:
        return value <= self.bound if self.lower else value >= self.bound

    def to_dict(self) -> dict[str, Any]:
        return {"figure": self.figure, "bound": round(self.bound, 4), "kind": "ceiling" if self.lower else "floor",
                "median": self.median, "source": self.source}


def _record_median(rec: Record, figure: str) -> Optional[float]:
    vals = [f[figure] for f in rank_figures_of(rec.data).values() if figure in f]
    return statistics.median(vals) if vals else None


def floors_for(records: Sequence[Record], *, ratio: float = 0.8, absolutes: Optional[dict[str, float]] = None,
               spec_file: str = "the spec") -> dict[str, Floor]:
    """figure → its floor, from ``records`` (already matched to the scope) and the spec's absolutes."""
    out: dict[str, Floor] = {}
    for figure in JUDGED:
        medians = [m for m in (_record_median(r, figure) for r in records) if m is not None]
        if not medians:
            continue
        med = statistics.median(medians)
        bound = med / ratio if lower_is_better(figure) else med * ratio
        out[figure] = Floor(figure, bound, med, f"{'1/' if lower_is_better(figure) else ''}{ratio:g} x median "
                                                f"{med:g} of {len(medians)} record(s)")
    for figure, value in (absolutes or {}).items():
        out[figure] = Floor(figure, value, None, f"[admit] floors in {spec_file}")
    return out
