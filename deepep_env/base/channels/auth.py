"""Credentials for private conda channels, read the way rattler reads them, and never printed.

Where credentials come from (first match wins), for a channel URL ``scheme://host[:port]/path``:

1. The environment, for hosts in scope (see below):
   ``DEEPEP_ENV_CHANNEL_TOKEN`` → ``Authorization: Bearer <token>`` (prefix.dev, Artifactory access
   tokens, an nginx with ``auth_request``) and ``X-API-Key: <token>`` (quetz's API key header), or
   ``DEEPEP_ENV_CHANNEL_USER`` + ``DEEPEP_ENV_CHANNEL_PASSWORD`` → HTTP basic auth.
   Scope: the hosts listed in ``DEEPEP_ENV_CHANNEL_HOSTS`` (comma-separated ``host`` or
   ``host:port``); when that is unset, the hosts of the channels the caller names (the publish
   target; the private channels of a spec), except well-known public hosts (:data:`PUBLIC_HOSTS`),
   so that a token meant for the team's channel is never sent to conda-forge.
2. rattler's authentication storage, in rattler's own order (rattler_networking
   ``AuthenticationStorage::from_env_and_defaults``): the JSON file named by ``RATTLER_AUTH_FILE``;
   the OS keyring (service ``rattler``, account = host, secret = the JSON of one entry); the file
   ``~/.rattler/credentials.json``; ``~/.netrc`` (or ``$NETRC``). Entries are keyed by the bare
   host — **without the port** (checked against py-rattler 0.28: an entry under
   ``"127.0.0.1:8080"`` is ignored, one under ``"127.0.0.1"`` is used) — then by wildcards
   ``*.example.com``; ``s3://bucket/prefix`` URLs are also looked up by URL and each parent path.
   Entry shapes: ``{"BearerToken": "…"}``, ``{"BasicHTTP": {"username": "…", "password": "…"}}``,
   ``{"CondaToken": "…"}`` (sent as ``/t/<token>/`` in the URL path, quetz/anaconda style),
   ``{"S3Credentials": {"access_key_id": "…", "secret_access_key": "…", "session_token": null}}``.

A spec or ``pixi.toml`` names only the channel URL, never a credential. Whether a URL carries one
is decided in one place, :func:`url_secret` (``user:password@`` or any userinfo, a query parameter
named like a credential such as ``?token=``/``?access_token=``/``X-Amz-Signature``, an
anaconda.org/quetz ``/t/<token>/`` segment); the spec model, the lock's channels and
``publish --to`` all refuse such a URL through it (:func:`check_url_has_no_secret` here).

What py-rattler 0.28 offers (``rattler.networking``), and what this module uses:

- ``Client(middlewares, headers, user_agent, timeout)``; ``Client.default_client(max_retries)``
  = Retry + Authentication + OCI + GCS + S3 middlewares; ``Client.authenticated_client()`` is the
  same thing kept for backwards compatibility; ``Client.from_config(rattler.Config)`` adds
  proxies, TLS settings, mirrors and ``authentication-override-file``.
- ``AuthenticationMiddleware()`` reads the storage of (2) by itself (Rust side); it cannot be
  given credentials from Python.
- ``AddHeadersMiddleware(callback)``: ``callback(host, path) -> dict | None`` runs for every
  request; ``host`` comes **without the port**. Used here to send the environment credentials of
  (1). Order matters: it runs after ``AuthenticationMiddleware`` so that an explicit environment
  credential overrides a stored one for the same host.
- ``RetryMiddleware(max_retries)``: exponential back-off on transient errors. Kept low by
  default (1) so that a channel server that is down fails in seconds, not minutes.
- ``S3Middleware({bucket: S3Config(endpoint_url, region, addressing_style)})`` for ``s3://``
  channels on a custom endpoint (MinIO, moto, Ceph); credentials then come from the storage.

Secrets never reach a lockfile, a log line, an error message or ``--json`` output: every such
path goes through :func:`redact`, which removes every credential this module can see (the
environment variables, every entry of the auth files, values looked up in the keyring during
this process, their ``Basic`` encodings) and URL-embedded secrets (``user:pass@``, ``/t/<tok>/``,
the values of credential-like query parameters).
"""
from __future__ import annotations

import base64
import json
import logging
import netrc
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Literal, Mapping, TypedDict
from urllib.parse import urlsplit

