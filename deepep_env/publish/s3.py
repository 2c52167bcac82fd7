"""``s3://bucket/prefix`` target (AWS S3, MinIO, Ceph RGW, moto).

Uploads are single PUTs signed with AWS Signature Version 4 (stdlib only: boto3 is not a
dependency) carrying ``Content-MD5`` — S3 rejects a body that does not match it, and an object
only becomes visible once fully written, so a dropped connection leaves nothing. The index is
then rebuilt for each touched subdir by rattler's ``index_s3``, which only lists objects that
exist. Each object carries ``x-amz-meta-sha256`` so that a later publish can tell "same file"
from "different file under the same name" without downloading it.

Credentials: an ``S3Credentials`` entry in rattler's auth storage for ``s3://bucket[/prefix]``
(rattler's own lookup), else ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``
(``AWS_SESSION_TOKEN``). Endpoint: ``DEEPEP_ENV_S3_ENDPOINT_URL`` (or ``AWS_ENDPOINT_URL``);
region ``DEEPEP_ENV_S3_REGION``/``AWS_REGION`` (default us-east-1); addressing style
``DEEPEP_ENV_S3_ADDRESSING_STYLE`` (``path`` by default with a custom endpoint).
"""
from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import quote, urlsplit

from deepep_env.base.channels.auth import Credentials, S3Settings, register_secret, s3_settings, stored_credentials
from deepep_env.base.errors import UserError
from deepep_env.publish.common import classify, uploaded
from deepep_env.publish.http import PublishError, Response, request, unexpected
from deepep_env.publish.isolated import IsolatedError
from deepep_env.publish.isolated import call as call_isolated
from deepep_env.publish.model import LocalPackage, PublishReport
from deepep_env.publish.repodata import listed, parse

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str  # no leading/trailing slash
    endpoint: str  # scheme://host[:port]
    region: str
    style: str  # "path" | "virtual-host"

    def object_url(self, key: str) -> str:
        key = quote(key, safe="/-_.~")
        parts = urlsplit(self.endpoint)
        if self.style == "path":
            return f"{self.endpoint}/{self.bucket}/{key}"
        return f"{parts.scheme}://{self.bucket}.{parts.netloc}/{key}"

    def key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)


def location(url: str) -> S3Location:
    parts = urlsplit(url)
    if not parts.hostname:
        raise UserError(f"no bucket in {url!r}", field="--to", accepted="s3://bucket/prefix")
    settings: S3Settings | dict[str, str] = s3_settings() or {}
    region = settings.get("region") or os.environ.get("AWS_REGION") or os.environ.get(
        "AWS_DEFAULT_REGION") or "us-east-1"
    endpoint = settings.get("endpoint_url") or f"https://s3.{region}.amazonaws.com"
    style = settings.get("addressing_style") or "virtual-host"
    return S3Location(parts.netloc, parts.path.strip("/"), endpoint.rstrip("/"), region, style)


def credentials(url: str) -> Credentials:
    cred = stored_credentials(url)
    if cred is not None and cred.kind == "s3":
        return cred
    key_id = os.environ.get("AWS_ACCESS_KEY_ID")
    secret = os.environ.get("AWS_SECRET_ACCESS_KEY")
    if key_id and secret:
        return Credentials("s3", "env AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY", secret,
                           username=key_id, session_token=os.environ.get("AWS_SESSION_TOKEN") or None)
    raise UserError(
        f"no S3 credentials for {url}",
        accepted="AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY, or an S3Credentials entry for "
        "s3://bucket in RATTLER_AUTH_FILE",
    )


# ---------------------------------------------------------------------------------------------
# Signature Version 4 (https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html)


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256).digest()


