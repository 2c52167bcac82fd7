"""Publish built packages to a team's conda channel and leave it indexed.

``publish(env, to)`` takes the packages the builder recorded for ``env`` (or explicit files) to
one of these targets:

================================  ============  ==========================================
``--to``                          kind          index
================================  ============  ==========================================
``file:///dir`` or ``/dir``       file          ``rattler.index.index_fs`` in place
``http(s)://host/path``           webdav        merged ``repodata.json`` PUT last
``artifactory+https://host/…``    artifactory   server-side (packages PUT only)
``s3://bucket/prefix``            s3            ``rattler.index.index_s3``
``quetz+http(s)://host/CHANNEL``  quetz         server-side
``prefix://CHANNEL``              prefix        server-side
================================  ============  ==========================================

Rules shared by all targets (``deepep_env.publish.common``): idempotent (same file again →
``already-present``, nothing sent); a different file under a published name is refused before
anything is uploaded; the index never lists a package that is not fully there. Credentials come
from ``deepep_env.base.channels.auth`` and never appear in the report, an error or a log line.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Iterable

from deepep_env.base.channels.auth import check_url_has_no_secret, credentials_for, redact
from deepep_env.base.channels.urls import placeholder_host
from deepep_env.base.errors import UserError
from deepep_env.base.project import find_project
from deepep_env.envspec.load import load_spec_file
from deepep_env.publish.common import ConflictError
from deepep_env.publish.http import PublishError
from deepep_env.publish.inputs import collect, inspect_package, read_manifest
from deepep_env.publish.local import channel_path, publish_dir
from deepep_env.publish.model import ALREADY_PRESENT, UPLOADED, LocalPackage, PackageOutcome, PublishReport
from deepep_env.publish.s3 import publish_s3
from deepep_env.publish.servers import parse_server_url, publish_server
from deepep_env.publish.webdav import publish_http

__all__ = [
    "ALREADY_PRESENT",
    "UPLOADED",
    "ConflictError",
    "LocalPackage",
    "PackageOutcome",
    "PublishError",
    "PublishReport",
    "channel_path",
    "consumer_url",
    "default_target",
    "inspect_package",
    "publish",
    "read_manifest",
    "target_kind",
]

log = logging.getLogger("deepep_env.publish")

KINDS = ("file", "webdav", "artifactory", "s3", "quetz", "prefix")


def target_kind(to: str) -> str:
    scheme = to.split("://", 1)[0].lower() if "://" in to else ""
    if not scheme or scheme == "file":
        return "file"
    if scheme in ("http", "https"):
        return "webdav"
    if scheme in ("artifactory+http", "artifactory+https"):
        return "artifactory"
    if scheme == "s3":
        return "s3"
    if scheme.startswith("quetz+"):
        return "quetz"
    if scheme == "prefix" or scheme.startswith("prefix+"):
        return "prefix"
    raise UserError(f"unsupported channel URL scheme {scheme!r}", field="--to",
                    accepted="file:///dir, https://host/channel (WebDAV/PUT), artifactory+https://…, "
                    "s3://bucket/prefix, quetz+https://host/CHANNEL, prefix://CHANNEL")


def consumer_url(to: str, kind: str) -> str:
    """The URL a spec or pixi.toml names to read what was published."""
    if kind == "file":
        return channel_path(to).as_uri()
    if kind == "artifactory":
        return to.split("+", 1)[1]
    if kind in ("quetz", "prefix"):
        return parse_server_url(to).read_url
    return to.rstrip("/")


def default_target(env: str | None, project: str | Path | None = None) -> str:
    """The spec's ``publish_url``: where ``deepep-env publish ENV`` goes without ``--to``."""
    if not env:
        raise UserError("no target channel", field="--to", accepted="a channel URL or directory")
    proj = find_project(project)
    spec = load_spec_file(proj.spec_path(env))
    if not spec.publish_url:
        raise UserError("no --to given and the spec has no publish_url", file=proj.spec_path(env),
                        field="publish_url", accepted="publish_url = \"https://conda.team.example/ENV\", or --to URL")
    return spec.publish_url


def refuse_placeholder(to: str, kind: str, env: str | None, *, given: bool) -> None:
    """A target on a reserved example host (the specs' ``publish_url`` until a team sets its own) is
    refused before any network attempt: it never resolves, so a DNS lookup would only spend the
    resolver's timeout (issue 56)."""
    host = placeholder_host(consumer_url(to, kind)) if kind != "file" else None
    if host is None:
        return
    name = env or "ENV"
    raise UserError(f"{redact(to)} is a placeholder ({host} is a reserved example name: nothing is "
                    "published there, no network attempt made); nothing uploaded",
                    field="--to" if given else "publish_url",
                    accepted=f"`deepep-env publish {name} --to URL` (a team channel, or file:///DIR to try it "
                             f"offline), or set publish_url in env_specs/{name}.toml")


def publish(
    env: str | None,
    to: str | None,
    *,
    packages: Iterable[str | Path] = (),
    state: str | Path | None = None,
    project: str | Path | None = None,
) -> PublishReport:
    """Upload ``env``'s built packages (or ``packages``) to ``to`` (default: the spec's
    ``publish_url``) and leave the channel indexed."""
    given = bool(to)
    if not to:
        to = default_target(env, project)
    check_url_has_no_secret(to, field="--to")
    kind = target_kind(to)
    refuse_placeholder(to, kind, env, given=given)
    pkgs = collect(env, packages, state, project)
    report = PublishReport(env=env, target=redact(to), kind=kind, channel_url=redact(consumer_url(to, kind)))
    log.info("publishing %d package(s) to %s (%s)", len(pkgs), to, kind)
    if kind == "file":
        report = publish_dir(channel_path(to), pkgs, report)
    elif kind in ("webdav", "artifactory"):
        base = consumer_url(to, kind)
        creds = credentials_for(base, [base])
        report = publish_http(base, pkgs, creds, report, write_index=(kind == "webdav"))
    elif kind == "s3":
        report = publish_s3(to, pkgs, report)
    else:
        report = publish_server(to, pkgs, report)
    return report   # the env's test records follow in deepep_env.views.publishing (verify/ owns them)
