"""What a channel server's HTTP answer means, and the next step that works: the one place ``install``,
``lock`` and ``publish`` word a 401/403 (which credentials are read, or which one was sent) and a 5xx
(the server's own words, and that nothing here is at fault) (issue 56).

rattler reports an HTTP failure as ``HTTP status client error (401 Unauthorized) for url (URL)``;
deepep-env's own HTTP client (publish) has the status and body at hand. Both come here.
"""
from __future__ import annotations

import re
from typing import Iterable, Optional
from urllib.parse import urlsplit

from deepep_env.base.channels.auth import ENV_PASSWORD, ENV_TOKEN, ENV_USER, Credentials, credentials_for, redact

# rattler's (reqwest's) wording: "HTTP status server error (500 Internal Server Error) for url (http://…)"
_RATTLER_STATUS = re.compile(r"HTTP status (?:client|server) error \((\d{3})(?: ([^)]*))?\)(?: for url \(([^)\s]+)\))?")


def status_in(text: str) -> Optional[tuple[int, str, Optional[str]]]:
    """(status, reason, URL) of the HTTP failure rattler's error ``text`` reports, else None."""
    m = _RATTLER_STATUS.search(text)
    return (int(m.group(1)), m.group(2) or "", m.group(3)) if m else None


def access_hint(url: str, credentials: Optional[Credentials]) -> str:
    """The next step after a 401/403 from ``url``: where credentials are read from, or which one was sent."""
    host = urlsplit(url).hostname or url
    if credentials is None:
        return (f"no credentials found for {host}: set {ENV_TOKEN} (or {ENV_USER}/{ENV_PASSWORD}), "
                f"or add the host to RATTLER_AUTH_FILE (docs/private-channel.md)")
    return f"check the {credentials.kind} credential from {credentials.source} (the server refused it for {host})"


def server_hint(status: int) -> str:
    """The next step after a 5xx: the server failed, not the request; its own words are in the message."""
    return (f"the channel server failed ({status}), not this request: retry later, or ask its admin (the "
            "server's log names the cause); nothing here needs to change")


def channel_failure(text: str, channels: Iterable[str] = ()) -> Optional[tuple[str, str]]:
    """(what happened, next step) for rattler's error ``text`` when it is an HTTP 401/403 or 5xx, else
    None. ``channels``: the URLs of the command's channels (whose hosts get the environment's credentials)."""
    found = status_in(text)
    if found is None:
        return None
    status, reason, url = found
    where = urlsplit(url).netloc if url else "the channel server"
    if status in (401, 403):
        word = "requires credentials" if status == 401 else "refused access"
        cred = credentials_for(url, list(channels)) if url else None
        return f"{where} {word} ({status} {reason})".rstrip(), access_hint(url or where, cred)
    if 500 <= status < 600:
        words = words_at(url) if url else ""
        said = f" ({status} {reason})".replace(" )", ")") + (f": {words}" if words else "")
        return f"{where} failed{said}", server_hint(status)
    return None


def server_words(body: bytes, limit: int = 200) -> str:
    """A server's error body as one line for a message (HTML pages are not words), redacted."""
    snippet = body[:limit].decode("utf-8", "replace").strip().replace("\n", " ")
    return redact(snippet) if snippet and not snippet.lstrip().startswith("<") else ""


def words_at(url: str, timeout: float = 5.0) -> str:
    """What the server at ``url`` says in its error body now (one GET, bounded), for a 5xx that rattler
    reported by status only; "" when it answers otherwise or not at all."""
    import urllib.error
    import urllib.request

    if urlsplit(url).scheme not in ("http", "https"):
        return ""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=timeout):
            return ""
    except urllib.error.HTTPError as exc:
        return server_words(exc.read(200)) if exc.code >= 500 else ""
    except (OSError, ValueError):
        return ""