from deepep_env.base.errors import UserError
from deepep_env.base.readfile import MAX_CONFIG_BYTES, read_regular

if TYPE_CHECKING:  # annotations only: rattler loads on first use
    from rattler.networking import Client

ENV_TOKEN = "DEEPEP_ENV_CHANNEL_TOKEN"
ENV_USER = "DEEPEP_ENV_CHANNEL_USER"
ENV_PASSWORD = "DEEPEP_ENV_CHANNEL_PASSWORD"
ENV_HOSTS = "DEEPEP_ENV_CHANNEL_HOSTS"
ENV_S3_ENDPOINT = "DEEPEP_ENV_S3_ENDPOINT_URL"
ENV_S3_REGION = "DEEPEP_ENV_S3_REGION"
ENV_S3_ADDRESSING = "DEEPEP_ENV_S3_ADDRESSING_STYLE"

# Environment variables whose *values* are secrets wherever they appear.
SECRET_ENV_VARS = (
    ENV_TOKEN,
    ENV_PASSWORD,
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "PREFIX_API_KEY",
    "QUETZ_API_KEY",
    "ARTIFACTORY_TOKEN",
    "ANACONDA_API_KEY",
)

# Hosts that serve public channels: environment credentials are never sent there unless the user
# names them explicitly in DEEPEP_ENV_CHANNEL_HOSTS. repo.prefix.dev is deliberately absent: it
# serves private channels too (and its token is the one a team would set).
PUBLIC_HOSTS = frozenset({
    "conda.anaconda.org",
    "anaconda.org",
    "repo.anaconda.com",
    "conda-static.anaconda.org",
    "conda-web.anaconda.org",
})

REDACTED = "***"
MIN_SECRET_LEN = 4
KEYRING_SERVICE = "rattler"

_registered: set[str] = set()
_lock = threading.Lock()


@dataclass(frozen=True)
class Credentials:
    """One credential, with where it came from. ``repr`` never shows the secret."""

    kind: str  # "bearer" | "basic" | "conda-token" | "s3"
    source: str  # e.g. "env DEEPEP_ENV_CHANNEL_TOKEN", "RATTLER_AUTH_FILE", "keyring"
    secret: str  # token, password, or S3 secret access key
    username: str | None = None  # basic auth user, or S3 access key id
    session_token: str | None = None  # S3 only

    def __repr__(self) -> str:
        return f"Credentials(kind={self.kind!r}, source={self.source!r})"

    __str__ = __repr__

    def http_headers(self) -> dict[str, str]:
        """Headers to send for an HTTP request (conda tokens travel in the URL, S3 is signed)."""
        if self.kind == "bearer":
            # X-API-Key too: quetz reads API keys only from that header (or a /t/<key>/ prefix),
            # and a token is only ever sent to hosts in scope, so the duplicate costs nothing.
            return {"Authorization": f"Bearer {self.secret}", "X-API-Key": self.secret}
        if self.kind == "basic":
            raw = f"{self.username or ''}:{self.secret}".encode()
            return {"Authorization": "Basic " + base64.b64encode(raw).decode()}
        return {}

    def secrets(self) -> list[str]:
        out = [self.secret]
        if self.session_token:
            out.append(self.session_token)
        if self.kind == "basic":
            out.append(base64.b64encode(f"{self.username or ''}:{self.secret}".encode()).decode())
        return [s for s in out if s]


# ---------------------------------------------------------------------------------------------
# Redaction


def register_secret(value: str | None) -> None:
    """Remember a secret learnt at run time (e.g. from the keyring) so :func:`redact` scrubs it."""
    if value:
        with _lock:
            _registered.add(value)


def _auth_file_secrets(path: Path) -> list[str]:
    try:
        data = json.loads(read_regular(path, MAX_CONFIG_BYTES))
    except (OSError, ValueError):
        return []
    out: list[str] = []
    if isinstance(data, Mapping):
        for entry in data.values():
            cred = _from_rattler_entry(entry, "file")
            if cred is not None:
                out.extend(cred.secrets())
    return out


