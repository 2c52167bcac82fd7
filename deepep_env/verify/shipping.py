"""An environment's test records shipped with its packages: ``<channel>/verified/ENV/<record>.json``.

A teammate who pulls the channel sees what was verified and where (``deepep-env verified`` reads
the same files in a project). Only records that read as records (format checked, size bounded)
go out; a record already in the channel with the same bytes is left alone, one with other bytes
under the same name is refused like a package would be. A record's signed attestation
(``<record>.intoto.jsonl``, :mod:`deepep_env.verify.attest`) goes with it, under the same rules, so
``verified --channel URL --trust FILE`` checks the signatures there. The file target only, for now: other
targets say so in the report's notes.

Here, in the layer that owns records, not in ``publish/``: publishing packages sits between the
build and the lock and knows nothing of records; ``deepep-env publish`` ships both
(:func:`deepep_env.views.publishing.publish_env`).
"""
from __future__ import annotations

from pathlib import Path

from deepep_env.base import atomic
from deepep_env.base.errors import UserError
from deepep_env.base.project import Project, find_project
from deepep_env.base.readfile import read_bounded
from deepep_env.publish.model import PublishReport
from deepep_env.verify.attest import MAX_ENVELOPE_BYTES, envelope_path
from deepep_env.verify.records import MAX_RECORD_BYTES, load_records, safe_name

CHANNEL_DIR = "verified"


def ship_records_dir(channel: Path, env: str, project: Project, report: PublishReport) -> PublishReport:
    records, warnings = load_records(project, env)
    report.notes.extend(warnings)
    dest_dir = channel / CHANNEL_DIR / safe_name(env, 128)
    for r in records:
        _ship_file(r.path, dest_dir, read_bounded(r.path, MAX_RECORD_BYTES, accepted="a JSON test record"), report)
        env_file = envelope_path(r.path)
        if env_file.is_file() and not env_file.is_symlink():
            _ship_file(env_file, dest_dir, read_bounded(env_file, MAX_ENVELOPE_BYTES, accepted="a DSSE envelope"), report)
    return report


def _ship_file(src: Path, dest_dir: Path, data: bytes, report: PublishReport) -> None:
    """One record or attestation to ``dest_dir``: the same bytes again are left alone, other bytes refused."""
    dest = dest_dir / src.name
    key = f"{CHANNEL_DIR}/{dest_dir.name}/{src.name}"
    if dest.is_file() and not dest.is_symlink():
        if dest.read_bytes() == data:
            report.records.append({"file": key, "status": "already-present"})
            return
        raise UserError("a different test record is already published under this name", file=dest,
                        accepted="records are immutable: write a new one (`deepep-env task …`)")
    atomic.write_bytes(dest, data)
    report.records.append({"file": key, "status": "uploaded"})


def ship_records(kind: str, to_channel: "Path | None", env: "str | None", project_dir: "str | Path | None",
                 report: PublishReport) -> PublishReport:
    """The records of ``env`` to a ``file`` channel; a note for any other target."""
    if not env:
        return report
    try:
        project = find_project(project_dir)
    except UserError:
        return report
    if not load_records(project, env)[0]:
        return report
    if kind != "file" or to_channel is None:
        report.notes.append(f"test records (verified/{env}/) are shipped to file channels only; not sent to this {kind} target")
        return report
    return ship_records_dir(to_channel, env, project, report)
