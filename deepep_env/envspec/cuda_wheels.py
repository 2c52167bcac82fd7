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
from deepep_env.envspec.catalog import SourcePin
from deepep_env.envspec.load import show
from deepep_env.envspec.model import Strict
from deepep_env.envspec.wheel_pins import WheelPin, read_wheel_catalog, wheel_source

PACKAGE = "cuda-wheel"
CATALOG = f"recipes/{PACKAGE}/sources.toml"


class ToolkitWheel(WheelPin):
    """One wheel of the toolkit: NVSHMEM's wheel pin (URL, sha256, size) with its project and version,
    for any NVIDIA wheel name."""
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
            for part, w in parts.items():
                stem = w.project.replace("-", "_")
                if not w.filename.startswith(f"{stem}-{w.version}-") or w.url.rsplit("/", 1)[-1] != w.filename:
                    raise UserError(f"{w.filename} is not {w.project}=={w.version}", file=path,
                                    field=f"versions.{v}.{sd}.{part}")
            if "nvcc" not in parts:   # the package's version is nvcc's (builder/plan.py)
                raise UserError(f"CUDA {v} has no nvcc wheel for {sd}", file=path, field=f"versions.{v}.{sd}",
                                accepted="a part named nvcc (nvidia-cuda-nvcc) for every subdir")
    return cat


def require_toolkit(recipes_dir: Path, cuda_version: str, subdir: str,
                    file: Optional[Path] = None) -> dict[str, ToolkitWheel]:
    """The pinned wheels of ``cuda.provider = "wheel"`` (part name -> wheel), or one line saying what is missing."""
    cat = load_toolkits(recipes_dir)
    if cuda_version not in cat.versions:
        raise UserError(f"no pinned CUDA toolkit wheels for CUDA {show(cuda_version)} in {CATALOG} (PyPI has no nvcc "
                        "before 13.0)", file=file, field="cuda.version",
                        accepted=", ".join(sorted(cat.versions)) or "no version is catalogued")
    parts = cat.versions[cuda_version].get(subdir)
    if not parts:
        raise UserError(f"CUDA {cuda_version} has no pinned toolkit wheels for {subdir} in {CATALOG}", file=file,
                        field="subdirs", accepted=", ".join(sorted(cat.versions[cuda_version])))
    return dict(sorted(parts.items()))


def toolkit_sources(parts: dict[str, ToolkitWheel]) -> dict[str, SourcePin]:
    """Each wheel as a build source: a tree holding that one file (as NVSHMEM's wheel is)."""
    return {part: wheel_source(w) for part, w in parts.items()}


def toolkit_rows(cuda_provider: str, cuda_version: str, subdir: str, recipes_dir: Path) -> list[dict[str, object]]:
    """What ``plan`` shows for a wheel-provided CUDA: each wheel with its pin (empty for another provider)."""
    if cuda_provider != "wheel":
        return []
    return [{"part": part, "project": w.project, "version": w.version, "sha256": w.sha256, "size": w.size,
             "filename": w.filename}
            for part, w in require_toolkit(recipes_dir, cuda_version, subdir).items()]
