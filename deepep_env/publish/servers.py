"""Channel servers that index uploads themselves: quetz and prefix.dev.

Uploads go through py-rattler-build's own clients (``upload_package_to_quetz``,
``upload_package_to_prefix``) so the wire protocol stays rattler-build's. Those calls hold the
interpreter until they return (tests therefore run servers as subprocesses). Before uploading,
the channel's ``repodata.json`` is read so that the same rule holds as everywhere: same file →
already present; different file under a published name → refused, never forced.

- ``quetz+http(s)://HOST[:PORT][/BASE]/CHANNEL`` → server ``http(s)://HOST[:PORT][/BASE]``;
  consumers read ``…/get/CHANNEL``. The API key is ``DEEPEP_ENV_CHANNEL_TOKEN`` or a
  ``CondaToken``/``BearerToken`` entry for the host in rattler's storage (quetz accepts it as
  ``X-API-Key`` and as a ``/t/<key>/`` URL prefix).
- ``prefix://CHANNEL`` (prefix.dev) or ``prefix+https://HOST/CHANNEL`` (self-hosted); consumers
  read ``https://repo.prefix.dev/CHANNEL``. The API key is ``DEEPEP_ENV_CHANNEL_TOKEN`` or a
  ``BearerToken`` for ``prefix.dev`` in rattler's storage.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from deepep_env.base.channels.auth import Credentials, credentials_for, redact, register_secret
from deepep_env.base.errors import UserError
from deepep_env.publish.common import classify, uploaded
from deepep_env.publish.http import PublishError, auth_failure, request, unexpected
from deepep_env.publish.isolated import IsolatedError
from deepep_env.publish.isolated import call as call_isolated
from deepep_env.publish.model import LocalPackage, PublishReport
from deepep_env.publish.repodata import listed, parse


@dataclass(frozen=True)
class ServerChannel:
    kind: str  # "quetz" | "prefix"
    server: str  # API base URL
    channel: str
    read_url: str  # where consumers (and our pre-check) read the channel

    def repodata_url(self, subdir: str) -> str:
        return f"{self.read_url}/{subdir}/repodata.json"


def parse_server_url(url: str) -> ServerChannel:
    scheme, _, rest = url.partition("://")
    if scheme == "prefix":
        channel = rest.strip("/")
        if not channel or "/" in channel:
            raise UserError(f"bad prefix.dev target {url!r}", field="--to", accepted="prefix://CHANNEL")
        return ServerChannel("prefix", "https://prefix.dev", channel, f"https://repo.prefix.dev/{channel}")
    kind, _, http_scheme = scheme.partition("+")
    if kind not in ("quetz", "prefix") or http_scheme not in ("http", "https"):
        raise UserError(f"unknown target scheme {scheme!r}", field="--to",
                        accepted="quetz+https://HOST/CHANNEL, prefix://CHANNEL, prefix+https://HOST/CHANNEL")
    parts = urlsplit(f"{http_scheme}://{rest}")
    path = parts.path.strip("/")
    if not path:
        raise UserError(f"no channel name in {url!r}", field="--to", accepted=f"{scheme}://HOST/CHANNEL")
    base, _, channel = path.rpartition("/")
    server = f"{http_scheme}://{parts.netloc}" + (f"/{base}" if base else "")
    if kind == "quetz":
        return ServerChannel("quetz", server, channel, f"{server}/get/{channel}")
    return ServerChannel("prefix", server, channel, f"{server}/{channel}")


def _api_key(target: ServerChannel) -> tuple[str | None, Credentials | None]:
    # The upload API and the read host can differ (prefix.dev vs repo.prefix.dev): try both.
    cred = credentials_for(target.server, [target.server]) or credentials_for(target.read_url, [target.server])
    if cred is None:
        return None, None
    if cred.kind not in ("bearer", "conda-token"):
        raise UserError(f"{target.kind} needs an API key, but the credential for "
                        f"{urlsplit(target.server).hostname} from {cred.source} is {cred.kind}",
                        accepted='DEEPEP_ENV_CHANNEL_TOKEN, or {"BearerToken": …} / {"CondaToken": …} '
                        "in RATTLER_AUTH_FILE")
    register_secret(cred.secret)
    return cred.secret, cred


def _read_headers(target: ServerChannel, key: str | None) -> dict[str, str]:
    if not key:
        return {}
    return {"X-API-Key": key} if target.kind == "quetz" else {"Authorization": f"Bearer {key}"}


def _fetch(target: ServerChannel, subdir: str, key: str | None, cred: Credentials | None) -> dict[str, Any] | None:
    url = target.repodata_url(subdir)
    what = f"reading {subdir}/repodata.json"
    resp = request("GET", url, headers=_read_headers(target, key), what=what)
    if resp.status == 404:
        return None
    if resp.status in (401, 403):
        raise auth_failure(url, resp, cred, what)
    if resp.status != 200:
        raise unexpected(url, resp, what)
    return parse(resp.body, redact(url))


def _upload_error(target: ServerChannel, exc: BaseException, cred: Credentials | None) -> PublishError:
    text = " ".join(str(exc).split()) or type(exc).__name__
    low = text.lower()
    where = urlsplit(target.server).netloc
    if "401" in low or "403" in low or "unauthorized" in low or "forbidden" in low:
        source = f"the credential from {cred.source}" if cred else "no API key was found"
        return PublishError(f"{target.kind} at {where} refused the upload (unauthorized): {source}")
    if "connect" in low or "connection refused" in low or "dns" in low:
        return PublishError(f"cannot reach {target.kind} at {where}: {redact(text)[:300]}")
    return PublishError(f"{target.kind} upload to {where} failed: {redact(text)[:300]}")


def publish_server(url: str, packages: list[LocalPackage], report: PublishReport) -> PublishReport:
    target = parse_server_url(url)
    key, cred = _api_key(target)
    indexes = {sd: _fetch(target, sd, key, cred) for sd in {p.subdir for p in packages}}
    todo, present = classify(packages, lambda p: listed(indexes[p.subdir], p.filename),
                             redact(target.read_url))
    if todo:
        files = [str(p.path) for p in todo]
        try:
            call_isolated(f"upload_{target.kind}", files=files, server=target.server,
                          channel=target.channel, api_key=key)
        except IsolatedError as exc:
            raise _upload_error(target, exc, cred) from None
    report.packages = sorted(present + uploaded(todo), key=lambda o: o.key)
    report.indexed = sorted({p.subdir for p in todo})
    if todo:
        report.notes.append(f"{target.kind} indexes uploads itself")
    return report
