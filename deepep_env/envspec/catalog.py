"""Upstream pins kept next to each recipe: ``recipes/<package>/sources.toml``.

A source is pinned by *content* (``tree_sha256`` of the unpacked tree, see hashing.tree_sha256) and,
for git, by revision (itself a content address). URLs are only where to look: mirrors may be added
or moved without changing any build id. A source whose content hash is not yet known is "unpinned":
it can be fetched (the hash is printed for review, like ``nix flake lock``) but never built offline.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from pydantic import Field, ValidationError, field_validator, model_validator

from deepep_env.base.engines import ENGINES
from deepep_env.base.errors import UserError
from deepep_env.base.hashing import is_digest
from deepep_env.base.readfile import read_toml
from deepep_env.base.versions import version_matches
from deepep_env.envspec.load import show
from deepep_env.envspec.model import Strict, _check_range

CATALOG_FORMAT = 1


def _digest_or_none(v: Optional[str]) -> Optional[str]:
    if v is not None and not is_digest(v):
        raise ValueError("must be 'sha256:' followed by 64 lowercase hex digits")
    return v


def _submodule_path(path: str) -> str:
    """A submodule's place in the tree: relative, POSIX, no '.'/'..' segments (it is joined under
    the unpacked superproject, so it must never leave it)."""
    parts = path.split("/")
    if not path or path.startswith("/") or "\\" in path or any(p in ("", ".", "..") for p in parts) \
            or not all(re.match(r"^[A-Za-z0-9_.+-]+$", p) for p in parts):
        raise ValueError(f"submodule path {path[:60]!r} must be a relative path inside the tree (e.g. 'third-party/fmt')")
    return path


class SubmodulePin(Strict):
    """A git submodule's content, placed at its path before the tree is hashed. Archives of the
    superproject (GitHub's, ``git archive``) leave the gitlink empty; DeepEP 2.x has ``third-party/fmt``.
    ``rev`` is the commit the superproject records (``git ls-tree <rev> <path>``); it is checked by
    the tree hash, which covers the submodule's files."""

    git: Optional[str] = Field(None, description="the submodule's repository URL")
    rev: str = Field(pattern=r"^[0-9a-f]{40}$", description="the commit the superproject's gitlink records")
    urls: list[str] = Field(default_factory=list, description="archive URLs of that commit; never identity")


class SourcePin(Strict):
    git: Optional[str] = Field(None, description="repository URL")
    rev: Optional[str] = Field(None, pattern=r"^[0-9a-f]{40}$", description="full commit id")
    tag: Optional[str] = None
    urls: list[str] = Field(default_factory=list, description="archive URLs, mirrors; never identity")
    tree_sha256: Optional[str] = Field(None, description="content hash of the unpacked tree, submodules included")
    archive_sha256: Optional[str] = Field(
        None, description="sha256 of the archive file at `urls`, as its publisher or an independent packager "
                          "(e.g. Spack) lists it: fetch checks a download or local copy against it before unpacking, "
                          "so a tree recorded at first fetch comes from a known archive")
    submodules: dict[str, SubmodulePin] = Field(default_factory=dict,
                                                description="{path: submodule}: placed into an archive's tree before hashing")

    _t = field_validator("tree_sha256", "archive_sha256")(lambda cls, v: _digest_or_none(v))

    @field_validator("submodules")
    @classmethod
    def _subs(cls, v: dict[str, SubmodulePin]) -> dict[str, SubmodulePin]:
        for path in v:
            _submodule_path(path)
        return v

    @property
    def pinned(self) -> bool:
        return self.tree_sha256 is not None


class PatchPin(Strict):
    url: str
    sha256: Optional[str] = None
    why: str = Field(min_length=1, description="why this patch exists, with the upstream reference")
    applies_to: list[str] = Field(default_factory=list, description="versions it applies to (DeepEP: revisions); empty = any")
    strip: int = 1
    features: list[str] = Field(default_factory=list, description="features it adds, e.g. 'pr-466'")
    requires_gdrcopy: bool = False

    _s = field_validator("sha256")(lambda cls, v: _digest_or_none(v))


class VersionEntry(Strict):
    source: SourcePin
    notes: str = ""


class RevisionEntry(Strict):
    """A DeepEP revision: what it is and what it works with (field notes §2)."""

    version: str = Field(description="conda version of the package built from it, e.g. '1.2.1'")
    label: str = Field(description="human label, e.g. '1.2.1+29d31c0 + PR #466'")
    engine: str = Field(description="the DeepEP engine it is (deepep_env/base/engines.py ENGINES: 'v1', 'v2')")
    features: list[str] = Field(default_factory=list)
    nvshmem: str = Field(">=3.3.9", description="NVSHMEM versions its kernels are correct with (conda range)")
    # What the revision needs beyond NVSHMEM (EPv2: README "Requirements", setup.py, the JIT's nvcc
    # check). None: no constraint recorded. Ranges, checked by spec/rules.py on every resolve.
    nccl: Optional[str] = Field(None, description="NCCL versions it builds and runs with, e.g. '>=2.30.4'")
    pytorch: Optional[str] = Field(None, description="PyTorch versions it supports, e.g. '>=2.10'")
    cuda: Optional[str] = Field(None, description="CUDA toolkits it compiles (and JIT-compiles) with, e.g. '>=12.3'")
    source: SourcePin
    notes: str = ""

    # rules.py evaluates these ranges on every resolve: a typo must fail here, naming the catalog.
    _n = field_validator("nvshmem")(lambda cls, v: _check_range(v))
    _r = field_validator("nccl", "pytorch", "cuda")(lambda cls, v: v if v is None else _check_range(v))

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, v: str) -> str:
        if v not in ENGINES:
            raise ValueError(f"unknown engine {v!r}; known: {', '.join(ENGINES)} (deepep_env/base/engines.py)")
        return v

    @model_validator(mode="after")
    def _version_of_engine(self) -> "RevisionEntry":
        # The engine's version range is data (base/engines.py): a 2.x revision filed as v1 would build
        # with the wrong recipe, so the catalog says so here.
        eng = ENGINES[self.engine]
        if not version_matches(self.version, eng.versions):
            raise ValueError(f"version {self.version!r} is not {eng.title} ({eng.versions})")
        return self