def sign_v4(
    method: str,
    url: str,
    headers: Mapping[str, str],
    payload_sha256: str,
    *,
    access_key: str,
    secret_key: str,
    region: str,
    now: dt.datetime,
    session_token: str | None = None,
    service: str = "s3",
) -> dict[str, str]:
    """Headers to add (``x-amz-date``, ``x-amz-content-sha256``, ``Authorization``, and the
    session token) for a request with the given ``headers`` (all of which are signed)."""
    parts = urlsplit(url)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    datestamp = now.strftime("%Y%m%d")
    host = parts.netloc
    out = {"x-amz-date": amz_date, "x-amz-content-sha256": payload_sha256}
    if session_token:
        out["x-amz-security-token"] = session_token
    all_headers = {k.lower(): " ".join(str(v).strip().split()) for k, v in {**headers, **out}.items()}
    all_headers["host"] = host
    signed = sorted(all_headers)
    canonical_headers = "".join(f"{k}:{all_headers[k]}\n" for k in signed)
    query = "&".join(
        f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}"
        for k, v in sorted(
            (pair.split("=", 1) + [""])[:2] for pair in parts.query.split("&") if pair
        )
    )
    canonical_request = "\n".join([
        method, parts.path or "/", query, canonical_headers, ";".join(signed), payload_sha256,
    ])
    scope = f"{datestamp}/{region}/{service}/aws4_request"
    string_to_sign = "\n".join([
        "AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical_request.encode()).hexdigest(),
    ])
    key = _hmac(("AWS4" + secret_key).encode("utf-8"), datestamp)
    key = _hmac(key, region)
    key = _hmac(key, service)
    key = _hmac(key, "aws4_request")
    signature = hmac.new(key, string_to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    out["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
                            f"SignedHeaders={';'.join(signed)}, Signature={signature}")
    return out


def _s3_request(method: str, loc: S3Location, key: str, cred: Credentials, *,
                body: bytes | Path | None = None, payload_sha256: str = EMPTY_SHA256,
                headers: Mapping[str, str] | None = None, what: str) -> Response:
    url = loc.object_url(key)
    hdrs = dict(headers or {})
    hdrs.update(sign_v4(method, url, hdrs, payload_sha256, access_key=cred.username or "",
                        secret_key=cred.secret, region=loc.region,
                        now=dt.datetime.now(dt.timezone.utc), session_token=cred.session_token))
    return request(method, url, body=body, headers=hdrs, what=what)


def _fail(loc: S3Location, key: str, resp: Response, cred: Credentials, what: str) -> PublishError:
    if resp.status in (401, 403):
        return PublishError(f"S3 at {loc.endpoint} refused {what} ({resp.status} {resp.reason}): check the "
                            f"S3 credential from {cred.source}")
    if resp.status == 404 and b"NoSuchBucket" in resp.body:
        return PublishError(f"S3 bucket {loc.bucket!r} does not exist at {loc.endpoint}")
    if resp.status == 400 and b"BadDigest" in resp.body:
        return PublishError(f"{key} arrived damaged at S3 (Content-MD5 mismatch); nothing was indexed, "
                            "publish again")
    return unexpected(loc.object_url(key), resp, what)


def _get_index(loc: S3Location, subdir: str, cred: Credentials) -> dict[str, Any] | None:
    key = loc.key(subdir, "repodata.json")
    resp = _s3_request("GET", loc, key, cred, what=f"reading {subdir}/repodata.json")
    if resp.status == 404 and b"NoSuchBucket" not in resp.body:
        return None
    if resp.status != 200:
        raise _fail(loc, key, resp, cred, f"reading {subdir}/repodata.json")
    return parse(resp.body, f"s3://{loc.bucket}/{key}")


def _upload(loc: S3Location, p: LocalPackage, cred: Credentials) -> None:
    md5 = hashlib.md5()
    with open(p.path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            md5.update(block)
    key = loc.key(p.subdir, p.filename)
    what = f"upload of {p.key}"
    resp = _s3_request("PUT", loc, key, cred, body=p.path, payload_sha256=p.sha256_hex, what=what,
                       headers={"Content-Type": "application/octet-stream",
                                "Content-MD5": base64.b64encode(md5.digest()).decode(),
                                "x-amz-meta-sha256": p.sha256_hex})
    if resp.status not in (200, 201, 204):
        raise _fail(loc, key, resp, cred, what)


def _index(loc: S3Location, subdirs: list[str], cred: Credentials) -> None:
    channel = f"s3://{loc.bucket}/{loc.prefix}" if loc.prefix else f"s3://{loc.bucket}"
    credentials = {"endpoint_url": loc.endpoint, "region": loc.region, "access_key_id": cred.username,
                   "secret_access_key": cred.secret, "session_token": cred.session_token,
                   "addressing_style": "path" if loc.style == "path" else "virtual-host"}
    try:
        call_isolated("index_s3", channel=channel, credentials=credentials, subdirs=subdirs)
    except IsolatedError as exc:
        raise PublishError(f"indexing {channel} ({', '.join(subdirs)}) failed: {exc}")


def publish_s3(url: str, packages: list[LocalPackage], report: PublishReport) -> PublishReport:
    loc = location(url)
    cred = credentials(url)
    for s in cred.secrets():
        register_secret(s)
    subdirs = sorted({p.subdir for p in packages} | {"noarch"})
    indexes = {sd: _get_index(loc, sd, cred) for sd in subdirs}
    todo, present = classify(packages, lambda p: listed(indexes[p.subdir], p.filename), url)
    for p in todo:
        _upload(loc, p, cred)
    touched = sorted({p.subdir for p in todo} | ({"noarch"} if indexes["noarch"] is None else set()))
    if touched:
        _index(loc, touched, cred)
    report.packages = sorted(present + uploaded(todo), key=lambda o: o.key)
    report.indexed = touched
    return report
