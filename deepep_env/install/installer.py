"""Lock → prefix, verified: ``deepep-env install ENV``.

Exactly the locked packages are installed, and every archive is checked against the lock's
sha256 *by us*, before rattler sees it: local files in place, remote ones after download into a
content-addressed folder (:mod:`deepep_env.install.fetch`). A corrupt package in a channel or a lock edited by hand is refused with
one line naming the package (rattler alone only notices damage that breaks decompression, and a
failed install in py-rattler 0.28 can crash the interpreter on exit — seen here).

Verify first, then swap: archives are checked against the lock, the environment is assembled in a
staging folder beside the prefix (from a package cache private to this install, extracted from the
verified archives), compared with the lock, given its completion marker
``<prefix>/conda-meta/deepep-env``, and renamed into place. A refusal or a crash at any step
leaves the previous prefix exactly as it was: a prefix that has a marker is always complete. A
killed install's staging folder, package cache and parked old prefix are removed by the next
install; a swap killed between its two renames is rolled back by the next reader of the prefix
(``formats.prefix.recover_swap``), so the prefix is never missing. ``activate``, ``run`` and ``doctor`` read it.
A second install of the same lock is a no-op decided from the marker alone (no lock parse, no
hashing of packages).
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional

from deepep_env.base.atomic import try_create_in
from deepep_env.base.channels.auth import redact
from deepep_env.base.errors import UserError
from deepep_env.base.readfile import read_bytes
from deepep_env.base.channels.urls import channel_mirrors, package_path
from deepep_env.base.channels.urls import client as make_client
from deepep_env.lock.check import check_lock
from deepep_env.formats.lockfile import read_lock
from deepep_env.lock.next_step import next_step
from deepep_env.lock.solve import default_lock_path
from deepep_env.lock.workspace import Workspace, workspace
from deepep_env.envspec.resolved import spec_marker
from deepep_env.builder.realise import Realiser
from deepep_env.install.fetch import cache_root, fetch_verified, parse_mirrors
from deepep_env.formats.installed import current_subdir, installed_records, new_marker
from deepep_env.formats.prefix import (LEGACY_RELPATH, PrefixMarker, existing_marker, has_marker, marker_path, owner_pid,
                                       pid_alive, recover_swap)
from deepep_env.base.rattler_errors import rattler_errors

if TYPE_CHECKING:  # annotations only: no import at run time
    from rattler import RepoDataRecord
    from rattler.networking import Client

    from deepep_env.builder.build import Progress
    from deepep_env.base.project import Project


def read_marker(prefix: str | Path) -> Optional[dict[str, Any]]:
    """The completion marker of a prefix as a dict (:meth:`PrefixMarker.read`), or None when the
    prefix is not a complete install."""
    m = PrefixMarker.read(prefix)
    return dict(m.fields) if m is not None else None


@dataclass
class InstallResult:
    env: str
    prefix: Path
    status: str                      # "installed" | "up-to-date" | "updated" (spec fields of the marker only)
    lock: Path
    lock_sha256: str
    subdir: str
    packages: list[dict[str, str]] = field(default_factory=list)
    verified: int = 0
    downloaded: int = 0
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)   # what substitute-or-build did (rebuilt packages)

    def to_dict(self) -> dict[str, Any]:
        return {"env": self.env, "prefix": str(self.prefix), "status": self.status, "lock": str(self.lock),
                "lock_sha256": self.lock_sha256, "subdir": self.subdir, "packages": self.packages,
                "verified": self.verified, "downloaded": self.downloaded, "seconds": round(self.seconds, 3),
                "warnings": [redact(w) for w in self.warnings], "notes": self.notes}


@contextlib.contextmanager
def _prefix_lock(prefix: Path) -> Iterator[None]:
    """One installer per prefix at a time (a second waits). The lock file lives in the user's cache,
    named by the prefix's path, so nothing is left beside the prefix. A killed install's leftovers
    are cleaned up as the lock is taken (:func:`_clean_leftovers`)."""
    import fcntl
    import hashlib

    lock = cache_root() / "deepep-env-locks" / f"{hashlib.sha256(str(prefix).encode()).hexdigest()[:20]}.lock"
    try:
        # the prefix's folder is made only once there is something to put in it (_staging): a refused
        # install leaves no empty .pixi/envs behind; whether it could be made is known now
        try_create_in(prefix.parent)
        lock.parent.mkdir(parents=True, exist_ok=True)
        fh = open(lock, "a+")
    except OSError as exc:
        raise UserError(f"cannot install into {prefix}: {exc.strerror or exc} ({exc.filename or prefix.parent})",
                        field="--prefix", accepted="a prefix whose parent folder you can write") from None
    with fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            _clean_leftovers(prefix)   # whoever holds the lock next finishes what a killed holder left
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _fast_up_to_date(prefix: Path, env: str, lock_sha: str, subdir: str) -> Optional[dict[str, Any]]:
    m = read_marker(prefix)
    if not m or m.get("env") != env or m.get("lock_sha256") != lock_sha or m.get("subdir") != subdir:
        return None
    meta = prefix / "conda-meta"
    for p in m.get("packages", []):
        if not (meta / f"{p['name']}-{p['version']}-{p['build']}.json").is_file():
            return None
    return m


# Marker fields that come from the spec, not the lock: an edit of them (a spec's [env], say) needs no
# package change, but activate/run read them from the marker, so install must carry them over.
SPEC_FIELDS = ("spec_version", "platforms", "spec_env", "cuda")


def _refresh_spec_fields(pfx: Path, m: dict[str, Any], base: dict[str, Any]) -> str:
    """"up-to-date", or "updated" after rewriting the marker's spec fields to the spec's."""
    changed = {k: base[k] for k in SPEC_FIELDS if k in base and m.get(k) != base[k]}
    if not changed:
        if existing_marker(pfx) != marker_path(pfx):   # a legacy conda-meta/deepep-env.json: moved
            PrefixMarker(m).write(pfx)
        return "up-to-date"
    PrefixMarker({**m, **changed}).write(pfx)
    return "updated"


def write_marker(pfx: Path, marker: "dict[str, Any] | PrefixMarker") -> None:
    """The prefix's marker written by its one writer, :meth:`PrefixMarker.write`."""
    (marker if isinstance(marker, PrefixMarker) else PrefixMarker(marker)).write(pfx)


