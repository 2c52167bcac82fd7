"""PyTorch from PyPI's wheels as a pinned option: ``recipes/pytorch-wheel/sources.toml``.

``[versions."2.11.0".<subdir>.<part>]`` is one wheel of pip's closure of ``torch==2.11.0`` (its project,
version, PyPI file name, URL, ``sha256`` and size). A spec's ``[pytorch] provider = "wheel"`` builds one
package of every part, deepep-pytorch (recipes/pytorch-wheel lays the wheels out as pip installs them, in
``lib/pythonX.Y/site-packages``): a package of the env, and what DeepEP builds against (the builder puts
it first on the host interpreter's search path: deepep_env/builder/python_home.py). NCCL and NVSHMEM's
wheels are parts of that closure (torch pins them exactly and finds them by RPATH), so
``[nccl] provider = "wheel"`` is the closure's ``nvidia-nccl-cuNN`` part, not a package of its own.

What the closure is built for follows from its pins, never from a label: the Python is the torch wheel's
``cpXY`` tag, the CUDA is the ``nvidia-cuda-runtime`` part's major.minor. The catalog is read up front:
a spec naming a torch with no pinned closure is refused in one line, listing those that have one.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from pydantic import Field

from deepep_env.base.errors import UserError
from deepep_env.envspec.model import Strict
from deepep_env.envspec.wheel_pins import PartsCatalog, PyPIWheel, check_wheel_names, pinned_parts, read_wheel_catalog

PACKAGE = "pytorch-wheel"
CATALOG = f"recipes/{PACKAGE}/sources.toml"
KIND = PartsCatalog(CATALOG, "torch", "PyTorch wheels", "wheels", "pytorch.version")
_CP_TAG = re.compile(r"-cp3([0-9]{1,2})-")


class TorchCatalog(Strict):
    format: int
    package: str
    versions: dict[str, dict[str, dict[str, PyPIWheel]]] = Field(default_factory=dict)  # torch -> subdir -> part


def load_torch_wheels(recipes_dir: Path) -> TorchCatalog:
    path = recipes_dir / PACKAGE / "sources.toml"
    cat = read_wheel_catalog(path, TorchCatalog, PACKAGE, "PyTorch wheel")
    for v, per_subdir in cat.versions.items():
        for sd, parts in per_subdir.items():
            where = f"versions.{v}.{sd}"
            check_wheel_names(path, where, parts)
            torch = parts.get("torch")
            if torch is None or torch.version != v or not _CP_TAG.search(torch.filename):
                raise UserError(f"torch {v} has no torch=={v} wheel of a CPython tag for {sd}", file=path, field=where,
                                accepted=f"a part named torch (torch=={v}, a cp3XY wheel) for every subdir")
            if _runtime(parts) is None:
                raise UserError(f"torch {v} has no nvidia-cuda-runtime wheel for {sd}: its CUDA is unknown", file=path,
                                field=where, accepted="a part whose project is nvidia-cuda-runtime[-cuNN]")
    return cat


def _runtime(parts: dict[str, PyPIWheel]) -> Optional[PyPIWheel]:
    return next((w for w in parts.values() if re.fullmatch(r"nvidia-cuda-runtime(-cu[0-9]+)?", w.project)), None)


def nccl_wheel(parts: dict[str, PyPIWheel]) -> Optional[PyPIWheel]:
    """The closure's NCCL (``nvidia-nccl-cuNN``), the one torch pins exactly."""
    return next((w for w in parts.values() if re.fullmatch(r"nvidia-nccl-cu[0-9]+", w.project)), None)


def built_for(parts: dict[str, PyPIWheel]) -> tuple[str, str]:
    """(Python, CUDA) the closure is built for: ``3.12`` from torch's ``cp312`` tag, ``13.0`` from the
    runtime wheel's version (load_torch_wheels has checked both exist)."""
    m = _CP_TAG.search(parts["torch"].filename)
    rt = _runtime(parts)
    return (f"3.{m.group(1)}" if m else "?"), (".".join(rt.version.split(".")[:2]) if rt else "?")


def require_torch(recipes_dir: Path, version: str, subdir: str, file: Optional[Path] = None) -> dict[str, PyPIWheel]:
    """The pinned closure of ``pytorch.provider = "wheel"`` (part name -> wheel), or one line saying what is missing."""
    return pinned_parts(KIND, load_torch_wheels(recipes_dir).versions, version, subdir, file)
