"""Pinned PyPI wheels as build sources: the pin, the catalog reader every wheel catalog shares
(recipes/{nvshmem,cuda,pytorch}-wheel/sources.toml: envspec/wheels.py, cuda_wheels.py, torch_wheels.py), the
checks and lookups the two catalogs of many parts share (CUDA's toolkit, PyTorch's closure) and the wheel as
a source tree. Below the catalogs' own rules, so any of them can import it.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, TypeVar

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from pydantic import Field, ValidationError, field_validator

from deepep_env.base.errors import UserError
from deepep_env.base.hashing import file_tree_sha256, is_digest
from deepep_env.envspec.catalog import CATALOG_FORMAT, SourcePin
from deepep_env.envspec.load import read_spec_bytes, show
from deepep_env.envspec.model import Strict


class WheelPin(Strict):
    filename: str = Field(pattern=r"^nvidia_nvshmem_cu1[0-9]-[0-9.]+-py3-none-[A-Za-z0-9_.]+\.whl$")
    url: str = Field(pattern=r"^https://files\.pythonhosted\.org/packages/[0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{60}/[A-Za-z0-9_.-]+\.whl$")
    sha256: str
    size: int = Field(gt=0)

    _d = field_validator("sha256")(lambda cls, v: v if is_digest(v) else (_ for _ in ()).throw(
        ValueError("must be 'sha256:' followed by 64 lowercase hex digits")))


class PyPIWheel(WheelPin):
    """A wheel pin (URL, sha256, size) of any project, with its project and version."""
    project: str = Field(pattern=r"^[a-z0-9]+([-_.][a-z0-9]+)*$")
    version: str = Field(pattern=r"^[0-9]+(\.[0-9]+)*([a-z]+[0-9]*)?(\.post[0-9]+)?$")
    filename: str = Field(pattern=r"^[A-Za-z0-9_]+-[0-9][A-Za-z0-9_.]*-[A-Za-z0-9_.]+-[A-Za-z0-9_.]+-[A-Za-z0-9_.]+\.whl$")


C = TypeVar("C", bound=Strict)
W = TypeVar("W", bound=PyPIWheel)


def read_wheel_catalog(path: Path, model: type[C], package: str, what: str) -> C:
    """A wheel catalog (``recipes/<package>/sources.toml``) as ``model``: empty when the file is absent;
    unreadable TOML, a field the model refuses, or another format/package is one line naming the file
    and the field. ``what`` names the catalog in the first of those (``wheel``, ``toolkit``)."""
    if not path.exists():
        return model.model_validate({"format": CATALOG_FORMAT, "package": package})
    try:
        data = tomllib.loads(read_spec_bytes(path).decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise UserError(f"unreadable {what} catalog: {type(exc).__name__}", file=path, accepted="TOML 1.0, UTF-8") from None
    try:
        cat = model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise UserError(err["msg"], file=path, field=".".join(str(p) for p in err["loc"])) from None
    fmt, pkg = getattr(cat, "format"), getattr(cat, "package")
    if fmt != CATALOG_FORMAT or pkg != package:
        raise UserError(f"format/package {show(fmt)}/{show(pkg)}", file=path,
                        accepted=f"format = {CATALOG_FORMAT}, package = {package!r}")
    return cat


def wheel_source(pin: WheelPin) -> SourcePin:
    """The wheel as a build source: a tree holding the one file ``pin.filename``, so the source cache,
    staging and the build id treat it like any pinned tree (its ``tree_sha256`` follows from the
    wheel's published sha256: :func:`deepep_env.base.hashing.file_tree_sha256`)."""
    return SourcePin(urls=[pin.url], tree_sha256=file_tree_sha256(pin.filename, pin.sha256))


def check_wheel_names(path: Path, where: str, parts: Mapping[str, PyPIWheel]) -> None:
    """Each part's file name is its project and version (PEP 427's escaped name), and its URL's last segment."""
    for part, w in parts.items():
        stem = re.sub(r"[-_.]+", "_", w.project).lower()
        if not w.filename.lower().startswith(f"{stem}-{w.version}-") or w.url.rsplit("/", 1)[-1] != w.filename:
            raise UserError(f"{w.filename} is not {w.project}=={w.version}", file=path, field=f"{where}.{part}")


@dataclass(frozen=True)
class PartsCatalog:
    """How a catalog of many parts names what it pins, in its one-line refusals."""
    catalog: str   # recipes/<package>/sources.toml
    label: str     # what a version key is: "CUDA", "torch"
    pins: str      # what the catalog pins: "CUDA toolkit wheels"
    short: str     # the same, after the version: "toolkit wheels"
    field: str     # the spec field the version key comes from
    hint: str = ""  # after the first refusal, why a version may be missing


def pinned_parts(kind: PartsCatalog, versions: Mapping[str, Mapping[str, dict[str, W]]], key: str, subdir: str,
                 file: Optional[Path] = None) -> dict[str, W]:
    """The parts pinned for version ``key`` on ``subdir`` (part name -> wheel, sorted), or one line saying what is missing."""
    if key not in versions:
        raise UserError(f"no pinned {kind.pins} for {kind.label} {show(key)} in {kind.catalog}{kind.hint}", file=file,
                        field=kind.field, accepted=", ".join(sorted(versions)) or "no version is catalogued")
    parts = versions[key].get(subdir)
    if not parts:
        raise UserError(f"{kind.label} {key} has no pinned {kind.short} for {subdir} in {kind.catalog}", file=file,
                        field="subdirs", accepted=", ".join(sorted(versions[key])))
    return dict(sorted(parts.items()))


def wheel_sources(parts: Mapping[str, WheelPin]) -> dict[str, SourcePin]:
    """Each wheel as a build source: a tree holding that one file (as NVSHMEM's wheel is)."""
    return {part: wheel_source(w) for part, w in parts.items()}


def wheel_rows(parts: Mapping[str, PyPIWheel]) -> list[dict[str, object]]:
    """What ``plan`` shows for a wheel-provided component: each wheel with its pin (none for another provider)."""
    return [{"part": part, "project": w.project, "version": w.version, "sha256": w.sha256, "size": w.size,
             "filename": w.filename} for part, w in parts.items()]