def install_env(env: str, project: Project, *, prefix: Optional[str | Path] = None, lock_path: Optional[str | Path] = None,
                mirrors: Iterable[str] = (), force: bool = False, progress: Optional[Progress] = None,
                ws: Optional[Workspace] = None) -> InstallResult:
    """``deepep-env install ENV``: the locked packages of ENV into ``prefix`` (default
    ``<project>/.pixi/envs/ENV``, :meth:`Project.prefix_for`). The spec supplies the marker's fields and the default mirror (its
    ``publish_url`` → this project's builder channel); a stale lock is installed with a warning.
    ``ws``: the command's workspace, so the spec is resolved once (here and by the lock check)."""
    ws = workspace(project, ws)
    r = ws.resolved(env)
    lock = Path(lock_path) if lock_path else default_lock_path(project, r.name)
    if not lock_path and (step := next_step(project, r.name, ws)).state not in ("locked", "unreadable"):
        # not in the project's lock: name the step that gets it there (never one that would be refused)
        what = f"the lock has no environment {r.name!r}" if lock.is_file() else "no lock to install from"
        raise UserError(f"{what} ({step.why})", file=lock,
                        accepted=f"`{step.command}` first" + (f"; {step.detail}" if step.detail else ""))
    pfx = Path(prefix).expanduser() if prefix else project.prefix_for(r.name)
    mirror_map = parse_mirrors(mirrors)
    for url, d in channel_mirrors().items():  # $DEEPEP_ENV_MIRRORS, after --mirror
        mirror_map.setdefault(url, d)
    if r.publish_url:
        # The team URL of the local channel maps to this machine's builder channel when it has the file.
        mirror_map.setdefault(r.publish_url if r.publish_url.endswith("/") else r.publish_url + "/", project.channel)

    def stale_warnings() -> list[str]:
        try:
            return [f"lock is stale: {x.message()}" for x in check_lock(r.name, project, lock_path=lock, ws=ws).reasons]
        except UserError as exc:
            return [f"lock not checked against the spec: {exc}"]

    realise = Realiser(r.name, r, project, lock, progress=progress)   # substitute, else build
    res = install_locked(lock, r.name, pfx, mirrors=mirror_map, force=force, marker=spec_marker(r),
                         warnings_fn=stale_warnings, project_root=project.root, realise=realise)
    res.notes += realise.notes
    return res


