"""A small project for the verified/fleet tests: the repo's env specs, pixi.toml and pixi.lock."""
from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DEEPEP_OUTPUT = """\
[testing] Running with BF16, without top-k (async=False, previous=False) ... passed
[testing] Running with FP8, with top-k (async=True, previous=False) ... passed
[tuning] Best dispatch (FP8): SMs 24, NVL chunk 20, 324.72 GB/s (NVL), t: 123.4 us
[tuning] Best dispatch (BF16): SMs 24, NVL chunk 16, 310.10 GB/s (NVL), t: 250.0 us
[tuning] Best combine: SMs 24, NVL chunk 8: 323.57 GB/s (NVL), t: 240.5 us
"""

# DeepEP's tests/test_low_latency.py on 2 ranks (every rank prints its own lines).
LOW_LATENCY_OUTPUT = """\
Allocating buffer size: 2115.111296 MB ...
[rank 0] Dispatch + combine bandwidth: 197.80 GB/s, avg_t=51.20 us, min_t=50.11 us, max_t=53.02 us
[rank 1] Dispatch + combine bandwidth: 190.00 GB/s, avg_t=52.00 us, min_t=50.87 us, max_t=53.90 us
[rank 0] Dispatch bandwidth: 120.31 GB/s, avg_t=31.82 us | Combine bandwidth: 210.55 GB/s, avg_t=35.12 us
[rank 1] Dispatch bandwidth: 119.87 GB/s, avg_t=31.94 us | Combine bandwidth: 209.90 GB/s, avg_t=35.20 us
[rank 0] Dispatch send/recv time: 12.10 + 8.22 us | Combine send/recv time: 14.01 + 9.35 us
[rank 1] Dispatch send/recv time: 12.15 + 8.30 us | Combine send/recv time: 14.07 + 9.41 us
"""
# DeepEP 2.x's tests/elastic/test_ep.py --num-processes 4 --test-first-only on one node (Config and
# cases once per node, the EP lines from every rank), as on the 4xH200 machine with EP_DISABLE_GIN=1.
ELASTIC_EP_OUTPUT = """\
Config:
 > Ranks: 1 x 4
 > Experts: 6/256
 > Tokens: 4096 (max: 4096), hidden: 7168
 > #SM: 24, #QPs: 24/24

Running all test cases:
 > Testing with do_handle_copy=True, expert_alignment=1, use_fp8_dispatch=False, num_bias=0, with_previous_event=False, async_with_compute_stream=False, allocate_on_comm_stream=False ...
   * EP:   0/  4 | dispatch: 0 GB/s (SO), 289 GB/s (SU), 291.402 us, 84213760 bytes | copy: 1650 GB/s, 101.310 us
   * EP:   1/  4 | dispatch: 0 GB/s (SO), 287 GB/s (SU), 293.117 us, 84101632 bytes | copy: 1644 GB/s, 101.702 us
   * EP:   2/  4 | dispatch: 0 GB/s (SO), 288 GB/s (SU), 292.044 us, 84150272 bytes | copy: 1647 GB/s, 101.498 us
   * EP:   3/  4 | dispatch: 0 GB/s (SO), 286 GB/s (SU), 293.860 us, 84062720 bytes | copy: 1641 GB/s, 101.903 us
   @ EP:   0/  4 | combine: 0 GB/s (SO), 342 GB/s (SU), 246.210 us, 84213760 bytes | reduce: 960 GB/s, 58.301 us
   @ EP:   1/  4 | combine: 0 GB/s (SO), 340 GB/s (SU), 247.380 us, 84101632 bytes | reduce: 955 GB/s, 58.612 us
   @ EP:   2/  4 | combine: 0 GB/s (SO), 341 GB/s (SU), 246.905 us, 84150272 bytes | reduce: 958 GB/s, 58.440 us
   @ EP:   3/  4 | combine: 0 GB/s (SO), 339 GB/s (SU), 247.966 us, 84062720 bytes | reduce: 953 GB/s, 58.760 us

"""
# What `--help` and an argparse error of a DeepEP test print (exit 0 and exit 2).
HELP_OUTPUT = """\
usage: test_ep.py [-h] [--num-processes NUM_PROCESSES] [--num-sms NUM_SMS]

Test elastic EP kernels

options:
  -h, --help            show this help message and exit
  --num-processes NUM_PROCESSES
                        Number of processes to spawn (default: 8)
"""
ARGPARSE_ERROR_OUTPUT = """\
usage: test_intranode.py [-h] [--num-processes NUM_PROCESSES] [--num-tokens NUM_TOKENS]
test_intranode.py: error: unrecognized arguments: --num-procs 8
"""
# Every rank of tests/elastic/test_ep.py on a host where NCCL has no Gin transport (issue 38).
GIN_ASSERT_OUTPUT = """\
RuntimeError: Assertion exception (/work/DeepEP/csrc/kernels/backend/nccl.cu:87): (allow_hybrid_mode ? props.railedGinType : props.ginType) != NCCL_GIN_TYPE_NONE and "NCCL GIN is unavailable. This is usually due to a network configuration issue"
"""


def make_project(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO / "env_specs", dest / "env_specs")
    shutil.copy(REPO / "pixi.lock", dest / "pixi.lock")
    shutil.copy(REPO / "pixi.toml", dest / "pixi.toml")
    shutil.copytree(REPO / "recipes", dest / "recipes")
    return dest


def rebuild_package(lock: Path, env: str, name: str) -> None:
    """``name`` of ``env`` as another build to a reader of the lock: its sha256 rewritten."""
    from deepep_env.formats.lockfile import read_lock

    (pkg,) = [p for ps in read_lock(lock).env(env).packages.values() for p in ps if p.name == name]
    old = pkg.sha256
    new = ("0" if old[0] != "0" else "1") + old[1:]
    text = lock.read_text()
    assert text.count(old) == 1
    lock.write_text(text.replace(old, new))


NOW = datetime(2026, 11, 25, 12, 0, 0, tzinfo=timezone.utc)   # the time the record tests write records at


@pytest.fixture
def proj(tmp_path, monkeypatch):
    """A project made by :func:`make_project`, the working folder (import it into a test module to use it)."""
    from deepep_env.base.project import Project

    p = Project(make_project(tmp_path / "proj"))
    monkeypatch.chdir(p.root)
    monkeypatch.delenv("DEEPEP_ENV_PROJECT", raising=False)
    return p