def known_secrets() -> list[str]:
    """Every secret this process can see, longest first (so a secret containing another is
    scrubbed whole)."""
    found: set[str] = set()
    for var in SECRET_ENV_VARS:
        val = os.environ.get(var)
        if val:
            found.add(val)
    user, password = os.environ.get(ENV_USER), os.environ.get(ENV_PASSWORD)
    if password:
        found.add(base64.b64encode(f"{user or ''}:{password}".encode()).decode())
    for path in _auth_file_paths():
        found.update(_auth_file_secrets(path))
    with _lock:
        found.update(_registered)
    # Values shorter than MIN_SECRET_LEN would turn every message into asterisks (a password "x"
    # scrubs every x) while protecting nothing a guess would not find.
    return sorted((s for s in found if len(s.strip()) >= MIN_SECRET_LEN), key=len, reverse=True)


_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/@\s:]*):(?P<pw>[^/@\s]*)@")
# A token sent as the user name (https://TOKEN@host/…): no colon, the whole userinfo is the secret.
_URL_USER_TOKEN = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s:]+@")
_CONDA_TOKEN = re.compile(r"/t/[^/\s]+(?=/|\s|$)")
# anaconda.org/quetz put a token in the path: <channel host>/t/<token>/<channel>. In a URL's path,
# a segment "t" followed by another one is read as that (also at the end: ".../t/<token>").
_CONDA_TOKEN_PATH = re.compile(r"(^|/)t/[^/]+(/|$)")
# Query parameters whose value is a credential: any word of the name (split at - _ .) is one of
# these: ?token=, ?access_token=, ?api_key=, ?apikey=, ?password=, S3 presigned X-Amz-Credential /
# X-Amz-Signature / X-Amz-Security-Token, Azure SAS ?sig=, ?session_id=.
_SECRET_PARAM_WORDS = frozenset({"token", "key", "apikey", "secret", "password", "passwd", "pwd", "pw", "pass", "auth",
                                 "sig", "signature", "credential", "credentials", "session", "sessionid", "jwt"})
# Parameters in a query, in the fragment (OAuth's #access_token=…) and in a path (…;token=…/).
_QUERY_PARAM = re.compile(r"(?P<pre>[?&;#](?P<name>[^=&;#?\s]+)=)(?P<value>[^&;#\s]*)")
# Schemes whose paths are local folders or buckets: no anaconda.org/quetz token lives there.
_NO_CONDA_TOKEN_SCHEMES = ("file", "s3")
_AUTH_HEADER = re.compile(r"(?i)(authorization:\s*(?:bearer|basic|token)\s+)\S+")
_API_KEY_HEADER = re.compile(r"(?i)(x-api-key:\s*)\S+")


def redact(text: Any) -> str:
    """``text`` with every configured secret replaced by ``***``; also URL userinfo passwords,
    ``/t/<token>/`` path segments and Authorization/X-API-Key header values. Every message that
    can reach a user (errors, logs, JSON output) is passed through this."""
    out = str(text)
    for secret in known_secrets():
        if secret in out:
            out = out.replace(secret, REDACTED)
    out = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", out)
    out = _URL_USER_TOKEN.sub(lambda m: f"{m['scheme']}{REDACTED}@", out)
    out = _CONDA_TOKEN.sub(f"/t/{REDACTED}", out)
    out = _QUERY_PARAM.sub(lambda m: m["pre"] + REDACTED if _secret_param(m["name"]) and m["value"] else m[0], out)
    out = _AUTH_HEADER.sub(lambda m: m.group(1) + REDACTED, out)
    out = _API_KEY_HEADER.sub(lambda m: m.group(1) + REDACTED, out)
    return out


def redact_data(obj: Any) -> Any:
    """:func:`redact` applied to every string in a JSON-like structure (for ``--json`` output)."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, Mapping):
        return {redact(k) if isinstance(k, str) else k: redact_data(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_data(v) for v in obj]
    return obj


class RedactingFilter(logging.Filter):
    """A logging filter that scrubs secrets from a record's final message."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string must not kill logging
            message = str(record.msg)
        record.msg = redact(message)
        record.args = None
        return True


def install_log_redaction(logger: logging.Logger | None = None) -> None:
    """Scrub secrets from every log record of this process, idempotently.

    A record factory is used rather than handler filters: a filter on a logger does not see
    records propagated from its children, and handlers added later would have none. ``logger``
    (optional) additionally gets :class:`RedactingFilter` on itself and its current handlers.
    """
    current = logging.getLogRecordFactory()
    if not getattr(current, "_deepep_env_redacting", False):
        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = current(*args, **kwargs)
            try:
                message = record.getMessage()
            except Exception:
                message = str(record.msg)
            record.msg, record.args = redact(message), None
            return record

        factory._deepep_env_redacting = True  # type: ignore[attr-defined]
        logging.setLogRecordFactory(factory)
    if logger is not None:
        for target in [logger, *logger.handlers]:
            if not any(isinstance(f, RedactingFilter) for f in target.filters):
                target.addFilter(RedactingFilter())


