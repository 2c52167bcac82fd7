"""Fill the source cache: download (archive URLs, then git), or import local copies (``--from DIR``).

Every source and patch is verified by content before it enters the cache: a source by
``tree_sha256`` of the unpacked tree, a patch by ``sha256`` of its bytes. URLs, mirrors and file
names are only where to look; they never enter a build id (docs/build-id.md §3), which is why a
tarball from GitHub, a ``git archive`` of the same revision and a mirror's copy all land in the
same cache entry.

A source without a recorded ``tree_sha256`` is *unpinned*: fetching it computes the hash and
reports it for review (``nix flake lock``'s habit, field notes §5 "never invent a hash"); the build
refuses it until the hash is written into ``recipes/<package>/sources.toml``. An unpinned source whose
archive is pinned (``archive_sha256``, e.g. Spack's) is hashed only from that archive.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal, Optional, Sequence

from deepep_env.base import progress
from deepep_env.base.argv import operand
from deepep_env.base.children import cleanup_on_sigterm
from deepep_env.base.errors import UserError
from deepep_env.formats.stamps import FETCH_REPORT
from deepep_env.base.hashing import file_sha256, file_tree_sha256, tree_sha256
from deepep_env.sources.cache import SourceCache, is_archive, unpack
from deepep_env.sources.submodules import place_submodules, submodules_of

Kind = Literal["source", "patch"]
Status = Literal["cached", "fetched", "imported", "recorded", "missing"]

DOWNLOAD_TIMEOUT_S = 60                  # each read; the whole download is bounded by the two below
DEADLINE_ENV, DEFAULT_DEADLINE_S = "DEEPEP_ENV_FETCH_DEADLINE", 1800
MAX_BYTES_ENV, DEFAULT_MAX_BYTES = "DEEPEP_ENV_FETCH_MAX_BYTES", 1 << 30   # the largest source (a wheel) is 153 MB
MOST_DEADLINE_S, MOST_BYTES = 7 * 86400, 1 << 40     # the bounds of the bounds: a week, 1 TiB


class DownloadBound(OSError):
    """A download passed its size cap or its deadline (issue 39.6: an endless server gave 2,450 MiB in
    20 s and went on, the 60 s timeout being per read)."""


@dataclass(frozen=True)
class Want:
    """One thing a build needs from the cache. ``digest`` None = not pinned by content yet."""

    package: str
    kind: Kind
    name: str
    digest: Optional[str]
    urls: tuple[str, ...] = ()
    git: Optional[str] = None
    rev: Optional[str] = None
    tag: Optional[str] = None
    submodules: tuple = ()   # sources/submodules.Submodule, placed into an archive's tree before hashing
    # A single-file source (a pinned wheel): the download is not unpacked but kept as this file, the
    # only entry of its tree (hashing.file_tree_sha256); ``--from`` matches a copy by the file's sha256.
    file: Optional[str] = None
    recipe: Optional[str] = None   # the recipe folder whose sources.toml pins it, when not ``package``
    # The archive file's own sha256 (``archive_sha256``: its publisher's or a packager's, e.g. Spack's):
    # while the tree is unpinned, a download or a ``--from`` copy is checked against it before it is
    # unpacked, so the tree hash recorded at first fetch comes only from that archive.
    archive: Optional[str] = None
    size: Optional[int] = None     # the file's size where the catalogue records it (wheels): the download's cap

    @property
    def label(self) -> str:
        return f"{self.package}: {self.kind} {self.name}"

    @property
    def catalog(self) -> str:
        return f"recipes/{self.recipe or self.package}/sources.toml"


@dataclass
class FetchItem:
    want: Want
    status: Status
    digest: Optional[str] = None
    path: Optional[Path] = None
    origin: Optional[str] = None    # URL, git remote or local file it came from (metadata only)

    def to_json(self) -> dict:
        return {
            "package": self.want.package, "kind": self.want.kind, "name": self.want.name,
            "status": self.status, "digest": self.digest, "pinned": self.want.digest is not None,
            "path": str(self.path) if self.path else None, "origin": self.origin,
        }


@dataclass
class FetchReport:
    cache: Path
    items: list[FetchItem] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)   # --from entries that matched nothing

    @property
    def recorded(self) -> list[FetchItem]:
        return [i for i in self.items if i.status == "recorded"]

    @property
    def missing(self) -> list[FetchItem]:
        return [i for i in self.items if i.status == "missing"]

    def to_json(self) -> dict:
        return {"format": FETCH_REPORT.stamp, "cache": str(self.cache),
                "items": [i.to_json() for i in self.items], "ignored": self.ignored}


# --- wants from build nodes ---------------------------------------------------------------------

def wants_for_nodes(nodes: Iterable) -> list[Want]:
    """What a list of :class:`deepep_env.builder.plan.BuildNode` needs from the source cache.

    Sources a recipe carries itself (``meta["own_sources"]``: its own ``source:`` entries, used as
    written) are rattler-build's business, not the cache's; a tree read from this machine
    (``meta["local_source"]``: deepep-env's own code) is put into the cache by the builder.
    """
    out: list[Want] = []
    seen: set[tuple] = set()
    for n in nodes:
        own = set(n.meta.get("own_sources", ()))
        files = n.meta.get("file_sources", {})
        for name, pin in n.sources.items():
            if name in own or n.meta.get("local_source"):
                continue   # a recipe's own source; deepep-env's own tree (the builder imports it)
            w = Want(n.package, "source", name, pin.tree_sha256, tuple(pin.urls), pin.git, pin.rev, pin.tag,
                     submodules_of(pin), files.get(name), n.meta.get("catalog_recipe"), pin.archive_sha256,
                     n.meta.get("file_sizes", {}).get(name))
            key = (w.kind, w.digest or (w.package, w.name))
            if key not in seen:
                seen.add(key)
                out.append(w)
        for p in n.patches:
            w = Want(n.package, "patch", p.name, p.pin.sha256, (p.pin.url,))
            key = (w.kind, w.digest or (w.package, w.name))
            if key not in seen:
                seen.add(key)
                out.append(w)
    return out


# --- verification -------------------------------------------------------------------------------

def _mismatch(want: Want, got: str, origin: str) -> UserError:
    return UserError(
        f"{want.kind} {want.name} of package {want.package}: content hash mismatch from {origin}: "
        f"expected {want.digest}, got {got}; nothing was written to the source cache",
        accepted="a copy of the pinned upstream revision, or a reviewed new pin in "
                 f"{want.catalog}",
    )


def _file_mismatch(want: Want, got: str, origin: str) -> UserError:
    """A file whose own sha256 is pinned (a single-file source, or an unpinned tree's archive) with
    other bytes."""
    what = f"the pinned {want.file}" if want.file is not None else f"the archive {want.catalog} pins ({want.archive})"
    return UserError(
        f"{want.kind} {want.name} of package {want.package}: {origin} has sha256 {got}, which is not {what}; "
        "nothing was written to the source cache",
        accepted=f"the file whose sha256 {want.catalog} pins")


def _accept_tree(want: Want, root: Path, cache: SourceCache, origin: str) -> FetchItem:
    """Hash an unpacked tree (in cache scratch), verify it against the pin, move it in."""
    got = tree_sha256(root)
    if want.digest is not None and got != want.digest:
        raise _mismatch(want, got, origin)
    digest, path = cache.add_tree(root, digest=got, move=True)
    return FetchItem(want, "fetched" if want.digest else "recorded", digest, path, origin)


def _accept_patch(want: Want, data: bytes, cache: SourceCache, origin: str, got: str) -> FetchItem:
    if want.digest is not None and got != want.digest:
        raise _mismatch(want, got, origin)
    path = cache.add_patch(data, got)
    return FetchItem(want, "fetched" if want.digest else "recorded", got, path, origin)


def _file_tree(path: Path, name: str, dest: Path) -> Path:
    """``dest`` holding only a copy of ``path`` as ``name`` (a regular, non-executable file): a
    single-file source's tree."""
    dest.mkdir(parents=True)
    shutil.copyfile(path, dest / name)
    os.chmod(dest / name, 0o644)
    return dest


# --- network ------------------------------------------------------------------------------------

def _bound(env: str, default: int, most: int) -> int:
    """``$env`` as ASCII digits from 1 to ``most`` (a 400-digit deadline overflowed the clock, ``²`` passed
    ``isdigit()``: issue 52.11), else one line; ``default`` when unset."""
    raw = os.environ.get(env, "")
    if not raw:
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 20 or not 1 <= int(raw) <= most:
        raise UserError(f"{env}={raw!r} is not a positive whole number of at most {most}", field=env,
                        accepted=f"seconds or bytes in ASCII digits, 1 to {most}, e.g. {default}")
    return int(raw)


def _read_within(resp: Any, deadline: float) -> bytes:
    """One read of at most 1 MiB that waits no longer than the deadline (nor 60 s): a server that sent
    its headers and then nothing held a fetch 60 s past a 3 s deadline (issue 52.11)."""
    sock = getattr(getattr(getattr(resp, "fp", None), "raw", None), "_sock", None)
    left = deadline - time.monotonic()
    if sock is not None:
        sock.settimeout(max(0.05, min(DOWNLOAD_TIMEOUT_S, left)))
    try:
        return bytes(resp.read1(1 << 20))
    except socket.timeout:
        if left <= DOWNLOAD_TIMEOUT_S:
            raise DownloadBound("nothing received before the deadline") from None
        raise


def _download(url: str, dest: Path, *, size: Optional[int] = None) -> None:
    """``url`` into ``dest``, bounded in all: at most ``size`` bytes where the catalogue records it (else
    ``$DEEPEP_ENV_FETCH_MAX_BYTES``, 1 GiB) and ``$DEEPEP_ENV_FETCH_DEADLINE`` seconds (1800), every
    wait included; each read within 60 s. A declared ``Content-Length`` over the cap is refused before
    anything is read."""
    cap = size if size is not None else _bound(MAX_BYTES_ENV, DEFAULT_MAX_BYTES, MOST_BYTES)
    what = "the catalogued size" if size is not None else MAX_BYTES_ENV
    limit_s = _bound(DEADLINE_ENV, DEFAULT_DEADLINE_S, MOST_DEADLINE_S)
    deadline = time.monotonic() + limit_s
    req = urllib.request.Request(url, headers={"User-Agent": "deepep-env"})
    shown = progress.current()
    label = url.rsplit("/", 1)[-1] or url
    with urllib.request.urlopen(req, timeout=min(DOWNLOAD_TIMEOUT_S, limit_s)) as resp, open(dest, "wb") as fh:
        declared = resp.headers.get("Content-Length") if resp.headers else None
        if declared and declared.isascii() and declared.isdigit() and int(declared) > cap:
            raise DownloadBound(f"{declared} bytes declared, over {what} ({cap} bytes)")
        shown.start(label, int(declared) if declared and declared.isdigit() else size)
        got = 0
        try:
            while True:     # one read at a time, so the deadline is looked at
                try:
                    chunk = _read_within(resp, deadline)
                except DownloadBound:
                    raise DownloadBound(f"still downloading after {limit_s} s ({DEADLINE_ENV}); stopped at {got} bytes") \
                        from None
                if not chunk:
                    break
                got += len(chunk)
                if got > cap:
                    raise DownloadBound(f"more than {what} ({cap} bytes); stopped")
                if time.monotonic() > deadline:
                    raise DownloadBound(f"still downloading after {limit_s} s ({DEADLINE_ENV}); stopped at {got} bytes")
                fh.write(chunk)
                shown.advance(label, len(chunk))
        finally:
            shown.finish(label)


def _strip_vcs(root: Path) -> None:
    # Submodules leave a ``.git`` *file* in each checkout; none of it is source content.
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (".git",):
            if name in dirnames:
                shutil.rmtree(Path(dirpath) / name)
                dirnames.remove(name)
            if name in filenames:
                os.unlink(Path(dirpath) / name)


def _git_checkout(want: Want, dest: Path) -> None:
    _git_clone_at(str(want.git), str(want.rev or want.tag), dest)


def _git_clone_at(remote: str, ref: str, dest: Path) -> None:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}

    def git(*args: str, cwd: Optional[Path] = None) -> None:
        subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True)

    git("clone", "--quiet", "--no-checkout", "--", operand(remote, field="git"), str(dest))
    git("-c", "advice.detachedHead=false", "checkout", "--quiet", operand(ref, field="rev/tag"), cwd=dest)
    # DeepEP 2.x has the fmt submodule, which archives leave out (recipes/deep-ep/sources.toml).
    git("submodule", "update", "--init", "--recursive", "--quiet", cwd=dest)
    _strip_vcs(dest)


