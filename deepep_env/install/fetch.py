"""The lock's package files on this machine, each checked against the lock's sha256 *by us* before
rattler sees it (:func:`fetch_verified`): the lock's own ``file://`` URL, a mirror (``--mirror
URL=DIR``, :func:`parse_mirrors`), the store (our builds), else a download into a content-addressed
cache (:func:`cache_root`); a package of ours that none of them has is rebuilt (substitute, else
build: :class:`~deepep_env.builder.realise.Realiser`). A corrupt file is one line naming the package.

Split from :mod:`deepep_env.install.installer` (issue 41), which links the verified files into a
staging prefix and swaps it into place.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Optional

from deepep_env.base.channels.auth import redact
from deepep_env.base.channels.refusals import channel_failure
from deepep_env.base.channels.urls import mirror_dir, placeholder_host, url_to_path
from deepep_env.base.errors import UserError
from deepep_env.base.hashing import file_sha256
from deepep_env.base.rattler_errors import rattler_errors
from deepep_env.builder.realise import Realiser

if TYPE_CHECKING:  # annotations only: no import at run time
    from rattler import RepoDataRecord
    from rattler.networking import Client


def parse_mirrors(items: Iterable[str]) -> dict[str, Path]:
    """``URL=DIR`` → {"URL/": DIR}: packages the lock names under URL are taken from DIR when there."""
    out: dict[str, Path] = {}
    for item in items:
        url, sep, d = item.partition("=")
        if not sep or "://" not in url or not d:
            raise UserError(f"not a mirror: {item!r}", field="--mirror", accepted="URL=DIR, e.g. https://conda.example/h200=/srv/channel")
        out[url if url.endswith("/") else url + "/"] = mirror_dir(Path(d).expanduser(), field="--mirror", item=item)
    return out


def cache_root() -> Path:
    v = os.environ.get("DEEPEP_ENV_CACHE_DIR")
    if v:
        return Path(v)
    v = os.environ.get("RATTLER_CACHE_DIR")
    if v:
        return Path(v)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rattler" / "cache"


def _mismatch(pkg: str, where: str, actual: str, expected: str, lock_path: Path) -> UserError:
    return UserError(
        f"sha256 of {where} is {actual.split(':', 1)[-1][:16]}…, the lock says {expected[:16]}…: the package "
        "is corrupt or the lock was altered; refusing to install", file=lock_path, field=pkg,
        accepted="a lock written by `deepep-env lock` and the channel it names, unmodified")


def _local_file(rec: RepoDataRecord, label: str, mirrors: list[tuple[str, Path]], lock_path: Path,
                realise: Optional[Realiser]) -> Optional[Path]:
    """The record's file on this machine: its file:// URL, a mirror's copy, or the store's (our builds)."""
    url = rec.url
    if url.startswith("file://"):
        path = url_to_path(url)
        if path.is_file():
            return path
        if realise is None or not realise.ours(str(rec.build)):
            raise UserError(f"{label}: package file {path} does not exist", file=lock_path,
                            field=rec.name.normalized, accepted="the channel the lock was made from, or --mirror URL=DIR")
    for prefix, d in mirrors:
        if url.startswith(prefix):
            cand = d / url[len(prefix):]
            if cand.is_file():
                return cand
            break
    if realise is not None and realise.ours(str(rec.build)):
        assert rec.sha256 is not None  # _fetch_verified refuses a record without one before asking
        return realise.from_store(str(rec.build), rec.file_name, rec.sha256.hex())
    return None


class Unavailable(UserError):
    """The package could not be fetched from where the lock says (not: it was fetched and is corrupt)."""


def _download(rec: RepoDataRecord, label: str, expected: str, lock_path: Path, client_obj: Client) -> Path:
    """The record from its channel URL into the verified download cache."""
    from rattler.package_streaming import download_to_path

    url = rec.url
    downloads = cache_root() / "deepep-env-verified"
    path = downloads / f"{expected}-{rec.file_name}"
    if path.is_file() and file_sha256(path) == f"sha256:{expected}":
        return path
    downloads.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")

    def drop_part(t: Path = tmp) -> None:
        with contextlib.suppress(OSError):
            t.unlink()

    if url.startswith("file://"):
        raise Unavailable(f"{label}: package file {url_to_path(url)} does not exist", file=lock_path,
                          field=rec.name.normalized)
    if host := placeholder_host(url):
        raise Unavailable(f"{label} is published nowhere: the lock's URL is on {host}, a placeholder (a reserved "
                          f"example name that never resolves)", file=lock_path, field=rec.name.normalized)
    try:
        with rattler_errors(f"{label}: cannot download {redact(url)}: {{error}}", file=lock_path,
                            field=rec.name.normalized, first_line=True, cleanup=drop_part):
            asyncio.run(download_to_path(client_obj, url, tmp))
    except UserError as exc:
        failed = channel_failure(exc.message, [url])
        if failed is not None:   # credentials or a broken server: a rebuild would not be the next step
            raise UserError(f"{label}: cannot download {redact(url)}: {failed[0]}", file=lock_path,
                            field=rec.name.normalized, accepted=failed[1]) from None
        raise Unavailable(exc.message, file=lock_path, field=rec.name.normalized) from None
    actual = file_sha256(tmp)
    if actual != f"sha256:{expected}":
        tmp.unlink()
        raise _mismatch(label, redact(url), actual, expected, lock_path)
    os.replace(tmp, path)
    return path


def fetch_verified(recs: list[RepoDataRecord], *, lock_path: Path, mirrors: dict[str, Path], client_obj: Client,
                    realise: Optional[Realiser] = None) -> tuple[int, int]:
    """Point every record at a local file whose sha256 is the lock's; returns (verified, downloaded).

    Substitute, else build (``realise``, our builds only): the lock's URL, a mirror, the store, the
    channel URL; a package none of them has is rebuilt from its recipe and must match the lock."""
    verified = downloaded = 0
    ordered_mirrors = sorted(mirrors.items(), key=lambda kv: len(kv[0]), reverse=True)
    for rec in recs:
        label = f"{rec.name.normalized} {rec.version} {rec.build}"
        expected = rec.sha256.hex() if rec.sha256 else None
        if not expected:
            raise UserError(f"{label}: the lock has no sha256 for it, so it cannot be verified; refusing to install",
                            file=lock_path, field=rec.name.normalized)
        path = _local_file(rec, label, ordered_mirrors, lock_path, realise)
        if path is not None:
            actual = file_sha256(path)
            if actual != f"sha256:{expected}":
                raise _mismatch(label, str(path), actual, expected, lock_path)
        else:
            try:
                path = _download(rec, label, expected, lock_path, client_obj)
                downloaded += 1
            except Unavailable as exc:
                if realise is None or not realise.ours(str(rec.build)):
                    raise
                path = realise.rebuilt(rec.name.normalized, str(rec.version), str(rec.build), rec.file_name, expected,
                                       why=exc.message)
        rec.url = path.resolve().as_uri()
        verified += 1
    return verified, downloaded