def _secret_param(name: str) -> bool:
    return any(w in _SECRET_PARAM_WORDS for w in re.split(r"[-_.]", name.lower()))


@dataclass(frozen=True)
class UrlSecret:
    """The kind of secret a URL carries, in words a one-line error can use."""

    kind: str      # "userinfo" | "query" | "conda-token"
    carries: str   # what the URL carries, e.g. "credentials (user:token@)"
    instead: str   # where that secret goes instead


_URL_SECRETS = {
    "userinfo": UrlSecret("userinfo", "credentials (user:token@)",
                          f"a bare URL, with the secret in {ENV_TOKEN} or {ENV_USER}/{ENV_PASSWORD}, "
                          "or in RATTLER_AUTH_FILE / the keyring"),
    "query": UrlSecret("query", "a credential as a query parameter (token, api_key, signature, …)",
                       f"a bare URL, with the token in {ENV_TOKEN} or RATTLER_AUTH_FILE / the keyring"),
    "conda-token": UrlSecret("conda-token", "a token path segment (anaconda.org's t/<token>)",
                             'the bare channel URL, with {"CondaToken": "…"} for its host in RATTLER_AUTH_FILE'),
}


def url_secret(url: str) -> UrlSecret | None:
    """The secret ``url`` carries, or None: the one decision of "does this URL hold a credential"
    (spec channels and ``publish_url``, the lock's channels, ``publish --to``). Userinfo of any form
    (``user:password@``, ``token@``), a parameter named like a credential (:data:`_SECRET_PARAM_WORDS`)
    in the query, the fragment (``#access_token=``) or a path segment (``;token=``), a ``/t/<token>/``
    path segment (not in ``file://`` or ``s3://`` URLs: a folder named ``t`` is no token). Never
    raises: a URL that does not parse is judged on its text."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    try:
        parts = urlsplit(url)
        netloc, path, query, fragment = parts.netloc, parts.path, parts.query, parts.fragment
    except ValueError:   # e.g. an unbalanced IPv6 bracket
        rest = url.split("://", 1)[-1]
        rest, _, fragment = rest.partition("#")
        netloc, _, tail = rest.partition("/")
        path, _, query = ("/" + tail).partition("?")
        netloc = netloc.split("?", 1)[0]
    if "@" in netloc:
        return _URL_SECRETS["userinfo"]
    params = f"{path}?{query}#{fragment}"   # path ;params, the query, the fragment
    if any(_secret_param(m["name"]) for m in _QUERY_PARAM.finditer(params)):
        return _URL_SECRETS["query"]
    if scheme not in _NO_CONDA_TOKEN_SCHEMES and _CONDA_TOKEN_PATH.search(path):
        return _URL_SECRETS["conda-token"]
    return None


def check_url_has_no_secret(url: str, *, field: str = "channel", file: "str | Path | None" = None) -> None:
    """Refuse a channel URL that embeds a credential: it would end up in locks and logs."""
    secret = url_secret(url)
    if secret is not None:
        # the whole userinfo goes, not only a password: a token is often sent as the user name
        shown = re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@", rf"\g<1>{REDACTED}@", redact(url))
        raise UserError(f"the URL {shown} carries {secret.carries}; a URL is written into locks and logs",
                        field=field, file=file, accepted=secret.instead)


# ---------------------------------------------------------------------------------------------
# Lookup


def host_of(url: str) -> str:
    """The bare host of a URL (lower case, no port): rattler's storage key."""
    return (urlsplit(url).hostname or "").lower()


def _host_port(url: str) -> str:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:  # a malformed port is reported where the URL is used, not here
        port = None
    return f"{host}:{port}" if port else host


def env_scope(channels: Iterable[str] = ()) -> set[str]:
    """Hosts (bare and host:port) that receive the environment credentials."""
    explicit = os.environ.get(ENV_HOSTS)
    if explicit is not None and explicit.strip():
        return {h.strip().lower() for h in explicit.split(",") if h.strip()}
    scope: set[str] = set()
    for url in channels:
        if "://" not in url or url.startswith("file:"):
            continue
        host = host_of(url)
        if host and host not in PUBLIC_HOSTS:
            scope.add(_host_port(url))
    return scope


