"""benchmarks/gpu: the parsers that turn DeepEP's output and the run's figures into the numbers
docs/benchmarks.md reports (the GPU run itself needs the machine; its arithmetic does not)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from build_fixtures import REPO

GPU = REPO / "benchmarks" / "gpu"
sys.path.insert(0, str(GPU))

import compare  # noqa: E402
import parse_deepep  # noqa: E402

INTRANODE = """\
[testing] Running with BF16, without top-k (async=False, previous=False) ... passed
[testing] Running with FP8, with top-k (async=True, previous=True) ... passed
[tuning] Best dispatch (FP8): SMs 24, NVL chunk 20, 324.72 GB/s (NVL), t: 1.0 us
[tuning] Best dispatch (BF16): SMs 24, NVL chunk 20, 336.20 GB/s (NVL), t: 1.0 us
[tuning] Best combine: SMs 24, NVL chunk 8: 323.57 GB/s (NVL), t: 1.0 us
"""


def test_parse_intranode():
    f = parse_deepep.parse(INTRANODE, "intranode_")
    assert f["intranode_cases_passed"] == 2 and f["intranode_cases_failed"] == 0
    assert f["intranode_dispatch_fp8_gbps"] == 324.72 and f["intranode_combine_bf16_gbps"] == 323.57


def test_compare_same_run(tmp_path):
    figs = tmp_path / "figures-all.txt"
    figs.write_text("\n".join([
        # an earlier command on the same machine: the cold build …
        "build_nvshmem_s=190.0", "build_nvshmem_status=built", "build_nvshmem_cold=1",
        "build_deep_ep_s=70.0", "build_deep_ep_cold=1",
        "intranode_dispatch_fp8_gbps=322.0",
        # … the ptx env's build does not overwrite the main env's figures
        "build_h200_nvlink_ptx_nvshmem_s=0.0", "build_h200_nvlink_ptx_nvshmem_cold=0",
        # a later command: the hand build and the A/B rounds
        "hand_build_nvshmem_s=180.0", "hand_build_deepep_s=60.0", "hand_intranode_dispatch_fp8_gbps=320.0",
        "ab1_default_intranode_dispatch_fp8_gbps=320.0", "ab1_ptx_intranode_dispatch_fp8_gbps=324.0",
        "ab2_default_intranode_dispatch_fp8_gbps=322.0", "ab2_ptx_intranode_dispatch_fp8_gbps=326.0",
        "ab1_default_lowlatency_ll_rank0_gbps=200.0", "ab1_ptx_lowlatency_ll_rank0_gbps=198.0",
        "doctor_exit=0", "not a figure",
    ]) + "\n")
    out = subprocess.run([sys.executable, str(GPU / "compare.py"), str(figs)], capture_output=True, text=True, check=True).stdout
    got = dict(line.split("=") for line in out.split())
    assert got["cold_build_s"] == "260.0" and got["hand_build_s"] == "240.0"
    assert got["cold_build_vs_hand"] == "1.083" and got["cold_nvshmem_vs_hand"] == "1.056"
    assert got["intranode_dispatch_fp8_gbps_vs_hand"] == "1.006"
    assert got["ptx_dispatch_fp8_gbps_vs_default"] == "1.012"
    assert got["ptx_lowlatency_ll_rank0_gbps_vs_default"] == "0.99"


def test_compare_never_calls_a_cached_build_cold(tmp_path):
    figs = tmp_path / "f.txt"
    figs.write_text("build_nvshmem_s=0.1\nbuild_nvshmem_cold=0\nbuild_deep_ep_s=0.1\nbuild_deep_ep_cold=0\n"
                    "hand_build_nvshmem_s=180\nhand_build_deepep_s=60\n")
    assert compare.compare(compare.read(str(figs))) == {}


EP_V2 = """\
Config:
 > Ranks: 1 x 1