def _fetch_one(want: Want, cache: SourceCache) -> FetchItem:
    errors: list[str] = []
    for url in want.urls:
        scratch = cache.scratch("dl-")
        try:
            blob = scratch / "download"
            try:
                _download(url, blob, size=want.size)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                errors.append(f"{url}: {getattr(exc, 'reason', exc)}")
                continue
            if want.kind == "patch":
                data = blob.read_bytes()
                return _accept_patch(want, data, cache, url, file_sha256(blob))
            if want.file is not None:
                fsha = file_sha256(blob)
                if want.digest is not None and file_tree_sha256(want.file, fsha) != want.digest:
                    raise _file_mismatch(want, fsha, url)
                return _accept_tree(want, _file_tree(blob, want.file, scratch / "tree"), cache, url)
            if want.digest is None and want.archive is not None and (fsha := file_sha256(blob)) != want.archive:
                raise _file_mismatch(want, fsha, url)   # a pinned tree is checked as a tree, below
            if not is_archive(blob):
                errors.append(f"{url}: not a tar or zip archive")
                continue
            root = unpack(blob, scratch / "unpacked")
            err = place_submodules(want.submodules, root, scratch, _download, _git_clone_at)
            if err:   # an archive without its submodules can never match the pin: try the next copy
                errors.append(f"{url}: {err}")
                continue
            return _accept_tree(want, root, cache, url)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    # a checkout has no archive to check: an unpinned tree is recorded only from the pinned archive
    if want.kind == "source" and want.git and (want.rev or want.tag) and (want.digest or not want.archive):
        scratch = cache.scratch("git-")
        try:
            dest = scratch / "checkout"
            try:
                _git_checkout(want, dest)
            except (subprocess.CalledProcessError, OSError) as exc:
                detail = (getattr(exc, "stderr", "") or str(exc)).strip().splitlines()
                errors.append(f"git {want.git} {want.rev or want.tag}: {detail[-1] if detail else exc}")
            else:
                return _accept_tree(want, dest, cache, f"git+{want.git}@{want.rev or want.tag}")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    where = "; ".join(errors) if errors else "no URL or git revision is catalogued"
    raise UserError(f"{want.kind} {want.name} of package {want.package}: could not fetch: {where}",
                    accepted=f"a reachable URL in {want.catalog}, or "
                             "`deepep-env fetch ENV --from DIR` with a local copy")