def _in_scope(url: str, scope: set[str]) -> bool:
    hp = _host_port(url)
    return hp in scope or host_of(url) in scope


def _env_credentials() -> Credentials | None:
    token = os.environ.get(ENV_TOKEN)
    if token:
        return Credentials("bearer", f"env {ENV_TOKEN}", token)
    user, password = os.environ.get(ENV_USER), os.environ.get(ENV_PASSWORD)
    if password is not None and password != "":
        return Credentials("basic", f"env {ENV_USER}/{ENV_PASSWORD}", password, username=user or "")
    return None


def _from_rattler_entry(entry: Any, source: str) -> Credentials | None:
    if isinstance(entry, str):
        try:
            entry = json.loads(entry)
        except ValueError:
            return None
    if not isinstance(entry, Mapping) or len(entry) != 1:
        return None
    (kind, value), = entry.items()
    if kind == "BearerToken" and isinstance(value, str):
        return Credentials("bearer", source, value)
    if kind == "CondaToken" and isinstance(value, str):
        return Credentials("conda-token", source, value)
    if kind == "BasicHTTP" and isinstance(value, Mapping):
        return Credentials("basic", source, str(value.get("password", "")),
                           username=str(value.get("username", "")))
    if kind == "S3Credentials" and isinstance(value, Mapping):
        return Credentials("s3", source, str(value.get("secret_access_key", "")),
                           username=str(value.get("access_key_id", "")),
                           session_token=value.get("session_token") or None)
    return None


def _auth_file_paths() -> list[Path]:
    paths = []
    env_file = os.environ.get("RATTLER_AUTH_FILE")
    if env_file:
        paths.append(Path(env_file))
    home = Path(os.path.expanduser("~"))
    paths.append(home / ".rattler" / "credentials.json")
    return paths


def _lookup_keys(url: str) -> list[str]:
    """rattler's key order: bare host; for s3 the URL and each parent; then ``*.domain``."""
    keys: list[str] = []
    host = host_of(url)
    if host:
        keys.append(host)
    parts = urlsplit(url)
    if parts.scheme == "s3":
        path = url.rstrip("/")
        while path and path != "s3:/" and path != "s3:":
            keys.append(path)
            if "/" not in path[len("s3://"):]:
                break
            path = path.rsplit("/", 1)[0]
    if host and not re.fullmatch(r"[0-9.]+|\[?[0-9a-f:]+\]?", host):
        domain = host
        while domain:
            keys.append(f"*.{domain}")
            if "." not in domain:
                break
            domain = domain.split(".", 1)[1]
    return keys


def _from_file(path: Path, keys: list[str], source: str) -> Credentials | None:
    try:
        data = json.loads(read_regular(path, MAX_CONFIG_BYTES))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read the credentials file: {type(exc).__name__}", file=path,
                        accepted='JSON mapping host → {"BearerToken": …} | {"BasicHTTP": {…}} | …')
    if not isinstance(data, Mapping):
        return None
    for key in keys:
        if key in data:
            cred = _from_rattler_entry(data[key], source)
            if cred is not None:
                return cred
    return None


def _from_keyring(keys: list[str]) -> Credentials | None:
    try:
        import keyring  # optional: rattler's own keyring backend is the OS secret service
        from keyring.backends import fail
    except Exception:
        return None
    try:
        if isinstance(keyring.get_keyring(), fail.Keyring):
            return None
        for key in keys:
            raw = keyring.get_password(KEYRING_SERVICE, key)
            if raw:
                cred = _from_rattler_entry(raw, "keyring")
                if cred is not None:
                    for s in cred.secrets():
                        register_secret(s)
                    return cred
    except Exception:  # a locked or absent keyring is "no credential", as in rattler
        return None
    return None


def _from_netrc(url: str) -> Credentials | None:
    path = Path(os.environ.get("NETRC") or os.path.expanduser("~/.netrc"))
    if not path.is_file():
        return None
    try:
        auth = netrc.netrc(str(path)).authenticators(host_of(url))
    except (netrc.NetrcParseError, OSError):
        return None
    if not auth:
        return None
    login, _account, password = auth
    if password:
        register_secret(password)
    return Credentials("basic", "netrc", password or "", username=login or "")


