"""deepep-env's own package (recipes/deepep-env): its source is the running ``deepep_env`` tree,
pinned by content like every other source (docs/build-id.md §2).

The tree is copied without bytecode (``__pycache__``) or empty folders into a private folder once per process and
hashed there; the builder puts that copy into the source cache under its hash, so the package is
staged, verified and built like an upstream source.

Locks pin the tool by version, not build (docs/lockfiles.md §2): its build id moves with every
change to deepep-env's code, which says nothing about the DeepEP environment it activates.
"""
from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

import deepep_env
from deepep_env.base.hashing import tree_sha256

TOOL = "deepep-env"
VERSION = deepep_env.__version__


@functools.lru_cache(maxsize=1)
def tool_source() -> tuple[Path, str]:
    """(a clean copy of the deepep_env package, its tree_sha256)."""
    tmp = Path(tempfile.mkdtemp(prefix="deepep-env-tool-src-"))
    atexit.register(shutil.rmtree, tmp, True)
    dst = tmp / "deepep_env"
    shutil.copytree(Path(deepep_env.__file__).resolve().parent, dst,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo"))
    _drop_empty_dirs(dst)
    return dst, tree_sha256(dst)


def _drop_empty_dirs(root: Path) -> None:
    """Remove folders that hold no file: git carries none, so a fresh clone has none. A module moved
    away leaves its old folder behind with only ``__pycache__`` in it, which made this checkout's tool
    id differ from a clone's."""
    for d in sorted((p for p in root.rglob("*") if p.is_dir() and not p.is_symlink()),
                    key=lambda p: len(p.parts), reverse=True):
        if not any(d.iterdir()):
            d.rmdir()
