"""DeepEP's printed figures as ``name → number``: the one parser of DeepEP's test output (test records
read it; the GPU rounds print it under their own names, docs/benchmarks.md).

test_intranode.py: ``[testing] Running with ... passed`` per case and ``[tuning] Best dispatch
(FP8|BF16): ... 324.72 GB/s (NVL), t: 123 us`` / ``Best combine``; test_low_latency.py:
``[rank 0] Dispatch + combine bandwidth: 197.80 GB/s, avg_t=... us``; DeepEP 2.x's
tests/elastic/test_ep.py: ``* EP: 0/ 1 | dispatch: 0 GB/s (SO), 412 GB/s (SU), 123.456 us``, and
tests/elastic/test_agrs.py: `` > Seed 0 passed (128 ops)`` per stress seed.

:func:`parse_figures` gives the aggregate figures a record has always carried; :func:`parse_rank_figures`
the same measurements per rank and per phase (``rank → name → number``), which admission compares
(:mod:`deepep_env.verify.floors`): test_intranode.py's ``[tuning] Best …`` lines are rank 0's (only
local rank 0 prints them); test_low_latency.py's ``[rank N] Dispatch bandwidth: … | Combine
bandwidth: …`` and ``[rank N] Dispatch + combine bandwidth: …, avg_t=…, min_t=…, max_t=…`` lines are
rank N's; test_ep.py's ``EP: r/ N`` lines are rank r's (the best case per kind). A rank that prints
a line twice keeps its best value (highest GB/s, lowest time), as the ``Best`` lines do.
"""
from __future__ import annotations

import re

BEST = re.compile(r"\[tuning\] Best (dispatch \((FP8|BF16)\)|combine):.*?([0-9.]+) GB/s \(NVL\)(?:, t: ([0-9.]+) us)?")
LL = re.compile(r"\[rank (\d+)\] Dispatch \+ combine bandwidth: ([0-9.]+) GB/s(?:, avg_t=([0-9.]+) us)?")
EP = re.compile(r"^\s*([*#@+-]) EP:\s*(\d+)/\s*\d+ \| (?:dispatch|combine): ([0-9.]+) GB/s \(SO\), ([0-9.]+) GB/s \(SU\), "
                r"([0-9.]+) us", re.M)
LL_PHASES = re.compile(r"\[rank (\d+)\] Dispatch bandwidth: ([0-9.]+) GB/s, avg_t=([0-9.]+) us \| "
                       r"Combine bandwidth: ([0-9.]+) GB/s, avg_t=([0-9.]+) us")
LL_TOTAL = re.compile(r"\[rank (\d+)\] Dispatch \+ combine bandwidth: ([0-9.]+) GB/s, avg_t=([0-9.]+) us"
                      r"(?:, min_t=([0-9.]+) us, max_t=([0-9.]+) us)?")
EP_KIND = {"*": "dispatch", "-": "expanded_dispatch", "#": "cached_dispatch", "@": "combine", "+": "reduced_combine"}


def _num(text: str) -> float:
    try:
        return float(text)
    except ValueError:   # "1.2.3": not a figure
        return float("nan")


def parse_figures(text: str) -> dict[str, float]:
    """Every figure found; an output with none gives ``{}``."""
    out: dict[str, float] = {}
    passed = len(re.findall(r"\[testing\] Running with .*? passed", text))
    failed = len(re.findall(r"\[testing\] Running with .*?(?:failed|Error)", text))
    if passed or failed:
        out["cases_passed"], out["cases_failed"] = passed, failed
    for m in BEST.finditer(text):
        key = "combine_bf16" if m.group(1) == "combine" else f"dispatch_{m.group(2).lower()}"
        gbps = _num(m.group(3))
        if gbps >= out.get(f"{key}_gbps", -1.0):
            out[f"{key}_gbps"] = gbps
            if m.group(4):
                out[f"{key}_us"] = _num(m.group(4))
    ll = {int(r): (_num(v), t) for r, v, t in LL.findall(text)}
    if ll:
        out["ll_rank0_gbps"] = ll.get(0, (0.0, ""))[0]
        out["ll_min_rank_gbps"] = min(v for v, _ in ll.values())
        if ll.get(0, (0, ""))[1]:
            out["ll_rank0_us"] = _num(ll[0][1])
    seeds = len(re.findall(r"^\s*> Seed \d+ passed \(\d+ ops\)", text, re.M))
    if seeds:
        out["agrs_seeds_passed"] = seeds
    cases = len(re.findall(r"^\s*> Testing with ", text, re.M))
    if cases:
        out["ep_cases_run"] = cases
    for kind, rank, _so, su, us in EP.findall(text):
        if int(rank) != 0:
            continue
        k = f"ep_{EP_KIND[kind]}"
        if _num(su) >= out.get(f"{k}_su_gbps", -1.0):
            out[f"{k}_su_gbps"], out[f"{k}_us"] = _num(su), _num(us)
    return {k: v for k, v in out.items() if v == v}   # NaN dropped


def _keep(out: dict[str, dict[str, float]], rank: str, name: str, value: float) -> None:
    """``value`` for ``rank``'s ``name`` unless it already has a better one (GB/s higher, µs lower)."""
    if value != value:      # NaN: not a figure
        return
    figs = out.setdefault(rank, {})
    old = figs.get(name)
    if old is None or (value > old if name.endswith("_gbps") else value < old):
        figs[name] = value


def parse_rank_figures(text: str) -> dict[str, dict[str, float]]:
    """``rank → figure → number`` (ranks as decimal strings, JSON keys); ``{}`` when none printed."""
    out: dict[str, dict[str, float]] = {}
    for m in BEST.finditer(text):
        key = "combine_bf16" if m.group(1) == "combine" else f"dispatch_{m.group(2).lower()}"
        _keep(out, "0", f"{key}_gbps", _num(m.group(3)))
        if m.group(4):
            _keep(out, "0", f"{key}_us", _num(m.group(4)))
    for rank, d_gbps, d_us, c_gbps, c_us in LL_PHASES.findall(text):
        for name, v in (("ll_dispatch_gbps", d_gbps), ("ll_dispatch_us", d_us), ("ll_combine_gbps", c_gbps),
                        ("ll_combine_us", c_us)):
            _keep(out, str(int(rank)), name, _num(v))
    for rank, gbps, avg, lo, hi in LL_TOTAL.findall(text):
        for name, v in (("ll_total_gbps", gbps), ("ll_total_avg_us", avg), ("ll_total_min_us", lo),
                        ("ll_total_max_us", hi)):
            if v:
                _keep(out, str(int(rank)), name, _num(v))
    for kind, rank, _so, su, us in EP.findall(text):
        _keep(out, str(int(rank)), f"ep_{EP_KIND[kind]}_su_gbps", _num(su))
        _keep(out, str(int(rank)), f"ep_{EP_KIND[kind]}_us", _num(us))
    return {r: out[r] for r in sorted(out, key=int) if out[r]}
