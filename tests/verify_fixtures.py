"""A small project for the verified/fleet tests: the repo's env specs, pixi.toml and pixi.lock."""
from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEEPEP_OUTPUT = """\
[testing] Running with BF16, without top-k (async=False, previous=False) ... passed
[testing] Running with FP8, with top-k (async=True, previous=False) ... passed
[tuning] Best dispatch (FP8): SMs 24, NVL chunk 20, 324.72 GB/s (NVL), t: 123.4 us
[tuning] Best dispatch (BF16): SMs 24, NVL chunk 16, 310.10 GB/s (NVL), t: 250.0 us
[tuning] Best combine: SMs 24, NVL chunk 8: 323.57 GB/s (NVL), t: 240.5 us
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
