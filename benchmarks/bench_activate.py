"""Benchmark: `deepep-env activate` end to end, as a shell hook runs it (a new process each time).

Setup: the packaged GCP B200 host (gcp-b200-demo: 8x B200, 8 mlx5 NICs behind 4 switches) is
materialised in a temp dir, with a fake installed prefix (conda-meta/deepep-env.json, an
activate.d script, a pip NVSHMEM so the preload rule fires). Each sample runs
``deepep-env activate gcp-b200 --root <tree> --prefix <prefix>`` (the console script's own
entry, ``from deepep_env.cli.main import main``) in a fresh
interpreter; ``python -c pass`` is timed the same way, interleaved, for scale.

Bytecode: PYTHONDONTWRITEBYTECODE is removed from the children's environment and one warm-up
run writes the .pyc files, as an installed package has them; otherwise every run recompiles.

Also checks, with ``-X importtime``, that typer, click, rich, pydantic and rattler are not
imported on this path (cli/fast_activate.py). The same for ``deepep-env hook --shell sh`` — what
the deepep-env package's ``activate.d`` script runs on every conda/pixi activation (issue 16) —
timed the same way (``hook_*`` figures).

Issue 50: the environments hold the activation as a package of its own (recipes/deepep-env: the
modules of base/layers.py ACTIVATION and ``share/deepep-env/hook.py``), and that package's hook is what
conda, pixi and ``deepep-env task`` run. It is laid out here as the recipe lays it out (the activation's
source tree, builder/toolpkg.py) and timed too (``pkg_hook_*``), as is ``activate --demo-host``; each is
also given as a ratio to ``python -c pass`` of the same interpreter (goal: <= 1.5).

Prints ``name=value`` lines; the last one is the headline (p50 in ms; target < 150).
Usage: python benchmarks/bench_activate.py [--runs N]
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FORBIDDEN = ("typer", "click", "rich", "pydantic", "pydantic_core", "rattler", "rattler_build", "yaml")


def make_prefix(base: Path) -> Path:
    prefix = base / "prefix"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "bin").mkdir()
    (prefix / "lib" / "python3.12" / "site-packages" / "nvidia" / "nvshmem" / "lib").mkdir(parents=True)
    (prefix / "lib" / "libnvshmem_host.so.3").write_bytes(b"")
    (prefix / "lib" / "python3.12" / "site-packages" / "nvidia" / "nvshmem" / "lib" / "libnvshmem_host.so.3").write_bytes(b"")
    (prefix / "etc" / "conda" / "activate.d").mkdir(parents=True)
    (prefix / "etc" / "conda" / "activate.d" / "cuda.sh").write_text('export CUDA_HOME="$CONDA_PREFIX"\n')
    meta = {
        "env": "gcp-b200",
        "platforms": ["gcp-b200"],
        "python": {"provider": "host", "version": "3.12"},
        "spec_env": {"NVSHMEM_QP_DEPTH": "1024"},
    }
    (prefix / "conda-meta" / "deepep-env.json").write_text(json.dumps(meta))
    return prefix


def package_hook(dest: Path) -> Path:
    """The deepep-env package's share/deepep-env as recipes/deepep-env/build.sh lays it out: the
    activation's modules (builder/toolpkg.py's source tree) under lib/, and the recipe's hook.py."""
    import shutil

    from deepep_env.builder.toolpkg import tool_source

    src, _ = tool_source()
    share = dest / "share" / "deepep-env"
    shutil.copytree(src, share / "lib" / "deepep_env")
    shutil.copyfile(REPO / "recipes" / "deepep-env" / "hook.py", share / "hook.py")
    return share / "hook.py"


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    res = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO)
    dt = (time.perf_counter() - t) * 1000
    if res.returncode != 0:
        raise SystemExit(f"failed ({res.returncode}): {' '.join(cmd)}\n{res.stderr.decode()}")
    return dt


