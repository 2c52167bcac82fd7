"""benchmarks/gpu: the parsers that turn DeepEP's output and the run's figures into the numbers
docs/benchmarks.md reports (the GPU run itself needs the machine; its arithmetic does not)."""
from __future__ import annotations

import os
import shutil
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


def test_run_script_parses():
    subprocess.run(["bash", "-n", str(GPU / "run_h200.sh")], check=True)


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


def test_every_ratios_pairs_each_env_with_the_hand_build_of_its_kind():
    import every_ratios
    f = {"h200_nvlink_intranode_dispatch_fp8_gbps": 99.0, "hand_intranode_dispatch_fp8_gbps": 100.0,
         "h200_nvlink_v2_elastic_dispatch_su_gbps": 360.0, "h200_nvlink_v2_elasticpair_dispatch_su_gbps": 364.0,
         "hand_v2_elastic_dispatch_su_gbps": 364.0, "hand_intranode_combine_bf16_gbps": 300.0}
    got = every_ratios.ratios(f)
    assert got == {"h200_nvlink_intranode_dispatch_fp8_gbps_vs_hand": 0.99,
                   "h200_nvlink_v2_elastic_dispatch_su_gbps_vs_hand": 0.989,
                   "h200_nvlink_v2_elasticpair_dispatch_su_gbps_vs_hand": 1.0}


def test_v2_script_parses():
    subprocess.run(["bash", "-n", str(GPU / "run_v2.sh")], check=True)
    subprocess.run(["bash", "-n", str(GPU / "common.sh")], check=True)


STUB = r'''#!/usr/bin/env bash
# stand-in for lock_enough.sh: records what it was given, writes what the real one returns
mkdir -p "$OUT" "$WORK"
touch "$READY_FOR_TEST"
echo "stub mode=$1 env=$2 repack=${REPACK:-} no_test=${NO_TEST:-} pkgs=$DEEPEP_ENV_BUILD_PKGS_DIR work=$WORK tree=$PWD"
echo "stub cpus=$(nproc)"
echo "figure_of_$2=1" > "$OUT/figures.txt"
cp pixi.lock "$OUT/pixi.lock"
[ "$2" = broken ] && { echo "headline_$1_ok=0"; exit 1; }
echo "headline_$1_ok=1"
'''


def _pair(tmp_path, a: str, b: str, b_vars: str, **extra: str):
    repo = tmp_path / "repo"
    (repo / "benchmarks" / "gpu").mkdir(parents=True)
    shutil.copy2(GPU / "pair.sh", repo / "benchmarks" / "gpu" / "pair.sh")
    (repo / "benchmarks" / "gpu" / "lock_enough.sh").write_text(STUB)
    (repo / "pixi.lock").write_text("version: 7\n")
    (repo / ".pixi").mkdir()                                   # not copied into the second tree
    ready, out, t = tmp_path / "ready", tmp_path / "out", tmp_path / "t"
    t.mkdir()
    env = dict(os.environ, OUT=str(out), PAIR_TMP=str(t), PAIR_READY_FILE=str(ready), READY_FOR_TEST=str(ready),
               PAIR_B_VARS=b_vars, PAIR_LIMIT_S="60", **extra)
    r = subprocess.run(["bash", "benchmarks/gpu/pair.sh", "reinstall", a, b], cwd=repo, env=env,
                       capture_output=True, text=True, timeout=120)
    return r, out, t


