"""What isolation costs a build whose host environment is big (issue 25.7), on CPU.

A stand-in for conda mode's PyTorch/CUDA host environment: a channel with one large package
(``--mb`` MiB in ``--files`` files: 400 like a toolkit, ~20000 like PyTorch), and a graph of ``--dependents`` small recipes that each
take it as a host requirement (``--extra-channel``). The same graph is built cold twice, in two
processes, one per cache mode (rattler-build reads RATTLER_CACHE_DIR once per process):

- ``private``: the cache is emptied around every build (every dependent extracts the package again);
- ``verified``: extractions are kept and checked (deepep_env/builder/pkgcache.py);
- ``host``: the baseline, host mode — the same recipes read the same files from a folder of the
  machine, with no host environment to extract or link.

Each mode starts from an empty cache, so the first dependent extracts in both; the difference is what
the others pay. All three in one run. Prints ``name=value`` lines; the last is the headline: what
isolation adds to one build, in seconds (``(verified - host) / dependents``).

    python benchmarks/bench_build_pkgcache.py [--mb 300] [--dependents 3] [--files 400]

Not the GPU figure the issue asks for (conda-mode NVSHMEM/DeepEP, both modes in one run): that needs
the repack channel on a GPU machine.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def big_channel(root: Path, mb: int, nfiles: int = 400) -> Path:
    from rattler_build import assemble_package

    from deepep_env.builder.channel import index

    files = root / "big-files"
    for i in range(nfiles):
        d = files / "lib" / f"part{i // 100}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"blob{i}.bin").write_bytes(os.urandom(mb * 1024 * 1024 // nfiles))
    chan = root / "big-channel"
    assemble_package(name="big-toolkit", version="1.0", target_platform="linux-64", build_string="h0",
                     output_dir=chan / "linux-64", files_dir=files, depends=[], compression_level=1)
    (chan / "noarch").mkdir(parents=True, exist_ok=True)
    index(chan)
    return chan


def graph(root: Path, n: int, host_files: Path | None = None) -> Path:
    """``n`` small recipes that read the big package: from their host environment (conda mode), or,
    with ``host_files``, from that folder of the machine (host mode: nothing to extract or link)."""
    g = root / ("graph-host" if host_files else "graph")
    where = f"{host_files}/lib" if host_files else "$PREFIX/lib"
    host = "" if host_files else "requirements:\n  host: [big-toolkit]\n"
    for i in range(n):
        d = g / f"dep{i}"
        d.mkdir(parents=True)
        (d / "recipe.yaml").write_text(textwrap.dedent(f"""\
            package: {{name: dep{i}, version: "1"}}
            build:
              string: ${{{{ build_string }}}}
              script: [mkdir -p $PREFIX/share, ls {where} > $PREFIX/share/dep{i}.txt]
            """) + host)
    return g


def run_mode(mode: str, g: Path, chan: Path, root: Path) -> float:
    env = dict(os.environ, DEEPEP_ENV_BUILD_PKGS=mode, DEEPEP_ENV_BUILD_PKGS_DIR=str(root / f"pkgs-{mode}"),
               DEEPEP_ENV_BUILD_ROOT=str(root / f"broot-{mode}"), PYTHONPATH=str(REPO))
    state = root / f"state-{mode}"
    t = time.monotonic()
    subprocess.run([sys.executable, "-m", "deepep_env.cli.main", "build", "--recipes", str(g), "--store",
                    str(state / "store"), "--channel", str(state / "channel"), "--offline", "--extra-channel",
                    chan.as_uri(), "-j", "1"], env=env, check=True, capture_output=True)
    return time.monotonic() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--dependents", type=int, default=3)
    ap.add_argument("--files", type=int, default=400, help="files in the big package (PyTorch's has ~20000)")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    with tempfile.TemporaryDirectory(prefix="bench-pkgcache-") as tmp:
        root = Path(tmp)
        chan = big_channel(root, a.mb, a.files)
        g = graph(root, a.dependents)
        host = run_mode("host", graph(root, a.dependents, root / "big-files"), chan, root)
        private = run_mode("private", g, chan, root)
        verified = run_mode("verified", g, chan, root)
        # the check's own cost on the kept extraction: by stat (every build, twice), and in full
        # (sha256 against paths.json: once, when an extraction is first seen)
        from deepep_env.builder import pkgcache

        cache = root / "pkgs-verified"
        t = time.monotonic()
        pkgcache.check(cache)
        stat_s = time.monotonic() - t
        for side in (cache / "pkgs").glob(f"*{pkgcache.STATS_SUFFIX}"):
            side.unlink()
        t = time.monotonic()
        pkgcache.check(cache)
        full_s = time.monotonic() - t
    print(f"host_env_mb={a.mb}")
    print(f"host_env_files={a.files}")
    print(f"check_by_stat_s={stat_s:.3f}")
    print(f"check_full_s={full_s:.3f}")
    print(f"isolation_share_of_verified_build={(2 * a.dependents * stat_s + full_s) / verified:.3f}")
    print(f"dependents={a.dependents}")
    print(f"build_host_s={host:.1f}")
    print(f"build_private_s={private:.1f}")
    print(f"build_verified_s={verified:.1f}")
    print(f"verified_vs_private={verified / private:.3f}")
    print(f"verified_vs_host={verified / host:.3f}")
    # what isolation adds to one build, in seconds: compare it with a real build's length (DeepEP in
    # conda mode took 98.7 s on an H100, NVSHMEM 212.7 s: docs/benchmarks.md run X)
    print(f"isolation_s_per_build={(verified - host) / a.dependents:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