def imports_of(cmd: list[str], env: dict[str, str]) -> tuple[list[str], list[str]]:
    """(forbidden top-level modules imported, deepep_env modules imported) by ``cmd``."""
    res = subprocess.run([sys.executable, "-X", "importtime", *cmd[1:]], env=env, capture_output=True, text=True,
                         cwd=REPO)
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("import time:")]
    imported = {ln.split("|")[-1].strip().split(".")[0] for ln in lines}
    return sorted(imported & set(FORBIDDEN)), sorted(ln.split("|")[-1].strip() for ln in lines if "deepep_env" in ln)


def main(argv: list[str]) -> int:
    runs = 30
    if argv[:1] == ["--runs"] and len(argv) > 1:
        runs = int(argv[1])
    from deepep_env.platform.demo import materialize_demo_host

    with tempfile.TemporaryDirectory(prefix="bench-activate-") as tmp:
        base = Path(tmp)
        root = materialize_demo_host("gcp-b200-demo", base / "host")
        prefix = make_prefix(base)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPATH"] = str(REPO)
        env["SHELL"] = "/bin/bash"
        # What the `deepep-env` console script runs (no runpy): from deepep_env.cli.main import main.
        entry = "import sys; from deepep_env.cli.main import main; sys.exit(main())"
        activate = [sys.executable, "-c", entry, "activate", "gcp-b200", "--root", str(root), "--prefix", str(prefix)]
        hook = [sys.executable, "-c", entry, "hook", "--shell", "sh", "--prefix", str(prefix)]
        pkg = package_hook(base / "pkg")
        pkg_hook = [sys.executable, str(pkg), "--shell", "sh", "--prefix", str(prefix)]
        demo = [sys.executable, "-c", entry, "activate", "gcp-b200", "--demo-host", "gcp-b200-demo", "--prefix", str(prefix)]
        hook_env = dict(env, DEEPEP_ENV_HOST_ROOT=str(root))
        bare = [sys.executable, "-c", "pass"]
        timed(activate, env)  # warm-up: writes .pyc files
        timed(hook, hook_env)
        timed(bare, env)
        pkg_env = {k: v for k, v in hook_env.items() if k != "PYTHONPATH"}   # the package's own tree, nothing else
        timed(pkg_hook, pkg_env)
        timed(demo, env)

        bad, ours = imports_of(activate, env)
        bad_hook, _ = imports_of(hook, hook_env)
        bad = sorted(set(bad) | set(bad_hook))

        bad_pkg, pkg_mods = imports_of(pkg_hook, pkg_env)
        bad = sorted(set(bad) | set(bad_pkg))

        act_ms, bare_ms, hook_ms, pkg_ms, demo_ms = [], [], [], [], []
        for _ in range(runs):
            bare_ms.append(timed(bare, env))
            act_ms.append(timed(activate, env))
            hook_ms.append(timed(hook, hook_env))
            pkg_ms.append(timed(pkg_hook, pkg_env))
            demo_ms.append(timed(demo, env))
        b50 = statistics.median(bare_ms)

        print(f"runs={runs}")
        print(f"modules_deepep_env={len(ours)}")
        print(f"forbidden_imports={','.join(bad) if bad else 'none'}")
        print(f"python_c_pass_p50_ms={statistics.median(bare_ms):.1f}")
        print(f"activate_min_ms={min(act_ms):.1f}")
        print(f"activate_p90_ms={sorted(act_ms)[int(0.9 * (runs - 1))]:.1f}")
        print(f"activate_minus_bare_p50_ms={statistics.median(a - b for a, b in zip(act_ms, bare_ms)):.1f}")
        print(f"hook_p90_ms={sorted(hook_ms)[int(0.9 * (runs - 1))]:.1f}")
        print(f"hook_p50_ms={statistics.median(hook_ms):.1f}")
        print(f"pkg_hook_modules_deepep_env={len(pkg_mods)}")
        print(f"pkg_hook_p50_ms={statistics.median(pkg_ms):.1f}")
        print(f"activate_demo_host_p50_ms={statistics.median(demo_ms):.1f}")
        print(f"pkg_hook_vs_bare={statistics.median(pkg_ms) / b50:.2f}")
        print(f"hook_vs_bare={statistics.median(hook_ms) / b50:.2f}")
        print(f"activate_vs_bare={statistics.median(act_ms) / b50:.2f}")
        print(f"activate_p50_ms={statistics.median(act_ms):.1f}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
