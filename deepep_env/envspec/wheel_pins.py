"""Pinned PyPI wheels as build sources: the pin, the catalog reader every wheel catalog shares
(recipes/{nvshmem,cuda,pytorch}-wheel/sources.toml: envspec/wheels.py, cuda_wheels.py, torch_wheels.py) and
the wheel as a source tree. Below the catalogs' own rules, so any of them can import it.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TypeVar

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


C = TypeVar("C", bound=Strict)


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