_SYSTEM_TREES = ("/proc", "/sys", "/dev", "/run")


def check_prefix(pfx: Path, project_root: Optional[Path] = None) -> Path:
    """The prefix an install may replace, or one clear line. An install assembles the env beside the
    prefix and swaps it in, removing what was there: so the prefix must be absent, an empty folder, or
    a conda environment (``conda-meta/``) — never `/`, a file, a system tree, the project checkout or
    a folder holding anything else."""
    pfx = Path(os.path.abspath(pfx))
    accepted = "an absent or empty folder, or an existing conda environment (with conda-meta/)"
    if pfx == Path(pfx.anchor):
        raise UserError("refusing to install into the root folder /", field="--prefix", accepted=accepted)
    if any(str(pfx) == t or str(pfx).startswith(t + "/") for t in _SYSTEM_TREES):
        raise UserError(f"refusing to install into {pfx}: a system tree", field="--prefix", accepted=accepted)
    if project_root is not None:
        root = Path(os.path.abspath(project_root))
        if pfx == root or root.is_relative_to(pfx):
            raise UserError(f"refusing to install into {pfx}: it holds the project checkout", field="--prefix",
                            accepted=accepted)
    if pfx.exists() or pfx.is_symlink():
        if not pfx.is_dir():
            raise UserError(f"refusing to install into {pfx}: it exists and is not a folder", field="--prefix",
                            accepted=accepted)
        if not (pfx / "conda-meta").is_dir() and any(pfx.iterdir()):
            raise UserError(f"refusing to install into {pfx}: a non-empty folder that is not a conda environment "
                            "(installing would replace its contents)", field="--prefix", accepted=accepted)
    return pfx


def install_locked(lock: str | Path, env: str, prefix: str | Path, *, mirrors: Optional[dict[str, Path]] = None,
                   force: bool = False, marker: Optional[dict[str, Any]] = None,
                   warnings_fn: Optional[Callable[[], Iterable[str]]] = None, project_root: Optional[Path] = None,
                   realise: Optional[Realiser] = None) -> InstallResult:
    """Install environment ``env`` of the lock at ``lock`` into ``prefix``, verified; no spec needed
    (``marker`` carries what the spec would add to the completion marker)."""
    t0 = time.perf_counter()
    lock = Path(lock)
    # read once, bounded: a FIFO or /dev/zero is named as such, a missing lock is "no lock"
    lock_sha = "sha256:" + hashlib.sha256(read_bytes(lock, what="lock", missing="no lock to install from",
                                                     accepted=f"run `deepep-env lock {env}` first")).hexdigest()
    pfx = check_prefix(Path(prefix).expanduser(), project_root)
    try:
        pfx = pfx.resolve()
    except OSError as exc:
        raise UserError(f"cannot use {pfx} as a prefix: {exc.strerror or exc}", field="--prefix") from None
    subdir = current_subdir()
    with _prefix_lock(pfx):
        if not force:
            m = _fast_up_to_date(pfx, env, lock_sha, subdir)
            if m is not None:
                status = _refresh_spec_fields(pfx, m, marker or {})
                return InstallResult(env=env, prefix=pfx, status=status, lock=lock, lock_sha256=lock_sha,
                                     subdir=subdir, packages=m.get("packages", []),
                                     seconds=time.perf_counter() - t0)
            adopted = _adopt(env, pfx, lock, lock_sha, subdir, dict(marker or {}))
            if adopted is not None:
                return InstallResult(env=env, prefix=pfx, status="up-to-date", lock=lock, lock_sha256=lock_sha,
                                     subdir=subdir, packages=adopted.get("packages", []),
                                     seconds=time.perf_counter() - t0,
                                     notes=["the prefix holds exactly the locked packages (pixi installed it): "
                                            "adopted, nothing reinstalled"])
        warnings = list(warnings_fn()) if warnings_fn else []
        res = _install(env, pfx, lock, lock_sha, subdir, dict(mirrors or {}), dict(marker or {}), t0, realise)
        res.warnings = warnings + res.warnings
        return res


