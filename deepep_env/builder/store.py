"""The build store: one immutable entry per build id (Nix's /nix/store, keyed by inputs).

Layout::

    <store>/<10 hex of the id>-<package>/
        entry.json                     {"format": "deepep-env/store-entry/v1", "id", "package",
                                        "preimage", "outputs": [...], "seconds", "built_at"}
        <subdir>/<name>-<version>-<build>.conda   every output of the recipe

An entry is assembled in a temporary sibling and renamed into place (``atomic.staged_dir``): it
either exists complete or not at all, so a build killed midway leaves nothing a later lookup could
mistake for a result. An entry whose ``entry.json`` is unreadable or whose files are gone is treated
as absent (and rebuilt), never trusted.

Trust is checked, not assumed: :meth:`Store.lookup` hashes every output file and compares it with
the sha256 recorded when the entry was made. An entry whose files no longer match (a flipped byte,
a truncated copy) is *corrupt*: it is moved aside to ``<store>/.corrupt/`` (kept for inspection,
never used again) and reported as absent, so the builder rebuilds it and nothing corrupt reaches
the channel, a lock or a publish.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional, Sequence

from deepep_env.base.atomic import staged_dir, write_text
from deepep_env.formats.stamps import STORE_ENTRY
from deepep_env.base.hashing import file_sha256, short_id
from deepep_env.base.readfile import MAX_CONFIG_BYTES, read_regular


@dataclass(frozen=True)
class Output:
    """One package file of an entry. ``file`` is relative to the entry (and to a channel root)."""

    file: str          # "linux-64/foo-1.0-h0123456789_0.conda"
    name: str
    version: str
    build: str
    subdir: str
    sha256: str        # "sha256:<hex>"

    def to_json(self) -> dict[str, str]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class StoreEntry:
    path: Path
    id: str
    package: str
    preimage: dict[str, Any]
    outputs: tuple[Output, ...]
    seconds: float
    built_at: str

    def file(self, out: Output) -> Path:
        return self.path / out.file


def _entry_name(build_id: str, package: str) -> str:
    return f"{short_id(build_id, 10)}-{package}"


def _read_conda_meta(path: Path) -> tuple[str, str, str, str]:
    """(name, version, build, subdir) of a .conda/.tar.bz2, read from the file itself."""
    from rattler_build import Package

    pkg = Package.from_file(path)
    return pkg.name, pkg.version, pkg.build_string, pkg.subdir or "noarch"


@dataclass(frozen=True)
class Store:
    root: Path
    notes: list = field(default_factory=list, compare=False)   # what lookups found and fixed

    def entry_path(self, build_id: str, package: str) -> Path:
        return self.root / _entry_name(build_id, package)

    def lookup(self, build_id: str, package: str) -> Optional[StoreEntry]:
        path = self.entry_path(build_id, package)
        try:
            data = json.loads(read_regular(path / "entry.json", MAX_CONFIG_BYTES))
        except (OSError, ValueError):
            return None
        if not STORE_ENTRY.accepts(data) or data.get("id") != build_id:
            return None
        outs = tuple(Output(**o) for o in data.get("outputs", []))
        if not outs or not all((path / o.file).is_file() for o in outs):
            return None
        bad = [o.file for o in outs if file_sha256(path / o.file) != o.sha256]
        if bad:
            self.quarantine(path, f"sha256 of {bad[0]} is not the one recorded at build time")
            return None
        return StoreEntry(path, data["id"], data["package"], data.get("preimage") or {}, outs,
                          float(data.get("seconds", 0.0)), data.get("built_at", ""))

    def find(self, build_id: str) -> Optional[StoreEntry]:
        """The verified entry of ``build_id``, whichever package it is of (None: no such entry)."""
        prefix = _entry_name(build_id, "")
        for p in sorted(self.root.glob(f"{prefix}*")) if self.root.is_dir() else ():
            entry = self.lookup(build_id, p.name[len(prefix):])
            if entry is not None:
                return entry
        return None

    def quarantine(self, path: Path, why: str) -> Path:
        """Move a corrupt entry out of the way (atomically: a rename), with a note saying why."""
        dest_dir = self.root / ".corrupt"
        dest_dir.mkdir(parents=True, exist_ok=True)
        dest = dest_dir / f"{path.name}.{time.strftime('%Y%m%dT%H%M%S')}.{os.getpid()}"
        try:
            os.rename(path, dest)
        except OSError:
            return path  # another process moved it first
        self.notes.append(f"store entry {path.name} was corrupt ({why}); moved to {dest} and rebuilt")
        with contextlib.suppress(OSError):
            (dest / "CORRUPT.txt").write_text(why + "\n", encoding="utf-8")
        return dest

    def add(self, build_id: str, package: str, preimage: dict[str, Any], files: Sequence[Path],
            seconds: float) -> StoreEntry:
        """Move a finished build's package files in, atomically. Existing entries win (immutable)."""
        final = self.entry_path(build_id, package)
        existing = self.lookup(build_id, package)
        if existing is not None:
            return existing
        if final.exists():  # unreadable leftover (e.g. hand-edited): replace it, it was never valid
            shutil.rmtree(final)
        outputs = []
        with staged_dir(final) as tmp:
            for f in files:
                name, version, build, subdir = _read_conda_meta(f)
                rel = f"{subdir}/{f.name}"
                (tmp / subdir).mkdir(exist_ok=True)
                shutil.copy2(f, tmp / rel)
                outputs.append(Output(rel, name, version, build, subdir, file_sha256(tmp / rel)))
            outputs.sort(key=lambda o: o.file)
            entry = {
                "format": STORE_ENTRY.stamp, "id": build_id, "package": package, "preimage": preimage,
                "outputs": [o.to_json() for o in outputs], "seconds": round(seconds, 3),
                "built_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            write_text(tmp / "entry.json", json.dumps(entry, indent=2, sort_keys=True) + "\n")
        found = self.lookup(build_id, package)
        assert found is not None
        return found

    def entries(self, short: str = "") -> list[StoreEntry]:
        """Every verified entry, or those whose id starts with ``short`` (the hex a build string
        carries: ``h<10 hex>_0``)."""
        out: list[StoreEntry] = []
        if not self.root.is_dir():
            return out
        for p in sorted(self.root.glob(f"{short}*" if short else "*")):
            if p.name.startswith(".") or not (p / "entry.json").is_file():
                continue
            try:
                data = json.loads(read_regular(p / "entry.json", MAX_CONFIG_BYTES))
                e = self.lookup(data["id"], data["package"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if e is not None:
                out.append(e)
        return out

    def clean_partials_of(self, build_id: str, package: str) -> list[Path]:
        """Remove what a killed ``add`` of this id left. Only a caller holding the id's build lock may
        call this: then no other process can be writing that partial right now."""
        removed: list[Path] = []
        for p in self.root.glob(f".{_entry_name(build_id, package)}.*.partial") if self.root.is_dir() else ():
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
        return removed

    def clean_partials(self, older_than_s: float = 3600.0) -> list[Path]:
        """Remove temporary entries left by killed builds (``.<name>.*.partial``). Only old ones: a
        young one may belong to a build running right now in another process."""
        removed: list[Path] = []
        if not self.root.is_dir():
            return removed
        now = time.time()
        for p in self.root.glob(".*.partial"):
            try:
                if now - p.stat().st_mtime > older_than_s:
                    shutil.rmtree(p, ignore_errors=True)
                    removed.append(p)
            except OSError:
                continue
        return removed
