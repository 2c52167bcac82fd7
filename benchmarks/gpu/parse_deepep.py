"""Parse DeepEP's test output into `name=value` lines (the benchmarks' format).

test_intranode.py prints, on local rank 0:
  [testing] Running with ... passed          (one per correctness case)
  [tuning] Best dispatch (FP8): SMs 24, NVL chunk 20, 324.72 GB/s (NVL), t: ... us
  [tuning] Best dispatch (BF16): ...
  [tuning] Best combine: SMs 24, NVL chunk 8: 323.57 GB/s (NVL), t: ... us
test_low_latency.py (V1, and DeepEP 2.x's tests/legacy/) prints per rank:
  [rank 0] Dispatch + combine bandwidth: 197.80 GB/s, avg_t=... us, ...
DeepEP 2.x's tests/elastic/test_ep.py prints, per case on local rank 0:
   > Testing with do_handle_copy=1, ...
     * EP:   0/  1 | dispatch: 0 GB/s (SO), 412 GB/s (SU), 123.456 us, ... (- expanded, # cached dispatch)
     @ EP:   0/  1 | combine: 0 GB/s (SO), 398 GB/s (SU), 130.000 us, ...  (+ reduced combine)
"""
from __future__ import annotations

import re
import sys

BEST = re.compile(r"\[tuning\] Best (dispatch \((FP8|BF16)\)|combine):.*?([0-9.]+) GB/s \(NVL\)")
LL = re.compile(r"\[rank (\d+)\] Dispatch \+ combine bandwidth: ([0-9.]+) GB/s")
EP = re.compile(r"^\s*([*#@+-]) EP:\s*(\d+)/\s*\d+ \| (?:dispatch|combine): ([0-9.]+) GB/s \(SO\), ([0-9.]+) GB/s \(SU\), "
                r"([0-9.]+) us", re.M)
EP_KIND = {"*": "dispatch", "-": "expanded_dispatch", "#": "cached_dispatch", "@": "combine", "+": "reduced_combine"}


def parse_ep(text: str, prefix: str) -> dict[str, float]:
    """EPv2's test_ep.py: cases run, and per kind the best rank-0 scale-up bandwidth and its time."""
    out: dict[str, float] = {}
    cases = len(re.findall(r"^\s*> Testing with ", text, re.M))
    if cases:
        out[f"{prefix}cases_run"] = cases
    for kind, rank, _so, su, us in EP.findall(text):
        if int(rank) != 0:
            continue
        k = f"{prefix}{EP_KIND[kind]}"
        if float(su) >= out.get(f"{k}_su_gbps", -1.0):
            out[f"{k}_su_gbps"], out[f"{k}_us"] = float(su), float(us)
    return out


def parse(text: str, prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    passed = len(re.findall(r"\[testing\] Running with .*? passed", text))
    failed = len(re.findall(r"\[testing\] Running with .*?(failed|Error)", text))
    if passed or failed:
        out[f"{prefix}cases_passed"] = passed
        out[f"{prefix}cases_failed"] = failed
    for m in BEST.finditer(text):
        key = "combine_bf16" if m.group(1) == "combine" else f"dispatch_{m.group(2).lower()}"
        out[f"{prefix}{key}_gbps"] = max(out.get(f"{prefix}{key}_gbps", 0.0), float(m.group(3)))
    ll = {int(r): float(v) for r, v in LL.findall(text)}
    if ll:
        out[f"{prefix}ll_rank0_gbps"] = ll.get(0, 0.0)
        out[f"{prefix}ll_min_rank_gbps"] = min(ll.values())
    out.update(parse_ep(text, prefix))
    return out


if __name__ == "__main__":
    prefix = sys.argv[2] if len(sys.argv) > 2 else ""
    for k, v in parse(open(sys.argv[1], errors="replace").read(), prefix).items():
        print(f"{k}={v:g}")