def _adopt(env: str, pfx: Path, lock: Path, lock_sha: str, subdir: str,
           marker_base: dict[str, Any]) -> Optional[PrefixMarker]:
    """A prefix pixi (or rattler) installed from this lock, with no marker of ours: when it holds
    exactly the locked packages, write our marker beside pixi's state and leave every file as it is."""
    if has_marker(pfx) or not (pfx / "conda-meta").is_dir():
        return None
    data = read_lock(lock)
    le = data.env(env)
    plat = next((n for n, info in data.platforms.items() if info["subdir"] == subdir and le and n in le.packages), None)
    if le is None or plat is None:
        return None
    installed = installed_records(pfx)
    want = {(p.name, p.version, p.build, p.sha256) for p in le.packages[plat]}
    have = {(x.name.normalized, str(x.version), str(x.build), x.sha256.hex() if x.sha256 else None) for x in installed}
    if want != have:
        return None
    marker = new_marker(env, pfx, lock, lock_sha, subdir, marker_base, installed, le.packages[plat])
    marker.write(pfx)
    return marker


def _check_urls(recs: list[RepoDataRecord], channels: Iterable[str], lock: Path) -> None:
    """Each package URL is a file of a channel the lock names for the environment (the rule of
    ``lock --check``, ``base.channels.urls.package_path``), before anything is fetched or rebuilt: a URL
    with ``..%2f`` sent the install to rebuild, rewrote the build manifest, and blamed the rebuild
    (issue 39.11)."""
    bases = [c if c.endswith("/") else c + "/" for c in channels]
    for rec in recs:
        if package_path(rec.url, bases) is None:
            raise UserError(f"{rec.version} {rec.build}: the URL {redact(rec.url)} is not a package file of the lock's "
                            f"channels ({', '.join(redact(b) for b in bases)}); refusing to install", file=lock,
                            field=rec.name.normalized, accepted="a lock written by `deepep-env lock`, unmodified "
                                                                 "(`deepep-env lock ENV --check` names each such URL)")


def _install(env: str, pfx: Path, lock: Path, lock_sha: str, subdir: str, mirror_map: dict[str, Path],
             marker_base: dict[str, Any], t0: float, realise: Optional[Realiser] = None) -> InstallResult:
    data = read_lock(lock)
    le = data.env(env)
    if le is None:
        raise UserError(f"the lock has no environment {env!r}", file=lock, accepted=", ".join(data.envs) or "none")
    plat = next((n for n, info in data.platforms.items() if info["subdir"] == subdir and n in le.packages), None)
    if plat is None:
        raise UserError(f"the lock has no {subdir} platform for {env}", file=lock,
                        accepted=", ".join(sorted(le.packages)) or "none")
    pypi = [p.name for p in le.packages[plat] if p.kind == "pypi"]
    if pypi:
        raise UserError(f"the lock has PyPI packages ({', '.join(pypi[:5])}); deepep-env installs conda packages only",
                        file=lock)
    recs = data.conda_records(env, plat)
    _check_urls(recs, le.channels, lock)

    # Verify first, then swap: every archive is checked against the lock before anything is
    # written, the environment is assembled in a staging folder beside the prefix (files patched for
    # the final path), checked against the lock, and only then renamed into place. A refusal at any
    # step leaves the previous prefix exactly as it was, marker included.
    cl = make_client([u for u in le.channels if u.startswith(("http://", "https://", "s3://"))])
    verified, downloaded = fetch_verified(recs, lock_path=lock, mirrors=mirror_map, client_obj=cl, realise=realise)
    with _staging(pfx) as (stage, pkgs_cache):
        _link(recs, stage, pfx, pkgs_cache, cl, lock)
        installed = installed_records(stage)
        _check_installed(installed, le.packages[plat], stage, pfx, lock)
        marker = new_marker(env, pfx, lock, lock_sha, subdir, marker_base, installed, le.packages[plat])
        packages = marker["packages"]
        marker.write(stage)
        _swap(stage, pfx)
    return InstallResult(env=env, prefix=pfx, status="installed", lock=lock, lock_sha256=lock_sha, subdir=subdir,
                         packages=packages, verified=verified, downloaded=downloaded,
                         seconds=time.perf_counter() - t0)