# --- import from a local folder ----------------------------------------------------------------

def _name_matches(want: Want, filename: str) -> bool:
    """Only for *unpinned* sources, which have no hash to match: a file named after the revision
    or tag (``nvshmem-<rev>.tar.gz``, ``nvshmem-v3.5.19-1.tar.gz``)."""
    keys = [k for k in (want.rev, want.rev[:7] if want.rev else None, want.tag) if k]
    return any(k in filename for k in keys)


def _meant_for(want: Want, filename: str) -> bool:
    """A local copy named like one of the want's upstream files (its URL's basename, revision or tag)."""
    return _name_matches(want, filename) or any(filename == u.rstrip("/").rsplit("/", 1)[-1] for u in want.urls)


@dataclass
class _Importer:
    """What ``import_dir`` still looks for (by digest; unpinned wants by file name) and what it found."""

    cache: SourceCache
    open_src: dict[str, Want]      # digest -> source not in the cache yet
    open_patch: dict[str, Want]    # digest -> patch not in the cache yet
    unpinned: list[Want]           # no digest: matched by name (or by archive_sha256), hash recorded
    got: list[FetchItem] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return not (self.open_src or self.open_patch or self.unpinned)

    def _claim(self, kind: str, digest: str, filename: str) -> tuple[Optional[Want], Status]:
        """The want an entry of this content is for ("imported"), else an unpinned one of this kind
        named like the file (its hash is "recorded"), else None; a claimed want is no longer open."""
        w = (self.open_src if kind == "source" else self.open_patch).pop(digest, None)
        if w is not None:
            return w, "imported"
        w = next((u for u in self.unpinned if u.kind == kind and u.archive is None and _name_matches(u, filename)),
                 None)
        if w is not None:
            self.unpinned.remove(w)
        return w, "recorded"

    def tree(self, entry: Path) -> None:
        digest = tree_sha256(entry)
        w = self.open_src.pop(digest, None)
        if w is None:
            self.ignored.append(entry.name)
            return
        d, path = self.cache.add_tree(entry, digest=digest)
        self.got.append(FetchItem(w, "imported", d, path, str(entry)))

    def patch(self, entry: Path) -> None:
        digest = file_sha256(entry)
        w, status = self._claim("patch", digest, entry.name)
        if w is None:
            self.ignored.append(entry.name)
            return
        self.got.append(FetchItem(w, status, digest, self.cache.add_patch(entry.read_bytes(), digest), str(entry)))

    def single_file(self, entry: Path) -> bool:
        """A local copy of a single-file source (a wheel), matched by its sha256: True if claimed."""
        files = [w for w in self.open_src.values() if w.file is not None]
        if not files:
            return False
        fsha = file_sha256(entry)
        for w in files:
            assert w.digest is not None and w.file is not None
            if file_tree_sha256(w.file, fsha) != w.digest:
                continue
            scratch = self.cache.scratch("imp-")
            try:
                root = _file_tree(entry, w.file, scratch / "tree")
                got = tree_sha256(root)
                if got != w.digest:   # only if the file changed while it was read
                    raise _mismatch(w, got, str(entry))
                del self.open_src[w.digest]
                d, path = self.cache.add_tree(root, digest=got, move=True)
                self.got.append(FetchItem(w, "imported", d, path, str(entry)))
                return True
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        named = next((w for w in files if w.file == entry.name), None)
        if named is not None:   # the file meant for this pin, with other content
            raise _file_mismatch(named, fsha, str(entry))
        return False

    def _by_archive(self, entry: Path) -> Optional[Want]:
        """The unpinned source whose ``archive_sha256`` this file has (claimed); a file named for one
        such source with other bytes is refused."""
        pinned = [w for w in self.unpinned if w.kind == "source" and w.archive is not None]
        if not pinned:
            return None
        fsha = file_sha256(entry)
        w = next((u for u in pinned if u.archive == fsha), None)
        if w is not None:
            self.unpinned.remove(w)
            return w
        named = next((u for u in pinned if _meant_for(u, entry.name)), None)
        if named is not None:
            raise _file_mismatch(named, fsha, str(entry))
        return None

    def archive(self, entry: Path) -> None:
        by_archive = self._by_archive(entry)
        scratch = self.cache.scratch("imp-")
        try:
            root = unpack(entry, scratch / "unpacked")
            digest = tree_sha256(root)
            w, status = (by_archive, "recorded") if by_archive else self._claim("source", digest, entry.name)
            if w is None:
                named = next((x for x in self.open_src.values() if _meant_for(x, entry.name)), None)
                if named is not None:   # the copy meant for this source, with other content
                    raise _mismatch(named, digest, str(entry))
                self.ignored.append(entry.name)
                return
            d, path = self.cache.add_tree(root, digest=digest, move=True)
            self.got.append(FetchItem(w, status, d, path, str(entry)))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def import_dir(from_dir: Path, wants: Sequence[Want], cache: SourceCache) -> tuple[list[FetchItem], list[str]]:
    """Hash every entry of ``from_dir`` (archives, unpacked trees, patch files); store each one
    that matches a wanted digest. Returns (imported items, names of entries that matched nothing)."""
    from_dir = Path(from_dir)
    if not from_dir.is_dir():
        raise UserError("not a folder", file=from_dir, field="--from",
                        accepted="a folder of source tarballs, unpacked trees and patch files")
    imp = _Importer(
        cache,
        open_src={w.digest: w for w in wants if w.kind == "source" and w.digest and not cache.tree(w.digest)},
        open_patch={w.digest: w for w in wants if w.kind == "patch" and w.digest and not cache.patch(w.digest)},
        unpinned=[w for w in wants if w.digest is None],
    )
    for entry in sorted(from_dir.iterdir()):
        if imp.done:
            break
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            imp.tree(entry)
        elif entry.is_file():
            if imp.single_file(entry):
                continue
            (imp.archive if is_archive(entry) else imp.patch)(entry)
    return imp.got, imp.ignored


