"""The rule every target shares: the channel's index is the truth.

- listed with the same sha256 → ``already-present`` (nothing is sent);
- listed with another sha256 → refused, before anything is uploaded (all-or-nothing check);
- not listed → uploaded (a file lying there unlisted was never published — e.g. a previous run
  that died before writing the index — and is replaced).
"""
from __future__ import annotations

from typing import Any, Callable

from deepep_env.base.errors import UserError
from deepep_env.publish.model import ALREADY_PRESENT, UPLOADED, LocalPackage, PackageOutcome


class ConflictError(UserError):
    """A different file is already published under the same name."""


def outcome(p: LocalPackage, status: str) -> PackageOutcome:
    return PackageOutcome(key=p.key, status=status, sha256=p.sha256, size=p.size, build_id=p.build_id)


def classify(
    packages: list[LocalPackage],
    lookup: Callable[[LocalPackage], dict[str, Any] | None],
    where: str,
) -> tuple[list[LocalPackage], list[PackageOutcome]]:
    """Split into (to upload, already present); raise :class:`ConflictError` on any clash."""
    todo: list[LocalPackage] = []
    present: list[PackageOutcome] = []
    conflicts: list[str] = []
    for p in packages:
        rec = lookup(p)
        if rec is None:
            todo.append(p)
            continue
        remote_sha = str(rec.get("sha256") or "")
        if remote_sha == p.sha256_hex:
            present.append(outcome(p, ALREADY_PRESENT))
        else:
            shown = remote_sha[:12] if remote_sha else "unknown"
            conflicts.append(f"{p.key} (channel has sha256 {shown}…, local {p.sha256_hex[:12]}…)")
    if conflicts:
        raise ConflictError(
            f"refusing to overwrite {len(conflicts)} package(s) already published at {where} with "
            f"different content: {'; '.join(conflicts)}",
            accepted="bump the build number (or version) so the new build gets a new file name; "
            "published files are never replaced",
        )
    return todo, present


def uploaded(packages: list[LocalPackage]) -> list[PackageOutcome]:
    return [outcome(p, UPLOADED) for p in packages]