def stored_credentials(url: str) -> Credentials | None:
    """What rattler's AuthenticationStorage would find for ``url`` (see module docstring)."""
    keys = _lookup_keys(url)
    env_file = os.environ.get("RATTLER_AUTH_FILE")
    if env_file:
        cred = _from_file(Path(env_file), keys, "RATTLER_AUTH_FILE")
        if cred:
            return cred
    cred = _from_keyring(keys)
    if cred:
        return cred
    cred = _from_file(Path(os.path.expanduser("~/.rattler/credentials.json")), keys,
                      "~/.rattler/credentials.json")
    if cred:
        return cred
    return _from_netrc(url)


def credentials_for(url: str, channels: Iterable[str] = ()) -> Credentials | None:
    """The credential to use for ``url``: the environment's when ``url``'s host is in scope
    (:func:`env_scope` over ``channels`` plus ``url`` itself), else rattler's storage."""
    env = _env_credentials()
    if env is not None and _in_scope(url, env_scope([url, *channels])):
        return env
    return stored_credentials(url)


# ---------------------------------------------------------------------------------------------
# rattler client


class S3Settings(TypedDict):
    endpoint_url: str
    region: str
    addressing_style: Literal["path", "virtual-host"]


def s3_settings(bucket: str | None = None) -> S3Settings | None:
    """Endpoint/region/addressing for S3 from the environment, or None for AWS defaults."""
    endpoint = os.environ.get(ENV_S3_ENDPOINT) or os.environ.get("AWS_ENDPOINT_URL_S3") \
        or os.environ.get("AWS_ENDPOINT_URL")
    region = os.environ.get(ENV_S3_REGION) or os.environ.get("AWS_REGION") \
        or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    style = os.environ.get(ENV_S3_ADDRESSING) or ("path" if endpoint else "virtual-host")
    if style not in ("path", "virtual-host"):
        raise UserError(f"unknown S3 addressing style {style!r}", field=ENV_S3_ADDRESSING,
                        accepted="path, virtual-host")
    if not endpoint:
        return None
    addressing: Literal["path", "virtual-host"] = "path" if style == "path" else "virtual-host"
    return {"endpoint_url": endpoint.rstrip("/"), "region": region, "addressing_style": addressing}


def authenticated_client(
    channels: Iterable[str] = (),
    *,
    max_retries: int = 1,
    timeout: int | None = 60,
) -> Client:
    """A ``rattler.Client`` that authenticates like ``deepep-env publish`` does.

    - rattler's ``AuthenticationMiddleware`` (RATTLER_AUTH_FILE, keyring, ~/.rattler, netrc);
    - the environment credentials (``DEEPEP_ENV_CHANNEL_TOKEN`` or ``…_USER``/``…_PASSWORD``),
      for the hosts of :func:`env_scope` (``channels``: the channel URLs about to be read);
    - S3 (``s3://`` channels; a custom endpoint from ``DEEPEP_ENV_S3_ENDPOINT_URL``), OCI, GCS;
    - few retries (a down server fails fast) and a request timeout.

    Pass it to ``rattler.Gateway(client=…)`` for solving and to ``rattler.install(client=…)``.
    """
    from rattler.networking import (
        AddHeadersMiddleware,
        AuthenticationMiddleware,
        Client,
        GCSMiddleware,
        OciMiddleware,
        RetryMiddleware,
        S3Middleware,
    )
    from rattler.networking.middleware import S3Config

    channels = list(channels)
    scope = env_scope(channels)
    env = _env_credentials()
    # AddHeadersMiddleware is told only the bare host (no port), so a host:port scope entry
    # matches its host; several ports of one host are one trust domain for this purpose.
    bare_scope = {s.rsplit(":", 1)[0] if re.search(r":\d+$", s) else s for s in scope}
    headers = env.http_headers() if env is not None else {}

    def add_env_headers(host: str, path: str) -> dict[str, str] | None:
        if headers and host.lower() in bare_scope:
            return dict(headers)
        return None

    s3_mw = S3Middleware()
    settings = s3_settings()
    if settings:
        buckets = {urlsplit(c).hostname for c in channels if c.startswith("s3://")}
        s3_mw = S3Middleware({
            b: S3Config(settings["endpoint_url"], settings["region"], settings["addressing_style"])
            for b in buckets if b
        })
    return Client([
        RetryMiddleware(max_retries),
        AuthenticationMiddleware(),
        AddHeadersMiddleware(add_env_headers),
        OciMiddleware(),
        GCSMiddleware(),
        s3_mw,
    ], timeout=timeout)
