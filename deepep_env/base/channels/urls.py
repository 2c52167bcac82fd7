"""Channels as the lock sees them: where we *solve* from and what the lock *records*.

A spec names channels as ``local`` (the builder's output channel, ``<state>/channel``), a short
name (``conda-forge``) or a URL. Each becomes a :class:`ChannelRef` with two URLs:

- ``source``: where packages are read from on this machine (for ``local``: the channel folder,
  else the spec's ``publish_url`` when this machine has no local build);
- ``lock_url``: what the committed lock names. For ``local`` that is the spec's ``publish_url``,
  so a lock never names a path on one machine (field notes §5: "file channels are written as
  absolute paths into locks"); without a ``publish_url`` the lock keeps the ``file://`` URL and
  is marked machine-local.

Unreachable channels fail fast: a TCP probe with a short timeout before the solver runs, so CI
without a route to conda-forge says so in seconds instead of retrying for a minute.
"""
from __future__ import annotations

import json
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Optional
from urllib.parse import unquote, urlsplit

from deepep_env.base.channels.auth import authenticated_client, check_url_has_no_secret, redact
from deepep_env.base.errors import UserError
from deepep_env.base.readfile import MAX_REPODATA_BYTES, present, read_bytes

if TYPE_CHECKING:  # annotations only: rattler loads on first use
    from rattler.networking import Client

PROBE_TIMEOUT_S = float(os.environ.get("DEEPEP_ENV_CHANNEL_PROBE_TIMEOUT", "3"))
REQUEST_TIMEOUT_S = 60


def client(channels: Iterable[str] = ()) -> Client:
    """An authenticated ``rattler.Client`` with few retries and a request timeout."""
    return authenticated_client(list(channels), max_retries=1, timeout=REQUEST_TIMEOUT_S)


def with_slash(url: str) -> str:
    return url if url.endswith("/") else url + "/"


def file_url(path: Path) -> str:
    return with_slash(Path(path).resolve().as_uri())


def url_to_path(url: str) -> Path:
    return Path(unquote(urlsplit(url).path))


def named_channel_url(name: str) -> str:
    """``conda-forge`` → ``https://conda.anaconda.org/conda-forge/`` (rattler's own rule)."""
    from rattler import Channel

    return with_slash(Channel(name).base_url)


def channel_url(entry: str) -> str:
    """A spec's channel entry (a name or a URL, not ``local``) as the URL a lock records."""
    return with_slash(entry) if "://" in entry else named_channel_url(entry)


# A package file in a channel: ``<subdir>/<name>-<version>-<build>.conda`` (or ``.tar.bz2``), nothing
# percent-encoded, no other segment. The one rule for a locked package's URL (issue 39.3 and 39.11).
_SUBDIR = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+!-]*\.(conda|tar\.bz2)")


def package_path(url: str, channels: Iterable[str]) -> Optional[str]:
    """``<subdir>/<file>`` when ``url`` is a package file directly in one of ``channels`` (URLs with a
    trailing slash), else None: another host, another path, ``..``, ``%2f`` or a query are none of
    theirs, so the caller refuses the URL rather than guesses which channel it meant."""
    for base in channels:
        if url.startswith(base):
            sub, sep, name = url[len(base):].partition("/")
            if sep and _SUBDIR.fullmatch(sub) and _FILE.fullmatch(name):
                return f"{sub}/{name}"
    return None


MIRRORS_ENV = "DEEPEP_ENV_MIRRORS"


def channel_mirrors(environ: Optional[dict] = None) -> dict[str, Path]:
    """Where to read a channel from instead of its URL (pixi's ``[mirrors]``, rattler's mirror
    config): ``$DEEPEP_ENV_MIRRORS`` = ``CHANNEL=DIR`` items separated by spaces, CHANNEL a name
    (``conda-forge``) or a URL. A lock still names the channel's own URL; its packages' bytes come
    from the mirror and are checked against the sha256 the lock records."""
    text = (os.environ if environ is None else environ).get(MIRRORS_ENV, "")
    out: dict[str, Path] = {}
    for item in text.split():
        chan, sep, d = item.partition("=")
        if not sep or not chan or not d or not Path(d).is_absolute():
            raise UserError(f"not a mirror: {redact(item)!r}", field=MIRRORS_ENV,
                            accepted="CHANNEL=/abs/dir items separated by spaces, e.g. conda-forge=/srv/conda-forge")
        out[channel_url(chan)] = mirror_dir(Path(d), field=MIRRORS_ENV, item=item)
    return out


def mirror_dir(d: Path, *, field: str, item: str) -> Path:
    """A mirror folder that exists: one that does not would be skipped package by package without a
    word, and the channel (or the builder's copy of it) read instead."""
    if not d.is_dir():
        what = "is not a folder" if d.exists() else "does not exist"
        raise UserError(f"mirror folder {d} {what} (in {redact(item)!r})", field=field,
                        accepted="an existing folder holding the channel's subdirs (linux-64/, noarch/)")
    return d


@dataclass(frozen=True)
class ChannelRef:
    spec: str          # as written in the spec: "local", "conda-forge", a URL
    source: str        # where this machine reads it (URL with trailing slash)
    lock_url: str      # what the lock records (URL with trailing slash)
    local: bool = False
    local_dir: str = ""  # for "local": the folder that had no build when source fell back to the URL

    @property
    def machine_local(self) -> bool:
        return self.lock_url.startswith("file://")

    def to_dict(self) -> dict:
        return {"spec": self.spec, "source": redact(self.source), "lock_url": redact(self.lock_url),
                "local": self.local}


def _has_repodata(root: Path) -> bool:
    return any((root / sub / "repodata.json").is_file() for sub in ("noarch", "linux-64", "linux-aarch64"))