# --- the entry point ----------------------------------------------------------------------------

def fetch(wants: Sequence[Want], cache: SourceCache | Path, *, offline: bool = False,
          from_dir: Optional[Path] = None) -> FetchReport:
    """Make every wanted source and patch present and verified in ``cache``.

    Order: what the cache already has; then ``from_dir`` (local upstream copies, matched by
    content); then, unless ``offline``, each catalogued URL in turn and finally ``git`` at the
    pinned revision. Offline, anything still absent is reported ``missing`` (the caller decides
    whether that is an error). A content mismatch is always an error and writes nothing.
    """
    cache = cache if isinstance(cache, SourceCache) else SourceCache(Path(cache))
    cache.sweep()
    with cleanup_on_sigterm():          # a terminated fetch removes its scratch on the way out
        return _fetch(wants, cache, offline=offline, from_dir=from_dir)


def _fetch(wants: Sequence[Want], cache: SourceCache, *, offline: bool, from_dir: Optional[Path]) -> FetchReport:
    report = FetchReport(cache.root)
    done: dict[int, FetchItem] = {}
    if from_dir is not None:
        imported, report.ignored = import_dir(from_dir, wants, cache)
        by_want = {id(i.want): i for i in imported}
        for i, w in enumerate(wants):
            if id(w) in by_want:
                done[i] = by_want[id(w)]
    for i, w in enumerate(wants):
        if i in done:
            report.items.append(done[i])
            continue
        have = (cache.tree(w.digest) if w.kind == "source" else cache.patch(w.digest)) if w.digest else None
        if have is not None:
            report.items.append(FetchItem(w, "cached", w.digest, have))
        elif offline:
            report.items.append(FetchItem(w, "missing", w.digest))
        else:
            report.items.append(_fetch_one(w, cache))
    return report


