"""Format stamps on what deepep-env writes, and the one refusal of a stamp it cannot read.

Every file or JSON document the tool writes says what it is and in which version, so a reader can
refuse, in one line naming the file, what it does not understand instead of half-reading it
(Spack's ``_meta``, conda-lock's versioned lockfiles). This module owns how a stamp is spelled,
read and checked; :class:`Format` is one stamp (a name and the version written), and the table at
the end lists every stamp the tool writes.

Conventions in the field. Files written by earlier versions stay readable, so :func:`read_stamp`
accepts both JSON conventions:

1. one key ``"format": "deepep-env/<name>/v<N>"`` (:attr:`Format.stamp`): the pixi.lock header
   comment (``# deepep-env-lock: {"envs":…,"format":"deepep-env/lock-meta/v2"}``), store entries,
   build manifests and reports, publish and fetch reports, lock diffs, the prefix marker
   (``conda-meta/deepep-env``), and (in words) the pixi.toml header comment;
2. ``"_meta": {"format": "deepep-env/<name>", "version": N}`` (:meth:`Format.meta`): doctor, overlay
   and host-facts JSON;
3. a bare integer ``format = N`` where the name is implied by the file: hand-written TOML (env
   specs, ``recipes/*/sources.toml``; their loaders check it with line numbers) and ``launch --json``;
4. ``"format": "deepep-env/<name>", "version": N`` as two top-level keys: host descriptions
   (``deepep_env/data/hosts/*.json`` and the test hosts built from them).

Decision (issue 19): no writer changes convention, because the bytes are contracts (the pixi.lock
header is committed and checked byte for byte by ``lock --check``; the JSON stamps are read by
scripts and tests). New formats use convention 1. Readers go through :meth:`Format.check` (refuse)
or :meth:`Format.accepts` (skip, e.g. a store entry written by another version is rebuilt).
Stdlib only: the activate fast path may read a stamp (the prefix marker).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from deepep_env.base.errors import UserError

if TYPE_CHECKING:
    from pathlib import Path

_STAMP = re.compile(r"(?P<name>.+)/v(?P<version>0|[1-9][0-9]{0,5})")   # fullmatch: no v01, no trailing newline


def read_stamp(data: Any) -> Optional[tuple[str, int]]:
    """``(name, version)`` of a JSON document in either convention, or None when it carries none."""
    if not isinstance(data, dict):
        return None
    meta = data.get("_meta")
    if isinstance(meta, dict) and isinstance(meta.get("format"), str):
        v = meta.get("version")
        return (meta["format"], v) if isinstance(v, int) and not isinstance(v, bool) else None
    fmt = data.get("format")
    m = _STAMP.fullmatch(fmt) if isinstance(fmt, str) else None
    if m:
        return m["name"], int(m["version"])
    v = data.get("version")  # convention 4
    return (fmt, v) if isinstance(fmt, str) and isinstance(v, int) and not isinstance(v, bool) else None


def _shown(data: Any) -> str:
    if not isinstance(data, dict):
        return "not a JSON object"
    raw = data["_meta"] if isinstance(data.get("_meta"), dict) else data.get("format")
    return "none" if raw is None else repr(raw)[:80]


@dataclass(frozen=True)
class Format:
    """One stamp: ``name`` (``deepep-env/<what>``), the ``version`` this deepep-env writes and the
    ``oldest`` it still reads; ``what`` names the document in messages."""

    name: str
    version: int
    what: str
    oldest: int = 1

    @property
    def stamp(self) -> str:
        """Convention 1: the value of the ``"format"`` key."""
        return self.stamp_of(self.version)

    def stamp_of(self, version: int) -> str:
        return f"{self.name}/v{version}"

    def meta(self) -> dict[str, Any]:
        """Convention 2: the value of the ``"_meta"`` key."""
        return {"format": self.name, "version": self.version}

    @property
    def readable(self) -> tuple[str, ...]:
        return tuple(self.stamp_of(v) for v in range(self.oldest, self.version + 1))

    def accepts(self, data: Any) -> bool:
        """Whether ``data`` carries a stamp of this format in a version this deepep-env reads."""
        found = read_stamp(data)
        return found is not None and found[0] == self.name and self.oldest <= found[1] <= self.version

    def check(self, data: Any, *, file: "str | Path | None", field: str = "format",
              missing: Optional[int] = None) -> int:
        """The version ``data`` is written in, or the one-line refusal naming ``file`` and ``field``:
        not this format (or no stamp), newer than this deepep-env, or older than it still reads.
        ``missing``: the version a document without any stamp is read as (files from before stamps)."""
        found = read_stamp(data)
        accepted = ", ".join(self.readable)
        if found is None and missing is not None and isinstance(data, dict) \
                and "format" not in data and "_meta" not in data:
            return missing
        if found is None or found[0] != self.name:
            raise UserError(f"not a {self.what} (format {_shown(data)})", file=file, field=field, accepted=accepted)
        version = found[1]
        if version > self.version:
            raise UserError(f"{self.what} format {self.stamp_of(version)} is newer than this deepep-env reads",
                            file=file, field=field, accepted=f"{accepted}, or upgrade deepep-env")
        if version < self.oldest:
            raise UserError(f"{self.what} format {self.stamp_of(version)} is no longer read", file=file,
                            field=field, accepted=f"{accepted} (write it again with this deepep-env)")
        return version


# --- every stamp the tool writes (each has one writer) ----------------------------------------------
LOCK_META = Format("deepep-env/lock-meta", 2, "deepep-env header")   # v1: one env per header
STORE_ENTRY = Format("deepep-env/store-entry", 1, "store entry")
BUILD_MANIFEST = Format("deepep-env/build-manifest", 1, "build manifest")  # builder writes, publish reads
BUILD_REPORT = Format("deepep-env/build-report", 1, "build report")
PUBLISH_REPORT = Format("deepep-env/publish-report", 1, "publish report")
FETCH_REPORT = Format("deepep-env/fetch-report", 1, "fetch report")
LOCK_DIFF = Format("deepep-env/lock-diff", 1, "lock diff")
PIXI_MANIFEST = Format("deepep-env/pixi", 1, "pixi.toml written by `deepep-env pixi sync`")
LAUNCH_PLAN = Format("deepep-env/launch", 1, "launch plan")   # convention 3: "format": 1 in launch --json
PREFIX_MARKER = Format("deepep-env/prefix", 1, "deepep-env install marker")   # conda-meta/deepep-env
DOCTOR_REPORT = Format("deepep-env/doctor", 1, "doctor report")   # convention 2: doctor --json
OVERLAY_DOC = Format("deepep-env/overlay", 1, "overlay")   # convention 2: overlay -f json
HOST_FACTS = Format("deepep-env/host-facts", 1, "host facts")   # convention 2: detect --json
HOST_DESCRIPTION = Format("deepep-env/host-description", 1, "host description")   # convention 4
BUILD_INPUTS = Format("deepep-env/build-inputs", 1, "build inputs record")   # lockfiles/build-inputs.json
TEST_RECORD = Format("deepep-env/test-record", 2, "test record")   # verified/ENV/*.json (v2: the activation it ran under)
FLEET_REPORT = Format("deepep-env/fleet-report", 1, "fleet report")   # fleet report --json
