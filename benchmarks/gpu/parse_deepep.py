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

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repo: its one parser of DeepEP's output
from deepep_env.verify.figures import parse_figures  # noqa: E402


def parse(text: str, prefix: str = "") -> dict[str, float]:
    """The benchmarks' names for deepep_env.verify.figures' figures: the intranode and low-latency
    bandwidths (their times are left to the test records), EPv2's figures without their ``ep_``."""
    out: dict[str, float] = {}
    for k, v in parse_figures(text).items():
        if k.startswith("ep_"):
            out[prefix + k[3:]] = v
        elif not k.endswith("_us"):
            out[prefix + k] = v
    return out


if __name__ == "__main__":
    prefix = sys.argv[2] if len(sys.argv) > 2 else ""
    for k, v in parse(open(sys.argv[1], errors="replace").read(), prefix).items():
        print(f"{k}={v:g}")
