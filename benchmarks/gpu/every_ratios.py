"""Same-run ratios of every_gpu.sh's figures, as name=value lines: each env's DeepEP against the DeepEP
built by hand on the same machine in the same run (issue 38: V1 intranode goal >= 0.99 on all three
figures; V2 test_ep.py's scale-up dispatch and combine).

  <env>_intranode_<fig>_vs_hand   fig: dispatch_fp8_gbps, dispatch_bf16_gbps, combine_bf16_gbps
  <env>_elastic_<fig>_vs_hand     fig: dispatch_su_gbps, combine_su_gbps (against hand_v2_elastic_)
  <env>_elasticpair_<fig>_vs_hand the same, from the env's run right after the hand one (the fair pair)
"""
from __future__ import annotations

import sys

from compare import read   # the figures file's one reader (benchmarks/gpu/compare.py, beside this script)

V1 = ("dispatch_fp8_gbps", "dispatch_bf16_gbps", "combine_bf16_gbps")
V2 = ("dispatch_su_gbps", "combine_su_gbps")


def ratios(f: dict[str, float]) -> dict[str, float]:
    out = {}
    for name, v in f.items():
        for test, figs, hand in (("_intranode_", V1, "hand_intranode_"), ("_elastic_", V2, "hand_v2_elastic_"),
                                 ("_elasticpair_", V2, "hand_v2_elastic_")):
            env, sep, fig = name.partition(test)
            if sep and not env.startswith("hand") and fig in figs and f.get(hand + fig):
                out[f"{env}{test}{fig}_vs_hand"] = round(v / f[hand + fig], 4)
    return out


if __name__ == "__main__":
    for k, v in ratios(read(sys.argv[1])).items():
        print(f"{k}={v:g}")
