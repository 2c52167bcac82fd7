"""Same-run comparisons, as `name=value` lines: deepep-env against the hand build on the machine
research.sh just ran on, and aggressive PTX against upstream's default.

Reads the cumulative figures file research.sh keeps in its work folder (every command on a warm
machine appends to it; the last value of a name wins) and prints, where both sides were measured:

  cold_build_s, hand_build_s, cold_build_vs_hand     NVSHMEM + DeepEP from nothing (target ≤ 1.10)
  cold_nvshmem_vs_hand, cold_deep_ep_vs_hand         per package
  v2_cold_build_s, v2_hand_build_s, v2_cold_build_vs_hand, v2_cold_nccl_vs_hand, v2_cold_deep_ep_vs_hand
                                                     NCCL + DeepEP 2.x the same way (figures of earlier rounds)
  intranode_<fig>_vs_hand                            bandwidth against DeepEP built by hand (target ≥ 0.97)
  ptx_<fig>_vs_default, ptx_lowlatency_<fig>_vs_default
                                                     aggressive PTX against upstream's default, A/B means
"""
from __future__ import annotations

import os
import statistics
import sys

FIGS = ("dispatch_fp8_gbps", "dispatch_bf16_gbps", "combine_bf16_gbps")
LL_FIGS = ("ll_rank0_gbps", "ll_min_rank_gbps")


def read(path: str) -> dict[str, float]:
    out: dict[str, float] = {}
    if not os.path.isfile(path):  # nothing measured yet in this work folder
        return out
    for line in open(path, encoding="utf-8"):
        name, sep, value = line.strip().partition("=")
        if sep:
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


def build_ratios(f: dict[str, float], pre: str, hand_names: dict[str, str]) -> dict[str, float]:
    """Cold builds by deepep-env against the hand builds of the same packages (``pre``: figure prefix)."""
    r: dict[str, float] = {}
    ours = {p: f.get(f"{pre}build_{p}_s") for p in hand_names}
    hand = {p: f.get(f"{pre}{h}") for p, h in hand_names.items()}
    for p in ours:
        if ours[p] and hand[p] and f.get(f"{pre}build_{p}_cold") == 1:
            r[f"{pre}cold_{p}_vs_hand"] = ours[p] / hand[p]
    if all(ours.values()) and all(hand.values()) and all(f.get(f"{pre}build_{p}_cold") == 1 for p in ours):
        r[f"{pre}cold_build_s"] = sum(ours.values())
        r[f"{pre}hand_build_s"] = sum(hand.values())
        r[f"{pre}cold_build_vs_hand"] = r[f"{pre}cold_build_s"] / r[f"{pre}hand_build_s"]
    return r


def compare(f: dict[str, float]) -> dict[str, float]:
    r = build_ratios(f, "", {"nvshmem": "hand_build_nvshmem_s", "deep_ep": "hand_build_deepep_s"})
    r.update(build_ratios(f, "v2_", {"nccl": "hand_build_nccl_s", "deep_ep": "hand_build_deepep_s"}))
    for k in FIGS:
        if f.get(f"intranode_{k}") and f.get(f"hand_intranode_{k}"):
            r[f"intranode_{k}_vs_hand"] = f[f"intranode_{k}"] / f[f"hand_intranode_{k}"]
    for test, k in [("intranode", k) for k in FIGS] + [("lowlatency", k) for k in LL_FIGS]:
        a = [f[n] for n in f if n.startswith("ab") and n.endswith(f"_default_{test}_{k}")]
        b = [f[n] for n in f if n.startswith("ab") and n.endswith(f"_ptx_{test}_{k}")]
        if a and b:
            r[f"ptx_{'' if test == 'intranode' else 'lowlatency_'}{k}_vs_default"] = statistics.mean(b) / statistics.mean(a)
    return {k: round(v, 3) for k, v in r.items()}


def main(argv: list[str]) -> int:
    for k, v in compare(read(argv[1])).items():
        print(f"{k}={v}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
