"""Benchmark: lock, install (cold, then the warm no-op), check and diff for ~300 generated packages.

    python benchmarks/bench_lock.py [--packages N]

Packages are assembled with rattler-build's `assemble_package` into a local channel (a dependency
tree under one root, `bench-app`), locked with py-rattler as the committed locks are (the channel
named by a team URL, mapped back to the folder at install time), installed into a fresh prefix
with a fresh package cache, installed again (must be a no-op), then 10% of the packages get a new
version, the env is relocked and the two locks are diffed. Prints `name=value` lines (seconds);
the last line is the headline.
"""
from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TEAM_URL = "https://conda.bench.invalid/bench/"
# Fixed content and timestamps: an unchanged package is the same file in both channel versions.
STAMP = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def generate(channel: Path, n: int, bumped: set[int], version: str) -> None:
    import rattler.index
    from rattler_build import assemble_package

    staged = channel.parent / "files"
    staged.mkdir(parents=True, exist_ok=True)
    (staged / "lib").mkdir(exist_ok=True)
    (staged / "lib" / "payload.bin").write_bytes(bytes(range(256)) * 16)
    for i in range(n):
        v = version if i in bumped else "1.0"
        deps = [f"bench-pkg-{j:03d}" for j in (2 * i + 1, 2 * i + 2) if j < n]  # a binary tree
        assemble_package(name=f"bench-pkg-{i:03d}", version=v, target_platform="linux-64",
                         build_string=f"h{i:010x}_0", output_dir=channel / "linux-64", files_dir=staged,
                         depends=deps, compression_level=1, timestamp=STAMP)
    assemble_package(name="bench-app", version="1.0", target_platform="linux-64", build_string="h0000000000_0",
                     output_dir=channel / "linux-64", files_dir=staged, depends=["bench-pkg-000"],
                     compression_level=1, timestamp=STAMP)
    (channel / "noarch").mkdir(exist_ok=True)
    asyncio.run(rattler.index.index_fs(channel, write_shards=False, write_zst=False, force=True))


def request(channel: Path):
    from deepep_env.base.channels.urls import ChannelRef, file_url
    from deepep_env.formats.lock_platforms import platform_for
    from deepep_env.lock.request import LockRequest, Requirement

    ref = ChannelRef("local", file_url(channel), TEAM_URL, local=True)
    return LockRequest(env="bench", platforms=[platform_for("linux-64", "12.9")], channels=[ref],
                       requirements=[Requirement("bench-app", "bench-app", "extra", kind="extra")])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--packages", type=int, default=300)
    args = ap.parse_args()
    n = args.packages
    from deepep_env.install.installer import install_locked
    from deepep_env.lock import check_request, diff_data, lock_request, read_lock

    with tempfile.TemporaryDirectory(prefix="bench-lock-") as tmp:
        root = Path(tmp)
        os.environ["DEEPEP_ENV_CACHE_DIR"] = str(root / "cache")
        ch1, ch2 = root / "v1" / "channel", root / "v2" / "channel"
        t = time.perf_counter()
        generate(ch1, n, set(), "1.0")
        gen_s = time.perf_counter() - t
        generate(ch2, n, set(range(0, n, 10)), "1.1")

        lock1, lock2 = root / "v1.pixi.lock", root / "v2.pixi.lock"
        req1 = request(ch1)
        t = time.perf_counter()
        res = lock_request(req1, lock1)
        lock_s = time.perf_counter() - t
        assert sum(len(v) for v in res.packages.values()) == n + 1, res.packages

        t = time.perf_counter()
        chk = check_request(req1, read_lock(lock1), lock1)
        check_s = time.perf_counter() - t
        assert chk.fresh, [r.message() for r in chk.reasons]

        prefix = root / "prefix"
        mirrors = {TEAM_URL: ch1}
        t = time.perf_counter()
        r = install_locked(lock1, "bench", prefix, mirrors=mirrors)
        cold_s = time.perf_counter() - t
        assert r.status == "installed" and r.verified == n + 1
        t = time.perf_counter()
        r = install_locked(lock1, "bench", prefix, mirrors=mirrors)
        warm_s = time.perf_counter() - t
        assert r.status == "up-to-date"

        lock_request(request(ch2), lock2)
        t = time.perf_counter()
        d = diff_data(read_lock(lock1), read_lock(lock2))
        diff_s = time.perf_counter() - t
        assert d.summary()["changed"] == len(range(0, n, 10)), d.summary()

        print(f"packages={n + 1}")
        print(f"generate_s={gen_s:.3f}")
        print(f"check_s={check_s:.3f}")
        print(f"install_cold_s={cold_s:.3f}")
        print(f"install_warm_noop_s={warm_s:.4f}")
        print(f"diff_s={diff_s:.3f}")
        print(f"lock_s={lock_s:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
