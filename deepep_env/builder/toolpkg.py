"""The ``deepep-env`` package every environment holds: deepep-env's activation, and nothing else
(issue 50). Its source is the set of modules the activation runs — :data:`deepep_env.base.layers.ACTIVATION`,
the import closure of the conda hook and of ``activate``'s fast path — copied from the running tree
and pinned by content like every other source (docs/build-id.md §2). The tool itself (builder, lock,
views, the other commands) is installed beside the environments (pip or a venv of its own), as pixi
and conda are: never inside the environments it manages.

So the package's build id moves only when a file of that closure moves: a tool-only change leaves
every lock section, and with it every test record bound to one, as it was; an edit of an overlay rule
moves it, and ``lock --check`` says so until the environments are relocked.

The package's version is the activation's own (:data:`VERSION`), not the tool's: a release of the tool
that changes no activation file keeps it. The root ``deepep_env/__init__.py`` (which holds the tool's
version) ships as a fixed stub for the same reason.
"""
from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

import deepep_env
from deepep_env.base.hashing import tree_sha256
from deepep_env.base.layers import ACTIVATION

TOOL = "deepep-env"
# The activation's version: bump it when the package's interface changes (its files, the hook's
# arguments), not for a tool release. DeepEP's recipes require ``deepep-env >=0.2,<1``.
VERSION = "0.2.0"
ROOT_STUB = ('"""deepep-env\'s activation: the modules that compute the host overlay at every activation of\n'
             'this environment (etc/conda/activate.d). The deepep-env tool is installed beside the environment."""\n')


def activation_files(pkg: Path) -> list[Path]:
    """The files of the activation modules under ``pkg`` (the ``deepep_env`` folder), relative to it."""
    out = []
    for mod in sorted(ACTIVATION):
        parts = mod.split(".")[1:]
        as_pkg = Path(*parts, "__init__.py") if parts else Path("__init__.py")
        out.append(as_pkg if (pkg / as_pkg).is_file() else Path(*parts).with_suffix(".py"))
    return out


@functools.lru_cache(maxsize=1)
def tool_source() -> tuple[Path, str]:
    """(a copy of the activation's modules, in a private folder, as a ``deepep_env`` tree; its tree_sha256)."""
    tmp = Path(tempfile.mkdtemp(prefix="deepep-env-activation-src-"))
    atexit.register(shutil.rmtree, tmp, True)
    src = Path(deepep_env.__file__).resolve().parent
    dst = tmp / "deepep_env"
    for rel in activation_files(src):
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / rel, dst / rel)
    (dst / "__init__.py").write_text(ROOT_STUB, encoding="utf-8")
    return dst, tree_sha256(dst)


__all__ = ["TOOL", "VERSION", "activation_files", "tool_source"]
