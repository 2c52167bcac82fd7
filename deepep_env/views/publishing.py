"""``deepep-env publish ENV``: the env's packages to a channel (:mod:`deepep_env.publish`), then its
test records beside them (:mod:`deepep_env.verify.shipping`).

The two halves live in their own layers: publishing packages sits between the build and the lock
(docs/architecture.md), the records belong to ``verify/``; this view is where they meet.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from deepep_env.publish import PublishReport, channel_path, default_target, publish
from deepep_env.verify.shipping import ship_records


def publish_env(env: "str | None", to: "str | None", *, packages: Iterable["str | Path"] = (),
                state: "str | Path | None" = None, project: "str | Path | None" = None) -> PublishReport:
    """:func:`deepep_env.publish.publish`, then ``env``'s test records to a file channel
    (``verified/ENV/`` in the channel; a note for other targets)."""
    report = publish(env, to, packages=packages, state=state, project=project)   # None: the spec's publish_url
    to = to or default_target(env, project)
    return ship_records(report.kind, channel_path(to) if report.kind == "file" else None, env, project, report)