def test_pair_runs_two_envs_in_two_trees_and_returns_few_files(tmp_path):
    r, out, t = _pair(tmp_path, "h200-nvlink", "h200-nvlink-conda", "REPACK=1 NO_TEST=1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "headline_pair_reinstall_ok=1"
    a = (t / "pair-a.txt").read_text()
    b = (t / "pair-b.txt").read_text()
    assert "env=h200-nvlink " in a and "repack= " in a and f"tree={tmp_path / 'repo'}" in a
    assert "env=h200-nvlink-conda " in b and "repack=1 no_test=1" in b and f"tree={t / 'pair-b'}" in b
    assert f"pkgs={t / 'pair-pkgs-a'}" in a and f"pkgs={t / 'pair-pkgs-b'}" in b
    assert not (t / "pair-b" / ".pixi").exists()
    back = sorted(p.name for p in out.iterdir())
    assert back == ["a.figures.txt", "a.pixi.lock", "b.figures.txt", "b.pixi.lock", "pair-rest.tgz"]
    assert len(back) <= 8                                       # what one device call returns


def test_pair_headline_is_zero_when_either_run_fails(tmp_path):
    r, out, t = _pair(tmp_path, "h200-nvlink", "broken", "")
    assert r.stdout.strip().splitlines()[-1] == "headline_pair_reinstall_ok=0"
    assert "pair_b_rc=1" in (t / "pair-b.txt").read_text()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 or not shutil.which("taskset"), reason="needs 2 CPUs and taskset")
def test_pair_pin_gives_each_run_its_own_half_of_the_cpus(tmp_path):
    r, _, t = _pair(tmp_path, "h200-nvlink", "h200-nvlink-conda", "REPACK=1", PAIR_PIN="1")
    assert r.returncode == 0, r.stderr
    assert "pair_pin_a=" in r.stdout and "pair_pin_b=" in r.stdout
    n = len(os.sched_getaffinity(0))                                  # what nproc says
    got = [int((t / f"pair-{tag}.txt").read_text().split("stub cpus=")[1].split()[0]) for tag in "ab"]
    if os.path.exists("/sys/devices/system/node/node1/cpulist"):   # a NUMA node each
        assert all(0 < k < n for k in got), got
    else:
        assert got == [n // 2, n - n // 2], got


def test_pair_script_parses():
    subprocess.run(["bash", "-n", str(GPU / "pair.sh")], check=True)


def test_pair_takes_only_var_assignments(tmp_path):
    r, out, t = _pair(tmp_path, "h200-nvlink", "h200-nvlink-conda", "REPACK=1 touch")
    assert r.returncode == 2 and "'touch' is not VAR=value" in r.stderr
    assert not (t / "pair-a.txt").exists()


def test_every_gpu_script_parses():
    """The GPU scripts run on machines a test cannot reach (network for make_carry.sh, a GPU for the
    rest): at least each one parses."""
    for script in sorted(GPU.glob("*.sh")):
        subprocess.run(["bash", "-n", str(script)], check=True)


# --- every_gpu.sh: every env built at once, then each test on every GPU, one at a time ---------------

EVERY_STUB_BUILD = r'''#!/usr/bin/env bash
mkdir -p "$OUT" "$WORK" "$PWD/.pixi/envs/$2" && cp pixi.lock "$OUT/pixi.lock"
echo "stub mode=$1 env=$2 repack=${REPACK:-} no_test=${NO_TEST:-} tree=$PWD start=$(date +%s.%N)"
sleep 1; echo "build_exit=0"; echo "rebuilt_same_sha256=3"
'''
EVERY_STUB_COMMON = r'''
RESULTS=${OUT}; OUT=${WORK}; mkdir -p "$OUT" "$RESULTS"; FIG="$OUT/figures.txt"
pack() { :; }
now() { date +%s.%N; }
since() { echo 1.0; }
figs() { tee -a "$FIG"; }
fig() { echo "$1=$2" | figs; }
step() { echo "===== $*"; }
setup_tools() { echo "setup_tools once"; }
'''
EVERY_STUB_PY = r'''#!/usr/bin/env bash
# the python every_gpu.sh runs: deepep-env's CLI is recorded and prints DeepEP-shaped output; the rest is python
if [ "$1" = -m ] && [ "$2" = deepep_env.cli.main ]; then
  echo "$PWD $*" >> "$EVERY_LOG"
  case "$*" in
    *intranode*) echo "[tuning] Best dispatch (FP8): SMs 24, NVL chunk 32, 250.00 GB/s (NVL), t: 1 us";;
    *elastic*) echo "     * EP:   0/  4 | dispatch: 0 GB/s (SO), 360 GB/s (SU), 1.000 us";;
  esac
  exit 0
fi
exec python3 "$@"
'''


def _every(tmp_path, *envs: str):
    repo = tmp_path / "repo"
    (repo / "benchmarks" / "gpu").mkdir(parents=True)
    for f in ("every_gpu.sh", "every_ratios.py", "compare.py", "parse_deepep.py"):
        shutil.copy2(GPU / f, repo / "benchmarks" / "gpu" / f)
    shutil.copytree(REPO / "deepep_env", repo / "deepep_env")        # parse_deepep.py reads its parser
    (repo / "benchmarks" / "gpu" / "lock_enough.sh").write_text(EVERY_STUB_BUILD)
    (repo / "benchmarks" / "gpu" / "common.sh").write_text(EVERY_STUB_COMMON)
    (repo / "pixi.lock").write_text("version: 7\n")
    (repo / ".gpu" / "sources").mkdir(parents=True)
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "nvidia-smi").write_text("#!/bin/sh\nfor i in 0 1 2 3; do echo \"GPU $i: NVIDIA H200 (UUID: x)\"; done\n")
    (bin_ / "py").write_text(EVERY_STUB_PY)
    for f in bin_.iterdir():
        f.chmod(0o755)
    eg, log = tmp_path / "eg", tmp_path / "cli.log"
    env = dict(os.environ, PATH=f"{bin_}{os.pathsep}{os.environ['PATH']}", PYTHON=str(bin_ / "py"), EG_DIR=str(eg),
               EVERY_LOG=str(log), HAND="0", OUT=str(tmp_path / "out"))
    r = subprocess.run(["bash", "benchmarks/gpu/every_gpu.sh", "run", "relock", *envs], cwd=repo, env=env,
                       capture_output=True, text=True, timeout=120)
    c = subprocess.run(["bash", "benchmarks/gpu/every_gpu.sh", "collect"], cwd=repo, env=env, capture_output=True,
                       text=True, timeout=60)
    return r, c, eg, log, tmp_path / "out"


