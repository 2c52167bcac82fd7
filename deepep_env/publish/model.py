"""Plain data of a publish run: the packages going out and what happened to each.

A report is data (the rattler-build/pixi habit); the CLI renders it as lines or JSON. Nothing in
it may carry a credential: :meth:`PublishReport.to_json` passes every string through ``redact``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepep_env.base.channels.auth import redact, redact_data
from deepep_env.base.safetext import terminal
from deepep_env.formats.stamps import PUBLISH_REPORT

UPLOADED = "uploaded"
ALREADY_PRESENT = "already-present"


@dataclass(frozen=True)
class LocalPackage:
    """A built package file about to be published."""

    path: Path
    subdir: str
    name: str
    version: str
    build: str
    sha256: str  # "sha256:<hex>" (deepep_env.base.hashing form)
    size: int
    build_id: str | None = None

    @property
    def filename(self) -> str:
        return self.path.name

    @property
    def key(self) -> str:
        """``<subdir>/<filename>``: where it lives in a channel."""
        return f"{self.subdir}/{self.filename}"

    @property
    def sha256_hex(self) -> str:
        return self.sha256.split(":", 1)[1]


@dataclass(frozen=True)
class PackageOutcome:
    key: str
    status: str  # UPLOADED | ALREADY_PRESENT
    sha256: str
    size: int
    build_id: str | None = None


@dataclass
class PublishReport:
    env: str | None
    target: str  # the target URL as the user gave it, redacted
    kind: str  # file | webdav | artifactory | s3 | quetz | prefix
    channel_url: str  # the URL consumers put in pixi.toml / env specs
    packages: list[PackageOutcome] = field(default_factory=list)
    indexed: list[str] = field(default_factory=list)  # subdirs whose index was rewritten
    removed_stale: list[str] = field(default_factory=list)  # derived index files deleted
    notes: list[str] = field(default_factory=list)
    records: list[dict[str, str]] = field(default_factory=list)  # test records shipped: {file, status}

    @property
    def changed(self) -> bool:
        return (any(p.status == UPLOADED for p in self.packages) or bool(self.indexed)
                or any(r["status"] == UPLOADED for r in self.records))

    def to_json(self) -> dict[str, Any]:
        return redact_data({
            "format": PUBLISH_REPORT.stamp,
            "env": self.env,
            "target": self.target,
            "kind": self.kind,
            "channel_url": self.channel_url,
            "changed": self.changed,
            "packages": [
                {"file": p.key, "status": p.status, "sha256": p.sha256, "size": p.size,
                 **({"build_id": p.build_id} if p.build_id else {})}
                for p in self.packages
            ],
            "indexed": list(self.indexed),
            "records": [dict(r) for r in self.records],
            "removed_stale_index_files": list(self.removed_stale),
            "notes": list(self.notes),
        })

    def lines(self) -> list[str]:
        out = []
        for p in self.packages:
            word = "uploaded" if p.status == UPLOADED else "already present"
            out.append(f"{word:16} {p.key}")
        if self.indexed:
            out.append(f"indexed          {', '.join(self.indexed)}")
        elif self.packages:
            out.append("index unchanged")
        for r in self.records:
            word = "uploaded" if r["status"] == UPLOADED else "already present"
            out.append(f"{word:16} {terminal(r['file'])}")
        for path in self.removed_stale:
            out.append(f"removed stale    {path}")
        for note in self.notes:   # a skipped record's line names a file anyone could have named
            out.append(f"note             {terminal(note)}")
        out.append(f"channel          {self.channel_url}")
        return [redact(line) for line in out]