class Catalog(Strict):
    format: int
    package: str
    versions: dict[str, VersionEntry] = Field(default_factory=dict)
    revisions: dict[str, RevisionEntry] = Field(default_factory=dict)
    patches: dict[str, PatchPin] = Field(default_factory=dict)


def load_catalog(recipes_dir: Path, package: str, *, same_name: bool = True) -> Catalog:
    """``recipes_dir/package/sources.toml``. ``same_name``: the catalog's ``package`` must be the folder's
    name (the project's recipes; a recipe graph's folders may be named otherwise)."""
    path = recipes_dir / package / "sources.toml"
    data = read_toml(path, what="source catalog", accepted="recipes/<package>/sources.toml, a UTF-8 TOML file",
                     missing="missing source catalog")
    if data.get("format") != CATALOG_FORMAT or isinstance(data.get("format"), bool):
        raise UserError(f"unknown catalog format {show(data.get('format'))}", file=path, field="format",
                        accepted=str(CATALOG_FORMAT))
    try:
        cat = Catalog.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise UserError(err["msg"], file=path, field=".".join(show(p, 40) if not isinstance(p, (str, int)) else str(p)
                                                             for p in err["loc"])) from None
    if same_name and cat.package != package:  # a catalog copied from another recipe would pin the wrong upstream
        raise UserError(f"package = {show(cat.package)}, but this catalog is in recipes/{package}/", file=path,
                        field="package", accepted=show(package))
    return cat
