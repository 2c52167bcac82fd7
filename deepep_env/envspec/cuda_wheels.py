"""NVIDIA's CUDA toolkit wheels as a pinned option: ``recipes/cuda-wheel/sources.toml``.

``[versions."13.0".<subdir>.<part>]`` is one wheel of the toolkit (``project==version``, its PyPI file
name, URL, ``sha256`` and size). A spec's ``[cuda] provider = "wheel"`` builds the toolkit from every
part of its CUDA version: recipes/cuda-wheel repacks them into one package, and each build that needs
CUDA gets it unpacked beside it (deepep_env/builder/cuda_home.py). The catalog is read up front: a spec
naming a CUDA version with no pinned toolkit is refused in one line, listing the versions that have one.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from pydantic import Field

from deepep_env.base.errors import UserError
from deepep_env.envspec.model import Strict
from deepep_env.envspec.wheel_pins import PartsCatalog, PyPIWheel, check_wheel_names, pinned_parts, read_wheel_catalog

PACKAGE = "cuda-wheel"
CATALOG = f"recipes/{PACKAGE}/sources.toml"
KIND = PartsCatalog(CATALOG, "CUDA", "CUDA toolkit wheels", "toolkit wheels", "cuda.version",
                    " (PyPI has no nvcc before 13.0)")


class ToolkitWheel(PyPIWheel):
    """One wheel of the toolkit: a PyPI wheel pin, of an NVIDIA project, pure-Python tagged."""
    project: str = Field(pattern=r"^nvidia-[a-z0-9-]+$")
    version: str = Field(pattern=r"^[0-9]+(\.[0-9]+)+$")
    filename: str = Field(pattern=r"^nvidia_[a-z0-9_]+-[0-9.]+-py3-none-[A-Za-z0-9_.]+\.whl$")


class ToolkitCatalog(Strict):
    format: int
    package: str
    versions: dict[str, dict[str, dict[str, ToolkitWheel]]] = Field(default_factory=dict)  # CUDA -> subdir -> part


def load_toolkits(recipes_dir: Path) -> ToolkitCatalog:
    path = recipes_dir / PACKAGE / "sources.toml"
    cat = read_wheel_catalog(path, ToolkitCatalog, PACKAGE, "toolkit")
    for v, per_subdir in cat.versions.items():
        for sd, parts in per_subdir.items():
            check_wheel_names(path, f"versions.{v}.{sd}", parts)
            if "nvcc" not in parts:   # the package's version is nvcc's (builder/plan.py)
                raise UserError(f"CUDA {v} has no nvcc wheel for {sd}", file=path, field=f"versions.{v}.{sd}",
                                accepted="a part named nvcc (nvidia-cuda-nvcc) for every subdir")
    return cat


def require_toolkit(recipes_dir: Path, cuda_version: str, subdir: str,
                    file: Optional[Path] = None) -> dict[str, ToolkitWheel]:
    """The pinned wheels of ``cuda.provider = "wheel"`` (part name -> wheel), or one line saying what is missing."""
    return pinned_parts(KIND, load_toolkits(recipes_dir).versions, cuda_version, subdir, file)