def resolve_channels(channels: list[str], *, publish_url: Optional[str], local_dir: Path,
                     explicit_dir: bool = False, for_check: bool = False) -> list[ChannelRef]:
    """Turn a spec's channel list into :class:`ChannelRef` s, in priority order.

    ``local_dir``: the local channel folder (``--channel`` or ``<state>/channel``). When it has
    no repodata and the spec has a ``publish_url``, packages are read from that URL instead (a
    teammate relocking without a local build). ``for_check`` never touches the disk or network.
    """
    # Whatever a lock names is committed: a URL with user:password@ or /t/<token>/ never is.
    for u, f in [*((c, "channels") for c in channels if "://" in c), ((publish_url or ""), "publish_url")]:
        if u:
            check_url_has_no_secret(u, field=f)
    mirrors = channel_mirrors()
    out: list[ChannelRef] = []
    for c in channels:
        if c == "local":
            here = file_url(local_dir)
            if publish_url:
                lock_url = with_slash(publish_url)
                if for_check or explicit_dir or _has_repodata(local_dir):
                    source = here
                else:
                    source = lock_url
            else:
                lock_url = source = here
            out.append(ChannelRef("local", source, lock_url, local=True,
                                  local_dir="" if source == here else str(local_dir)))
        else:
            u = channel_url(c)
            mirror = mirrors.get(u)
            out.append(ChannelRef(c, file_url(mirror) if mirror is not None else u, u))
    return out


# Names reserved for examples and documentation (RFC 2606, RFC 6761): they never resolve, so a URL on
# one is a placeholder, never a channel anybody published to (the specs' publish_url until a team sets
# its own). Said as such, and without a DNS lookup that could take the resolver's whole timeout.
_RESERVED_TLDS = ("example", "invalid", "test", "localhost")
_RESERVED_DOMAINS = ("example.com", "example.net", "example.org")


def placeholder_host(url: str) -> Optional[str]:
    """The host of ``url`` when it is a reserved example name (``conda.deepep-env.example``), else None."""
    try:
        host = (urlsplit(url).hostname or "").rstrip(".").lower()
    except ValueError:
        return None
    if not host:
        return None
    if host.rsplit(".", 1)[-1] in _RESERVED_TLDS or any(host == d or host.endswith("." + d) for d in _RESERVED_DOMAINS):
        return host
    return None


def probe(ref: ChannelRef, subdirs: Iterable[str]) -> None:
    """Fail in seconds with one line naming the channel when it cannot be read."""
    url = ref.source
    scheme = urlsplit(url).scheme
    label = redact(ref.spec if ref.spec == ref.source.rstrip("/") else f"{ref.spec} ({url})")
    if ref.local_dir:
        label = redact(f"local (no build in {ref.local_dir}, so its publish_url {url})")
    if scheme == "file":
        root = url_to_path(url)
        if not root.is_dir():
            hint = "run `deepep-env build ENV` first, or pass --channel DIR" if ref.local else "create it or fix the spec"
            raise UserError(f"channel {label} does not exist; nothing written", field="channels", accepted=hint)
        if not _has_repodata(root):
            raise UserError(f"channel {label} has no repodata.json (not indexed); nothing written", field="channels",
                            accepted="a channel folder written by `deepep-env build` (it indexes it)")
        return
    if scheme not in ("http", "https"):
        return  # s3://, oci:// …: the client reports those itself
    parts = urlsplit(url)
    host = parts.hostname or ""
    if placeholder_host(url):
        raise UserError(f"channel {label} is a placeholder URL ({host} is a reserved example name: it never resolves, "
                        f"nothing is published there); nothing written", field="channels",
                        accepted="the URL of a channel your team publishes to (the spec's publish_url), or a folder "
                             "that mirrors it (DEEPEP_ENV_MIRRORS=\"URL=DIR\")")
    port = parts.port or (443 if scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        if isinstance(exc, socket.gaierror):
            reason = "name does not resolve"
        elif isinstance(exc, TimeoutError) or isinstance(exc, socket.timeout):
            reason = f"no answer in {PROBE_TIMEOUT_S:g} s"
        raise UserError(f"channel {label} cannot be reached ({reason}); nothing written", field="channels",
                        accepted="a reachable channel: check the network/proxy, or lock where the channel is reachable") \
            from None


def read_index(ref: ChannelRef, subdirs: Iterable[str], client_obj: Optional[Client] = None) -> list[dict]:
    """(name, version, build, subdir) of every package in a channel's plain repodata.json.

    Used only to learn the *names* of our builds' outputs (recipes may have several outputs that
    share one build string, e.g. ``deepep-nvshmem`` and ``deepep-nvshmem-devel``). Best effort:
    a channel without plain repodata.json yields nothing."""
    out: list[dict] = []
    for sub in [*subdirs, "noarch"]:
        url = ref.source + f"{sub}/repodata.json"
        data: Optional[bytes] = None
        if url.startswith("file://"):
            p = url_to_path(url)
            if present(p):
                data = read_bytes(p, what="repodata", limit=MAX_REPODATA_BYTES)
        elif client_obj is not None:
            import asyncio

            from rattler.package_streaming import download_bytes

            try:
                data = asyncio.run(download_bytes(client_obj, url))
            except Exception:  # noqa: BLE001 - best effort; the solver reports real errors
                data = None
        if not data:
            continue
        try:
            repo = json.loads(data)
        except ValueError:
            continue
        for key in ("packages", "packages.conda"):
            for fn, rec in (repo.get(key) or {}).items():
                out.append({"name": rec.get("name"), "version": rec.get("version"), "build": rec.get("build"),
                            "subdir": rec.get("subdir") or sub, "file": fn})
    return out
