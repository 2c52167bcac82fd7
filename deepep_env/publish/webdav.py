"""Plain HTTP(S) channel that accepts PUT: nginx/Apache WebDAV, a static tree behind a PUT-able
proxy, or Artifactory (``artifactory+https://``, which indexes by itself).

Order of operations, chosen so that the index never lists a package that is not fully there:

1. GET each touched subdir's ``repodata.json`` (404 = new subdir). Classify every package
   against it (same sha256 → already present; different → refuse, before any upload).
2. PUT each new package, then HEAD it and check its size (and ``X-Checksum-Sha256`` where the
   server reports it, as Artifactory does). nginx's DAV module writes the body to a temp file
   and renames it into place only once complete, so a dropped connection leaves nothing; a
   failure here stops the run before step 3.
3. PUT the merged ``repodata.json`` of each touched subdir — last. Then delete derived index
   files (``repodata.json.zst``, shards) that would otherwise shadow the new ``repodata.json``:
   rattler prefers shards, then ``.zst``, and would never see the new package.

One publisher at a time per channel: two concurrent runs can lose each other's index update
(WebDAV has no compare-and-swap that nginx honours for PUT). Serialize publishes in CI.
"""
from __future__ import annotations

from typing import Any

from deepep_env.base.channels.auth import Credentials, redact
from deepep_env.publish.common import classify, uploaded
from deepep_env.publish.http import PublishError, Response, auth_failure, request, unexpected
from deepep_env.publish.model import LocalPackage, PublishReport
from deepep_env.publish.repodata import (DERIVED_INDEX_FILES, dumps, empty_repodata, listed, merge, parse,
                                         records_for)


def _join(base: str, *parts: str) -> str:
    return base.rstrip("/") + "/" + "/".join(parts)


def _check(url: str, resp: Response, creds: Credentials | None, what: str, ok: tuple[int, ...]) -> Response:
    if resp.status in ok:
        return resp
    if resp.status in (401, 403):
        raise auth_failure(url, resp, creds, what)
    if resp.status in (405, 501) and what.startswith("upload"):
        raise PublishError(f"{redact(url)} does not accept PUT ({resp.status} {resp.reason}): enable "
                           "WebDAV (nginx: dav_methods PUT; create_full_put_path on;)")
    if resp.status == 413:
        raise PublishError(f"{redact(url)} refused {what}: request entity too large (413); raise the "
                           "server's body limit (nginx: client_max_body_size 0;)")
    if resp.status in (301, 302, 303, 307, 308):
        raise PublishError(f"{redact(url)} redirects ({resp.status}) to {redact(resp.headers.get('location', '?'))}: "
                           "publish to the final URL (credentials are never sent across a redirect)")
    raise unexpected(url, resp, what)


def fetch_index(base: str, subdir: str, creds: Credentials | None) -> dict[str, Any] | None:
    url = _join(base, subdir, "repodata.json")
    resp = request("GET", url, credentials=creds, what=f"reading {subdir}/repodata.json")
    if resp.status == 404:
        return None
    _check(url, resp, creds, f"reading {subdir}/repodata.json", (200,))
    return parse(resp.body, redact(url))


def upload_file(base: str, p: LocalPackage, creds: Credentials | None) -> None:
    url = _join(base, p.subdir, p.filename)
    what = f"upload of {p.key}"
    resp = request("PUT", url, credentials=creds, body=p.path, what=what,
                   headers={"Content-Type": "application/octet-stream",
                            # Artifactory verifies these and rejects a mismatching body.
                            "X-Checksum-Sha256": p.sha256_hex})
    _check(url, resp, creds, what, (200, 201, 204))
    head = request("HEAD", url, credentials=creds, what=f"checking {p.key}")
    _check(url, head, creds, f"checking {p.key}", (200,))
    size = head.headers.get("content-length")
    if size is not None and int(size) != p.size:
        raise PublishError(f"{p.key} arrived truncated ({size} of {p.size} bytes) at {redact(base)}; "
                           "nothing was indexed, publish again")
    remote_sha = head.headers.get("x-checksum-sha256")
    if remote_sha and remote_sha.lower() != p.sha256_hex:
        raise PublishError(f"{p.key} arrived with a different sha256 at {redact(base)}; nothing was "
                           "indexed, publish again")


def put_index(base: str, subdir: str, data: dict[str, Any], creds: Credentials | None) -> None:
    url = _join(base, subdir, "repodata.json")
    what = f"upload of {subdir}/repodata.json"
    resp = request("PUT", url, credentials=creds, body=dumps(data), what=what,
                   headers={"Content-Type": "application/json"})
    _check(url, resp, creds, what, (200, 201, 204))


def remove_derived(base: str, subdir: str, creds: Credentials | None) -> list[str]:
    removed = []
    for name in DERIVED_INDEX_FILES:
        url = _join(base, subdir, name)
        head = request("HEAD", url, credentials=creds, what=f"checking {subdir}/{name}")
        if head.status != 200:
            continue
        resp = request("DELETE", url, credentials=creds, what=f"removing stale {subdir}/{name}")
        if resp.status in (200, 204, 404):
            removed.append(f"{subdir}/{name}")
        else:
            raise PublishError(
                f"{subdir}/{name} at {redact(base)} would hide the new repodata.json from rattler "
                f"and could not be removed ({resp.status} {resp.reason}); allow DELETE or remove it")
    return removed


def publish_http(base: str, packages: list[LocalPackage], creds: Credentials | None,
                 report: PublishReport, *, write_index: bool = True) -> PublishReport:
    subdirs = sorted({p.subdir for p in packages})
    indexes = {sd: fetch_index(base, sd, creds) for sd in subdirs}
    todo, present = classify(packages, lambda p: listed(indexes[p.subdir], p.filename),
                             redact(base))
    for p in todo:
        upload_file(base, p, creds)
    report.packages = sorted(present + uploaded(todo), key=lambda o: o.key)
    if not write_index:
        report.notes.append("the server indexes uploads itself; no repodata.json was written")
        return report
    touched = sorted({p.subdir for p in todo})
    if touched:
        records = records_for(todo)
        for sd in touched:
            put_index(base, sd, merge(indexes[sd], sd, records[sd]), creds)
    # Every conda channel has noarch/repodata.json; rattler refuses a channel without one.
    if "noarch" not in touched:
        noarch = indexes["noarch"] if "noarch" in indexes else fetch_index(base, "noarch", creds)
        if noarch is None:
            put_index(base, "noarch", empty_repodata("noarch"), creds)
            touched = sorted(set(touched) | {"noarch"})
    for sd in touched:
        report.removed_stale.extend(remove_derived(base, sd, creds))
    report.indexed = touched
    return report

