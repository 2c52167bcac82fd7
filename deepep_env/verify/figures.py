"""DeepEP's printed figures as ``name → number``: the one parser of DeepEP's test output (test records
read it; benchmarks/gpu/parse_deepep.py prints it under the benchmarks' names).

test_intranode.py: ``[testing] Running with ... passed`` per case and ``[tuning] Best dispatch
(FP8|BF16): ... 324.72 GB/s (NVL), t: 123 us`` / ``Best combine``; test_low_latency.py:
``[rank 0] Dispatch + combine bandwidth: 197.80 GB/s, avg_t=... us``; DeepEP 2.x's
tests/elastic/test_ep.py: ``* EP: 0/ 1 | dispatch: 0 GB/s (SO), 412 GB/s (SU), 123.456 us``, and
tests/elastic/test_agrs.py: `` > Seed 0 passed (128 ops)`` per stress seed.
"""
from __future__ import annotations

import re

BEST = re.compile(r"\[tuning\] Best (dispatch \((FP8|BF16)\)|combine):.*?([0-9.]+) GB/s \(NVL\)(?:, t: ([0-9.]+) us)?")
LL = re.compile(r"\[rank (\d+)\] Dispatch \+ combine bandwidth: ([0-9.]+) GB/s(?:, avg_t=([0-9.]+) us)?")
EP = re.compile(r"^\s*([*#@+-]) EP:\s*(\d+)/\s*\d+ \| (?:dispatch|combine): ([0-9.]+) GB/s \(SO\), ([0-9.]+) GB/s \(SU\), "
                r"([0-9.]+) us", re.M)
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
