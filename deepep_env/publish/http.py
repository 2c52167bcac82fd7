"""A small HTTP client for channel servers: one request per connection, no retries, no
redirects, every failure turned into one redacted line.

Why not requests/httpx: neither is a declared dependency, and the contract here is narrow —
stream a file body with a known length, never follow a redirect (an ``Authorization`` header
must not travel to another host), fail fast when the server is down (no retry loop), and map
each failure to a sentence that names the host and the fix, never the credential.
"""
from __future__ import annotations

import http.client
import os
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Mapping
from urllib.parse import urlsplit

from deepep_env.base import progress
from deepep_env.base.channels.auth import Credentials, redact
from deepep_env.base.channels.refusals import access_hint, server_hint, server_words
from deepep_env.base.errors import UserError

DEFAULT_TIMEOUT = 30.0


def timeout_s() -> float:
    raw = os.environ.get("DEEPEP_ENV_HTTP_TIMEOUT")
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise UserError(f"not a number: {raw!r}", field="DEEPEP_ENV_HTTP_TIMEOUT", accepted="seconds, e.g. 30")
    if value <= 0:
        raise UserError("must be positive", field="DEEPEP_ENV_HTTP_TIMEOUT", accepted="seconds, e.g. 30")
    return value


class PublishError(UserError):
    """A channel server refused or failed: one line, non-zero exit."""


@dataclass
class Response:
    status: int
    reason: str
    headers: Mapping[str, str]
    body: bytes


def _where(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or "?"
    try:
        port = parts.port
    except ValueError:
        port = None
    return f"{host}:{port}" if port else host


def _connection(url: str) -> tuple[http.client.HTTPConnection, str, float]:
    """An unopened connection to ``url``'s host, the request path (with its query), the timeout."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise PublishError(f"unsupported URL scheme in {redact(url)}")
    host = parts.hostname or ""
    try:
        port = parts.port
    except ValueError:
        raise PublishError(f"bad port in {redact(url)}")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    timeout = timeout_s()
    if parts.scheme == "https":
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            host, port, timeout=timeout, context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    return conn, path, timeout


def _failure(exc: BaseException, url: str, what: str, timeout: float) -> PublishError:
    """The one line for a request that failed below HTTP (checked in this order: subclasses first)."""
    if isinstance(exc, ConnectionRefusedError):
        return PublishError(f"cannot connect to {_where(url)} (connection refused): is the channel server running? ({what})")
    if isinstance(exc, socket.gaierror):
        return PublishError(f"cannot resolve host {urlsplit(url).hostname or ''!r} ({what})")
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return PublishError(f"no answer from {_where(url)} within {timeout:g} s ({what}); "
                            "set DEEPEP_ENV_HTTP_TIMEOUT to wait longer")
    if isinstance(exc, ssl.SSLError):
        return PublishError(f"TLS error talking to {_where(url)}: {redact(exc.reason or exc)} ({what})")
    if isinstance(exc, (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected,
                        http.client.IncompleteRead, ConnectionAbortedError)):
        return PublishError(f"connection to {_where(url)} dropped during {what} "
                            f"({type(exc).__name__}); nothing was indexed, publish again")
    if isinstance(exc, OSError):
        return PublishError(f"network error talking to {_where(url)}: {redact(exc.strerror or exc)} ({what})")
    # a garbled answer (http.client.HTTPException): not an HTTP server, or a proxy cut it
    return PublishError(f"{_where(url)} sent an invalid HTTP answer during {what} ({type(exc).__name__}); "
                        "nothing was indexed")


class _Counted:
    """A file body that reports the bytes http.client reads from it (base/progress.py)."""

    def __init__(self, fh: BinaryIO, label: str, size: int) -> None:
        self.fh, self.label, self.shown = fh, label, progress.current()
        self.shown.start(label, size)

    def read(self, n: int = -1) -> bytes:
        data = self.fh.read(n)
        if data:
            self.shown.advance(self.label, len(data))
        else:
            self.shown.finish(self.label)
        return data


def request(
    method: str,
    url: str,
    *,
    credentials: Credentials | None = None,
    body: bytes | Path | None = None,
    headers: Mapping[str, str] | None = None,
    what: str | None = None,
) -> Response:
    """Send one request. Connection-level failures raise :class:`PublishError`; HTTP statuses
    are returned to the caller, which knows what each means for its operation."""
    conn, path, timeout = _connection(url)
    hdrs = {"User-Agent": "deepep-env-publish", "Connection": "close"}
    if credentials is not None:
        hdrs.update(credentials.http_headers())
    hdrs.update(headers or {})
    what = what or f"{method} {redact(url)}"
    fh = None
    try:
        if isinstance(body, Path):
            fh = open(body, "rb")
            size = body.stat().st_size
            hdrs["Content-Length"] = str(size)
            conn.request(method, path, body=_Counted(fh, body.name, size), headers=hdrs)
        else:
            if body is not None:
                hdrs["Content-Length"] = str(len(body))
            conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        data = resp.read()
        return Response(resp.status, resp.reason, {k.lower(): v for k, v in resp.getheaders()}, data)
    except (OSError, http.client.HTTPException) as exc:
        raise _failure(exc, url, what, timeout)
    finally:
        if fh is not None:
            fh.close()
        conn.close()


def auth_failure(url: str, resp: Response, credentials: Credentials | None, what: str) -> PublishError:
    """The one line for a 401/403: which host, which credential source (never its value)."""
    where = _where(url)
    hint = access_hint(url, credentials)
    word = "rejected the credentials" if resp.status == 401 else "refused access"
    if credentials is None and resp.status == 401:
        word = "requires credentials"
    return PublishError(f"{where} {word} ({resp.status} {resp.reason}) for {what}: {hint}")


def unexpected(url: str, resp: Response, what: str) -> PublishError:
    words = server_words(resp.body)
    extra = f": {words}" if words else ""
    hint = f"; {server_hint(resp.status)}" if 500 <= resp.status < 600 else ""
    return PublishError(f"{_where(url)} answered {resp.status} {resp.reason} to {what}{extra}{hint}")
