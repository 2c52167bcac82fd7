"""What DeepEP's test scripts import, as pinned wheels: ``recipes/test-wheels/sources.toml``.

``[versions."3.12".<subdir>.<part>]`` is one wheel for CPython 3.12 (its project, version, PyPI file name,
URL, ``sha256`` and size): keyed by the Python, since a binary wheel (numpy) follows the interpreter. A
spec's ``[tests] wheels = ["numpy"]`` builds one package of those parts, deepep-test-wheels
(recipes/test-wheels, with pytorch-wheel's installer), a package of the env and a dependency of nothing.
A project with no pin for the spec's Python and subdir is refused in one line naming the catalog.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from pydantic import Field

from deepep_env.base.errors import UserError
from deepep_env.envspec.model import Strict
from deepep_env.envspec.wheel_pins import PartsCatalog, PyPIWheel, check_wheel_names, pinned_parts, read_wheel_catalog

PACKAGE = "test-wheels"
CATALOG = f"recipes/{PACKAGE}/sources.toml"
KIND = PartsCatalog(CATALOG, "Python", "test wheels", "test wheels", "python.version")


class TestWheelCatalog(Strict):
    format: int
    package: str
    versions: dict[str, dict[str, dict[str, PyPIWheel]]] = Field(default_factory=dict)  # python -> subdir -> part


def load_test_wheels(recipes_dir: Path) -> TestWheelCatalog:
    path = recipes_dir / PACKAGE / "sources.toml"
    cat = read_wheel_catalog(path, TestWheelCatalog, PACKAGE, "test wheel")
    for v, per_subdir in cat.versions.items():
        for sd, parts in per_subdir.items():
            check_wheel_names(path, f"versions.{v}.{sd}", parts)
    return cat


def require_test_wheels(recipes_dir: Path, projects: list[str], python: str, subdir: str,
                        file: Optional[Path] = None) -> dict[str, PyPIWheel]:
    """The pinned wheels of ``[tests] wheels`` for ``python`` on ``subdir`` (part name -> wheel, sorted), or
    one line naming the project the catalog does not pin."""
    parts = pinned_parts(KIND, load_test_wheels(recipes_dir).versions, python, subdir, file)
    by_project = {w.project: part for part, w in parts.items()}
    out: dict[str, PyPIWheel] = {}
    for p in projects:
        key = p.lower().replace("_", "-").replace(".", "-")
        if key not in by_project:
            raise UserError(f"test wheel {p!r} is not pinned for Python {python} on {subdir} in {CATALOG}", file=file,
                            field="tests.wheels", accepted=", ".join(sorted(by_project)) or "none is pinned")
        out[by_project[key]] = parts[by_project[key]]
    return dict(sorted(out.items()))