def unpinned_error(w: Want, hint: str, more: str = "") -> UserError:
    """The one line for a source a build cannot use because its tree is not pinned by content yet."""
    local = f"the archive whose sha256 is {w.archive}" if w.archive else "the upstream archive"
    return UserError(
        f"package {w.package}: {w.kind} {w.name} is not pinned by content yet, so it cannot be built{more}",
        file=w.catalog,
        accepted=f"run `{hint}` on a machine with network, or `{hint} --from DIR` with {local}, and record "
                 f"the printed hash in {w.catalog}")


def require_present(wants: Sequence[Want], cache: SourceCache, *, offline: bool, env: str | None = None) -> None:
    """Raise one clear line for the first source a build cannot use: unpinned, or absent offline."""
    hint = f"deepep-env fetch {env}" if env else "deepep-env fetch"
    for w in wants:
        if w.digest is None:
            raise unpinned_error(w, hint)
    # every digest is set here (the loop above raised otherwise); the test narrows it for the checker
    missing = [w for w in wants if w.digest is not None
               and not (cache.tree(w.digest) if w.kind == "source" else cache.patch(w.digest))]
    if missing and offline:
        w = missing[0]
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise UserError(
            f"package {w.package}: {w.kind} {w.name} ({w.digest}) is not in the source cache "
            f"{cache.root} and --offline is set{more}",
            accepted=f"`{hint}` with network, or `{hint} --from DIR` with local upstream copies")
