"""Repodata for channels that cannot index themselves (a WebDAV/PUT tree).

Records are made by rattler's own indexer (``rattler.index.index_fs``) over a staging channel that
holds only the new packages, so a merged index has exactly the fields rattler would write; they
are then merged into the channel's existing ``repodata.json``. The server's copy is the truth:
we never rebuild an index from a listing, so packages published by others stay listed.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable

from deepep_env.base.errors import UserError
from deepep_env.base.readfile import MAX_REPODATA_BYTES, read_json
from deepep_env.publish.isolated import IsolatedError
from deepep_env.publish.isolated import call as call_isolated
from deepep_env.publish.model import LocalPackage

DERIVED_INDEX_FILES = ("repodata.json.zst", "repodata.json.bz2", "repodata_shards.msgpack.zst",
                       "current_repodata.json")


def index_dir(channel: Path, subdirs: Iterable[str] | None = None, *, derived: bool = True) -> None:
    """rattler's ``index_fs`` over ``channel`` (each given subdir, or all), in a child
    interpreter (see ``deepep_env.publish.isolated``). ``noarch`` must exist: a conda channel
    always has it, and rattler refuses a channel without ``noarch/repodata.json``."""
    (channel / "noarch").mkdir(parents=True, exist_ok=True)
    try:
        call_isolated("index_fs", channel=str(channel),
                      subdirs=sorted(set(subdirs)) if subdirs is not None else None, derived=derived)
    except IsolatedError as exc:  # a corrupt archive can panic inside Rust (field notes §5)
        raise UserError(f"indexing failed: {exc}", file=channel)


def records_for(packages: list[LocalPackage]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{subdir: {filename: record}}`` for the given files, as rattler's indexer writes them."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="deepep-env-stage-") as tmp:
        stage = Path(tmp)
        for p in packages:
            dest = stage / p.subdir / p.filename
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(p.path, dest)  # rattler's indexer skips symlinks; a hard link costs nothing
            except OSError:
                shutil.copyfile(p.path, dest)
        index_dir(stage, {p.subdir for p in packages}, derived=False)
        for sd in {p.subdir for p in packages}:
            data = read_json(stage / sd / "repodata.json", what="repodata", limit=MAX_REPODATA_BYTES, max_depth=None)
            merged = {**data.get("packages", {}), **data.get("packages.conda", {})}
            out[sd] = {}
            for p in packages:
                if p.subdir != sd:
                    continue
                rec = merged.get(p.filename)
                if rec is None:
                    raise UserError("rattler's indexer did not list the package (wrong subdir in "
                                    "info/index.json?)", file=p.path)
                if rec.get("sha256") != p.sha256_hex:
                    raise UserError("package changed while being published", file=p.path)
                out[sd][p.filename] = rec
    return out


def empty_repodata(subdir: str) -> dict[str, Any]:
    return {"info": {"subdir": subdir}, "packages": {}, "packages.conda": {}, "repodata_version": 1}


def listed(repodata: dict[str, Any] | None, filename: str) -> dict[str, Any] | None:
    if not repodata:
        return None
    section = "packages.conda" if filename.endswith(".conda") else "packages"
    rec = (repodata.get(section) or {}).get(filename)
    if rec is None:  # a v3 index or a misfiled entry: look everywhere
        for key in ("packages", "packages.conda"):
            rec = (repodata.get(key) or {}).get(filename)
            if rec is not None:
                break
    return rec


def merge(repodata: dict[str, Any] | None, subdir: str, records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    data = json.loads(json.dumps(repodata)) if repodata else empty_repodata(subdir)
    data.setdefault("info", {}).setdefault("subdir", subdir)
    data.setdefault("packages", {})
    data.setdefault("packages.conda", {})
    data.setdefault("repodata_version", 1)
    for filename, rec in records.items():
        section = "packages.conda" if filename.endswith(".conda") else "packages"
        data[section][filename] = rec
    return data


def dumps(repodata: dict[str, Any]) -> bytes:
    # Sorted and indented like conda-index output: diffs between two publishes stay readable.
    return (json.dumps(repodata, indent=1, sort_keys=True) + "\n").encode("utf-8")


def parse(body: bytes, where: str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError:
        raise UserError(f"the channel's repodata.json at {where} is not JSON; refusing to overwrite it")
    if not isinstance(data, dict):
        raise UserError(f"the channel's repodata.json at {where} is not a JSON object; refusing to overwrite it")
    return data