Running all test cases:
 > Testing with do_handle_copy=1, expert_alignment=128, use_fp8_dispatch=1, num_bias=0, ...
   * EP:   0/  1 | dispatch: 0 GB/s (SO), 412 GB/s (SU), 123.456 us, 50000 bytes | copy: 900 GB/s, 10.000 us
   - EP:   0/  1 | dispatch: 0 GB/s (SO), 300 GB/s (SU), 150.000 us, 50000 bytes | copy: 800 GB/s, 12.000 us
   @ EP:   0/  1 | combine: 0 GB/s (SO), 398 GB/s (SU), 130.000 us, 50000 bytes | reduce: 700 GB/s, 9.000 us
   @ EP:   1/  2 | combine: 0 GB/s (SO), 999 GB/s (SU), 1.000 us, 50000 bytes | reduce: 700 GB/s, 9.000 us
"""


def test_parse_elastic_test_ep():
    f = parse_deepep.parse(EP_V2, "ep_")
    assert f["ep_cases_run"] == 1 and f["ep_dispatch_su_gbps"] == 412 and f["ep_dispatch_us"] == 123.456
    assert f["ep_expanded_dispatch_su_gbps"] == 300 and f["ep_combine_su_gbps"] == 398  # rank 0 only


def test_compare_v2_builds(tmp_path):
    figs = tmp_path / "figures-all.txt"
    figs.write_text("v2_build_nccl_s=270\nv2_build_nccl_cold=1\nv2_build_deep_ep_s=120\nv2_build_deep_ep_cold=1\n"
                    "v2_hand_build_nccl_s=250\nv2_hand_build_deepep_s=100\n")
    got = compare.compare(compare.read(str(figs)))
    assert got["v2_cold_build_s"] == 390 and got["v2_hand_build_s"] == 350
    assert got["v2_cold_build_vs_hand"] == 1.114 and got["v2_cold_nccl_vs_hand"] == 1.08
    assert "cold_build_s" not in got


def test_each_gpu_script_parses():
    """The GPU scripts run on machines a test cannot reach (network for gpu_site.sh, a GPU for the rest):
    at least each one parses, and the round's driver refuses a phase it does not know, in one line."""
    for script in sorted(GPU.glob("*.sh")):
        subprocess.run(["bash", "-n", str(script)], check=True)
    r = subprocess.run(["bash", str(GPU / "prove_round.sh"), "nonsense"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("usage: prove_round.sh") and r.stderr.count("\n") == 1


def test_gpu_folder_is_research_and_scaffolding_only():
    """Issue 53: what `prove` and `carry` do is not repeated here; the folder stays under 1,500 lines."""
    lines = sum(len(f.read_text().splitlines()) for f in GPU.iterdir() if f.is_file())
    assert lines <= 1500, lines


@pytest.mark.parametrize("wheel", ["../../x.whl", "/tmp/x.whl", "a/b.whl", "..whl", "x.whl\n", "x.tar.gz", "", None, 7])
def test_a_skeleton_whose_wheel_name_is_a_path_is_one_line(tmp_path, wheel):
    """Issue 52.12: the GPU scripts' skeleton rebuild wrote to sources/<the skeleton's "wheel">, so ../../x.whl
    wrote outside. wheel_skeleton.py refuses any name that is not a plain wheel file name."""
    import gzip
    import json

    import wheel_skeleton

    skel = tmp_path / "x.skel"
    with gzip.open(skel, "wt") as f:
        json.dump({"format": wheel_skeleton.FORMAT, "wheel": wheel, "size": 1, "sha256": "0", "members": []}, f)
    r = subprocess.run([sys.executable, str(GPU / "wheel_skeleton.py"), "info", str(skel)], capture_output=True, text=True)
    assert r.returncode == 1 and r.stdout == ""
    assert "field 'wheel'" in r.stderr and "is not a wheel file name" in r.stderr and r.stderr.count("\n") == 1
    with gzip.open(skel, "wt") as f:     # the neighbour: a plain name is read
        json.dump({"format": wheel_skeleton.FORMAT, "wheel": "torch-2.11.0-cp312-cp312-x.whl", "size": 1, "sha256": "0",
                   "members": []}, f)
    r = subprocess.run([sys.executable, str(GPU / "wheel_skeleton.py"), "info", str(skel)], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("wheel=torch-2.11.0-cp312-cp312-x.whl "), r.stderr