def test_every_gpu_builds_all_at_once_then_tests_each_on_every_gpu(tmp_path):
    r, c, eg, log, out = _every(tmp_path, "h200-nvlink", "h200-nvlink-conda", "h200-nvlink-v2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("setup_tools once") == 1
    starts = [float((eg / f"{e}.txt").read_text().split("start=")[1].split()[0])
              for e in ("h200-nvlink", "h200-nvlink-conda", "h200-nvlink-v2")]
    assert max(starts) - min(starts) < 6                             # side by side, not one after another
    conda = (eg / "h200-nvlink-conda.txt").read_text()
    assert "repack=1 no_test=1" in conda and f"tree={eg / 'tree-h200-nvlink-conda'}" in conda
    assert "repack= no_test=1" in (eg / "h200-nvlink.txt").read_text()
    calls = log.read_text().splitlines()
    assert len(calls) == 2 + 2 + 3 + 3                                # tests, then `verified --json` per env
    tests = [c for c in calls if " task " in c]
    assert all("--num-processes 4" in c for c in tests)               # every GPU of the host
    assert [c.split(" task ")[1].split()[0] for c in tests] == [
        "deepep-test-intranode", "deepep-test-low-latency"] * 2 + [
        "deepep-test-intranode", "deepep-test-low-latency", "deepep-test-elastic-ep"]
    assert "--test-first-only" in tests[-1]
    fig = (eg / "figures.txt").read_text()
    assert "h200_nvlink_v2_elastic_dispatch_su_gbps=360" in fig and "gpus=4" in fig
    assert fig.strip().splitlines()[-1] == "headline_every_gpu_ok=1"
    assert c.returncode == 0 and (out / "h200-nvlink-v2.pixi.lock").is_file() and (out / "every-gpu.tgz").is_file()
    assert len(list(out.iterdir())) <= 8



@pytest.mark.parametrize("wheel", ["../../x.whl", "/tmp/x.whl", "a/b.whl", "..whl", "x.whl\n", "x.tar.gz", "", None, 7])
def test_a_skeleton_whose_wheel_name_is_a_path_is_one_line(tmp_path, wheel):
    """Issue 52.12: common.sh:rebuild_skeletons wrote to sources/<the skeleton's "wheel">, so ../../x.whl
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