@contextlib.contextmanager
def _staging(pfx: Path) -> Iterator[tuple[Path, Path]]:
    """A fresh staging prefix and a fresh package cache beside ``pfx``; both gone afterwards.

    The package cache is private to this install and extracted from archives verified a moment
    ago: files linked into the prefix can come from nowhere else (a shared cache can be rewritten
    by a build script through rattler-build's hard links, or by hand — field notes §3b)."""
    import tempfile

    pfx.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{pfx.name}.staging-{os.getpid()}-", dir=pfx.parent))
    cache = Path(tempfile.mkdtemp(prefix=f".{pfx.name}.pkgs-{os.getpid()}-", dir=pfx.parent))
    try:
        yield stage, cache
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)


LEFTOVER_MAX_AGE_S = 3600.0


def _clean_leftovers(pfx: Path) -> list[Path]:
    """What killed installs left beside ``pfx``: a swap cut between its renames is rolled back (the
    prefix is never missing), then their staging folders, package caches and parked old prefixes
    are removed. Called under the prefix lock, so no other install of ``pfx`` is running."""
    recover_swap(pfx)
    if not pfx.parent.is_dir():
        return []
    kinds = tuple(f".{pfx.name}.{kind}-" for kind in ("staging", "pkgs", "old"))
    stale = [p for p in sorted(pfx.parent.iterdir()) if p.name.startswith(kinds) and _abandoned(p)]
    for p in stale:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                p.unlink()
    return stale


def _abandoned(p: Path) -> bool:
    """A leftover whose installer is gone (or unknown), or over an hour old (its pid since reused)."""
    pid = owner_pid(p.name)
    try:
        age = time.time() - p.lstat().st_mtime
    except OSError:
        return False
    return pid is None or not pid_alive(pid) or age >= LEFTOVER_MAX_AGE_S


def _link(recs: list[RepoDataRecord], stage: Path, pfx: Path, cache: Path, cl: Client, lock: Path) -> None:
    import rattler

    with rattler_errors(f"install into {pfx} failed: {{error}}", file=lock, limit=400):
        asyncio.run(rattler.install(recs, stage, cache_dir=cache, installed_packages=[], show_progress=False,
                                    client=cl, alternative_target_prefix=pfx))


def _check_installed(installed: list, locked: list, stage: Path, pfx: Path, lock: Path) -> None:
    """Trust, but verify: the staged prefix holds exactly the locked packages, with the locked bytes."""
    want = {(p.name, p.version, p.build, p.sha256) for p in locked}
    have = {(x.name.normalized, str(x.version), str(x.build), x.sha256.hex() if x.sha256 else None) for x in installed}
    if want != have:
        extra = sorted(f"{n} {v} {b}" for n, v, b, _ in have - want)
        missing = sorted(f"{n} {v} {b}" for n, v, b, _ in want - have)
        raise UserError(f"{pfx} would not match the lock (missing: {', '.join(missing) or '-'}; "
                        f"extra: {', '.join(extra) or '-'}); the previous prefix is unchanged", file=lock)


def _swap(stage: Path, pfx: Path) -> None:
    """Put the verified staging prefix in place of ``pfx`` (two renames; the old one is then removed)."""
    old = None
    if pfx.exists() or pfx.is_symlink():
        old = pfx.with_name(f".{pfx.name}.old-{os.getpid()}")
        os.rename(pfx, old)
    try:
        os.rename(stage, pfx)
    except OSError:
        if old is not None:
            os.rename(old, pfx)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def uninstall(prefix: str | Path) -> None:  # used by tests and `install --force` users who want a clean slate
    p = Path(prefix)
    for m in (marker_path(p), p / LEGACY_RELPATH):
        with contextlib.suppress(FileNotFoundError):
            m.unlink()
    shutil.rmtree(p, ignore_errors=True)
