"""Same inputs, same bytes: rewrite a freshly built ``.conda`` so that nothing in it depends on when
it was built (docs/build-id.md §7 "Reproducible bytes").

py-rattler-build 0.73 stamps every archive member with the build time, writes the build time into
``info/index.json`` (``timestamp``) and the zip entries, and ignores ``SOURCE_DATE_EPOCH``
(measured). What this module changes, and nothing else:

- every tar member: ``mtime`` = the package's epoch, uid/gid 0, no user/group names, members in
  byte order of their names, PAX format;
- ``info/index.json``: ``timestamp`` = epoch in milliseconds (conda's unit); the build time in
  ``info/recipe/rendered_recipe.yaml`` (``build_configuration.timestamp``) = the epoch;
- the channels rattler-build records (``info/about.json``, the rendered recipe): a mirror a build
  read a channel from (``$DEEPEP_ENV_MIRRORS``, a folder on one machine) is written as the
  channel's own URL — the one the build id names (found on GPUs: the same id built with the repack
  channel at another path gave other bytes);
- the zip container: fixed entry times, members in the original order (``metadata.json``,
  ``pkg-*``, ``info-*``), stored uncompressed as conda expects;
- compression: zstd at a fixed level, one frame, no content-size-dependent threading;
- timestamp pycs (``__pycache__/*.pyc`` whose PEP 552 flags are 0) are dropped, with their
  ``info/paths.json`` entries: rattler-build compiles a package's .py files when python is in its
  host env, in a temporary folder of a random name (in ``co_filename``) and with the build's clock
  in the header (seen on GPUs: conda-mode DeepEP, one id, three byte strings on three machines,
  every pyc different and nothing else). Such a pyc is stale by construction here (its source
  carries the epoch, not that clock), so Python never used it; it recompiles at import. A
  hash-based pyc a recipe writes itself is kept;
- ``info/recipe/``: exactly the recipe files the build id hashes, as regular files of mode 0644
  (:func:`recipe_members`), beside rattler-build's rendered recipe and variant config. Its copy of
  the recipe folder also held files outside the id (``sources.toml``) and the files' modes.

Every other payload byte (and so the other ``info/paths.json`` entries) is untouched. The epoch is derived
from the build id (:func:`epoch_for`), never from a clock: the id is the hash of every input, so the
same inputs give the same epoch on every machine.
"""
from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path
from typing import IO, AbstractSet, Optional

from deepep_env.base.errors import UserError
from deepep_env.base.hashing import digest, file_sha256, recipe_digest, recipe_files
from deepep_env.base.readfile import MAX_CONFIG_BYTES, read_regular

# 2020-01-01T00:00:00Z: the epochs of our packages fall in [2020-01-01, 2023-03-03).
_EPOCH_BASE = 1577836800
_EPOCH_SPAN = 100_000_000
ZSTD_LEVEL = 3           # rattler-build's default for .conda; level does not affect the payload
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)   # the earliest time a zip entry can carry


def epoch_for(build_id: str) -> int:
    """A timestamp that is a function of the build id alone (``sha256:<hex>``)."""
    hexpart = build_id.split(":", 1)[-1]
    return _EPOCH_BASE + int(hexpart[:12] or "0", 16) % _EPOCH_SPAN


def _zstd_decompress_to(src: "IO[bytes]", dest: Path) -> None:
    """Decompress a stream into a file (a payload tar can be larger than memory allows twice)."""
    import zstandard

    with open(dest, "wb") as out:
        zstandard.ZstdDecompressor().copy_stream(src, out)


def _zstd_compress(data: bytes) -> bytes:
    import zstandard

    # threads=0: zstd's single-threaded path, whose output does not depend on the machine.
    return zstandard.ZstdCompressor(level=ZSTD_LEVEL, threads=0, write_content_size=True).compress(data)


def _fix_index(data: bytes, epoch: int) -> bytes:
    obj = json.loads(data)
    obj["timestamp"] = epoch * 1000
    return (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode()


# rattler-build records the build time in the rendered recipe it ships (build_configuration.timestamp).
_RENDERED_TS = re.compile(rb"^(\s*timestamp: )\d{4}-\d\d-\d\dT[0-9:.]+Z$", re.M)


def _fix_rendered(data: bytes, epoch: int) -> bytes:
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch)).encode()
    return _RENDERED_TS.sub(lambda m: m.group(1) + iso, data)


_FIXERS = {"info/index.json": _fix_index, "info/recipe/rendered_recipe.yaml": _fix_rendered}
_CHANNEL_FILES = ("info/about.json", "info/recipe/rendered_recipe.yaml")


def _fix_channels(data: bytes, aliases: dict[str, str]) -> bytes:
    """Each mirror URL (with or without its trailing slash) → the channel's own URL."""
    for mirror, canonical in sorted(aliases.items(), key=lambda kv: -len(kv[0])):
        for a, b in ((mirror, canonical), (mirror.rstrip("/"), canonical.rstrip("/"))):
            data = data.replace(a.encode(), b.encode())
    return data


# What the builder adds to every package's info/: the build id and its pre-image (docs/build-id.md §2),
# so a package says what it was built from — the host externals' fingerprints included.
BUILD_INPUTS_MEMBER = "info/deepep-env/build-inputs.json"


RECIPE_MEMBER_DIR = "info/recipe/"


# What rattler-build itself writes into info/recipe/ (from the recipe, the variant and the context,
# all in the id); every other member there is a copy of the recipe folder.
RECIPE_GENERATED = frozenset({RECIPE_MEMBER_DIR + "rendered_recipe.yaml", RECIPE_MEMBER_DIR + "variant_config.yaml"})


def recipe_members(recipe_dir: Path, expected: str) -> dict[str, bytes]:
    """``info/recipe/<path>`` → content for exactly the files the build id hashes
    (:func:`deepep_env.base.hashing.recipe_files`), read once and checked against the id's recipe hash.

    rattler-build copies the whole recipe folder into ``info/recipe/``: files the id leaves out
    (``sources.toml``, which pins *every* version; a ``__pycache__``) and the files' modes would reach
    the bytes without moving the id. Issue 37: pins for NVSHMEM 3.3.9 and 3.2.5 added to
    ``recipes/nvshmem/sources.toml`` gave NVSHMEM 3.4.5 new bytes under its old id. So the package
    gets these files, as regular files of mode 0644 (a link as the file it names), and nothing else;
    a folder that changed since the id was computed is refused, not packaged."""
    files = {rel: read_regular(p.resolve(), 4 * MAX_CONFIG_BYTES) for rel, p in recipe_files(recipe_dir)}
    if recipe_digest((rel, digest(b)) for rel, b in files.items()) != expected:
        raise UserError("the recipe folder changed while it was being built: the package would not be what its "
                        "build id names; nothing stored", file=Path(recipe_dir), accepted="run the build again")
    return {RECIPE_MEMBER_DIR + rel: b for rel, b in files.items()}


def _written_members(src: tarfile.TarFile, rw: "_Rewrite") -> tuple[dict[str, bytes], set[str]]:
    """The members the info tar gets as regular files (``rw.extra`` not there yet, ``rw.recipe`` all)
    and the names it loses (the recipe folder's copy; rattler-build's own info/recipe files stay)."""
    have = set(src.getnames())
    if "info/index.json" not in have:   # info/ lives in the info-*.tar.zst only
        return {}, set()
    written = {n: b for n, b in (rw.extra or {}).items() if n not in have}
    lost: set[str] = set()
    if rw.recipe is not None:
        lost = {n for n in have if n.startswith(RECIPE_MEMBER_DIR) and n not in RECIPE_GENERATED}
        written.update(rw.recipe)
    return written, lost


def _is_timestamp_pyc(name: str, head: bytes) -> bool:
    """A CPython 3.7+ pyc whose header holds a source mtime (PEP 552 flags 0), not a source hash."""
    return name.endswith(".pyc") and "/__pycache__/" in f"/{name}" and len(head) >= 16 and head[4:8] == b"\0\0\0\0"


def stale_pycs(tar_path: Path) -> set[str]:
    """The timestamp pycs among a payload tar's regular members (module docstring)."""
    found = set()
    with tarfile.open(tar_path, mode="r:") as src:
        for m in src:
            if m.isreg() and m.name.endswith(".pyc"):
                f = src.extractfile(m)
                if f is not None and _is_timestamp_pyc(m.name, f.read(16)):
                    found.add(m.name)
    return found


def _drop_paths(data: bytes, drop: AbstractSet[str]) -> bytes:
    """``info/paths.json`` without the entries of dropped members (rewritten only when one goes)."""
    obj = json.loads(data)
    kept = [p for p in obj.get("paths", []) if p.get("_path") not in drop]
    if len(kept) == len(obj.get("paths", [])):
        return data
    obj["paths"] = kept
    return (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode()


@dataclasses.dataclass(frozen=True)
class _Rewrite:
    """What :func:`normalize_conda` changes in each tar of a package (its arguments, plus the pycs to drop)."""
    epoch: int
    aliases: Optional[dict[str, str]] = None
    extra: Optional[dict[str, bytes]] = None
    recipe: Optional[dict[str, bytes]] = None
    drop: frozenset[str] = frozenset()

    def content(self, name: str, data: bytes) -> bytes:
        """A regular member's new content: time fixers, then dropped pycs' paths, then channel aliases."""
        if name in _FIXERS:
            data = _FIXERS[name](data, self.epoch)
        if self.drop and name == "info/paths.json":
            data = _drop_paths(data, self.drop)
        if self.aliases and name in _CHANNEL_FILES:
            data = _fix_channels(data, self.aliases)
        return data

    def fixed(self, m: tarfile.TarInfo) -> tarfile.TarInfo:
        m.mtime, m.uid, m.gid, m.uname, m.gname = self.epoch, 0, 0, "", ""
        return m


def _as_file(m: tarfile.TarInfo, data: bytes) -> tarfile.TarInfo:
    """``m`` made a regular file of ``data`` (an added info file, or a recipe file)."""
    m.type, m.linkname, m.size, m.mode = tarfile.REGTYPE, "", len(data), 0o644
    m.pax_headers = {}
    return m


def _retar(src_path: Path, rw: _Rewrite, out_path: Path) -> None:
    """Write to ``out_path`` a tar with the members and contents of ``src_path`` (plus ``rw.extra`` files in
    the info tar, ``rw.recipe`` in place of the recipe folder's copy, less the ``rw.drop`` members and their
    ``info/paths.json`` entries), in name order, with fixed metadata."""
    with tarfile.open(src_path, mode="r:") as src, open(out_path, "wb") as out:
        _retar_members(src, rw, out)


class _Outside(ValueError):
    """A tar member whose name (or hard link target) leaves the prefix."""


def _member_name(m: tarfile.TarInfo) -> None:
    """A member lands inside the prefix: no absolute name, no ``..`` or empty component, and a hard
    link's target the same (issue 52.12: such members were repacked as they came)."""
    for what, name in (("member", m.name), ("hard link target of " + repr(m.name), m.linkname if m.islnk() else "")):
        parts = name.rstrip("/").split("/")
        if name and (name.startswith("/") or ".." in parts or "" in parts):
            raise _Outside(f"package {what} {name!r} would be written outside the environment's prefix")


def _retar_members(src: tarfile.TarFile, rw: _Rewrite, out: "IO[bytes]") -> None:
    for m in src.getmembers():
        _member_name(m)
    written, lost = _written_members(src, rw)
    kept = [m for m in src.getmembers() if m.name not in rw.drop and m.name not in lost and m.name not in written]
    members = sorted(kept + [tarfile.TarInfo(n) for n in written], key=lambda m: m.name.encode())
    with tarfile.open(fileobj=out, mode="w:", format=tarfile.PAX_FORMAT) as dst:
        for m in members:
            payload = written.get(m.name)
            if payload is not None:
                dst.addfile(rw.fixed(_as_file(m, payload)), io.BytesIO(payload))
                continue
            f = src.extractfile(m) if m.isreg() else None   # None only for non-regular members
            content = rw.content(m.name, f.read()) if f is not None else None
            if content is not None:
                m.size = len(content)
            m.pax_headers = {}
            dst.addfile(rw.fixed(m), io.BytesIO(content) if content is not None else None)


def normalize_conda(path: Path, epoch: int, channel_aliases: Optional[dict[str, str]] = None,
                    info_files: Optional[dict[str, bytes]] = None,
                    recipe: Optional[dict[str, bytes]] = None) -> bool:
    """Rewrite ``path`` (a ``.conda``) in place, atomically; True when its bytes changed.
    ``channel_aliases``: mirror URL → the channel's own URL; ``info_files``: added to info/ (kept
    when already there, so normalizing twice changes nothing); ``recipe``: ``info/recipe/`` as the build
    id names it (:func:`recipe_members`), written in place of rattler-build's copy of the recipe folder
    (its generated ``rendered_recipe.yaml`` and ``variant_config.yaml`` stay).

    Idempotent: normalizing a normalized package gives the same bytes (a dropped pyc stays dropped).

    The tars go through files beside ``path``, one at a time, so a package the size of PyTorch's closure
    (2.5 GB, 4.4 GB of tar) never has more than one tar and its compressed form in memory; the members are
    the .conda's own order (``metadata.json``, ``pkg-*``, ``info-*``), so the pycs the payload drops are
    known before ``info/paths.json`` is rewritten."""
    path = Path(path)
    if not path.name.endswith(".conda"):
        return False   # .tar.bz2 is not produced by our builder (DEEPEP_ENV_PACKAGE_FORMAT=conda:N)
    import zstandard   # lazy: as _zstd_compress (zstandard loads only where a package is rewritten)

    try:
        return _normalize(path, epoch, channel_aliases, info_files, recipe)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, tarfile.TarError, zstandard.ZstdError, EOFError) as exc:
        # a truncated .conda (a build killed mid-write, a full disk) was a BadZipFile traceback (issue 52.12)
        raise UserError(f"not a whole .conda package ({type(exc).__name__}: {str(exc)[:120]})", file=path,
                        accepted="a package rattler-build wrote completely; build it again") from None
    except _Outside as exc:
        raise UserError(str(exc), file=path, accepted="relative member names without '..' or empty components") from None


def _normalize(path: Path, epoch: int, channel_aliases: Optional[dict[str, str]], info_files: Optional[dict[str, bytes]],
               recipe: Optional[dict[str, bytes]]) -> bool:
    with tempfile.TemporaryDirectory(prefix=".normalize-", dir=path.parent) as tmp:
        new = Path(tmp) / path.name
        with zipfile.ZipFile(path) as zin, zipfile.ZipFile(new, "w", zipfile.ZIP_STORED) as zout:
            _payload_first(path, [i.filename for i in zin.infolist()])
            rw = _Rewrite(epoch, channel_aliases, info_files, recipe)
            for info in zin.infolist():
                if info.filename.endswith(".tar.zst"):
                    data, rw = _rewritten_tar(zin, info, rw, Path(tmp))
                else:
                    data = zin.read(info)
                zi = zipfile.ZipInfo(info.filename, date_time=_ZIP_TIME)
                zi.compress_type = zipfile.ZIP_STORED
                zi.external_attr = 0o644 << 16
                zi.create_system = 3
                zout.writestr(zi, data)
                del data
        if file_sha256(new) == file_sha256(path):
            return False
        with open(new, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(new, 0o644)
        os.replace(new, path)
    return True


def _payload_first(path: Path, names: list[str]) -> None:
    """The payload tars come before the info tar (as rattler-build and conda write them): the pycs a payload
    drops must be known when ``info/paths.json`` is rewritten."""
    kinds = [n.split("-", 1)[0] for n in names if n.endswith(".tar.zst")]
    if "pkg" in kinds and "info" in kinds and kinds.index("info") < len(kinds) - 1 - kinds[::-1].index("pkg"):
        raise UserError("an info tar before a payload tar: not a .conda as rattler-build writes it", file=path,
                        accepted="metadata.json, pkg-*.tar.zst, info-*.tar.zst in that order")


def _rewritten_tar(zin: zipfile.ZipFile, info: zipfile.ZipInfo, rw: _Rewrite, tmp: Path) -> tuple[bytes, _Rewrite]:
    """One ``*.tar.zst`` member rewritten and compressed; the payload's stale pycs join ``rw.drop``."""
    raw, fixed = tmp / "member.tar", tmp / "fixed.tar"
    with zin.open(info) as src:
        _zstd_decompress_to(src, raw)
    if info.filename.startswith("pkg-"):
        rw = dataclasses.replace(rw, drop=rw.drop | stale_pycs(raw))
    _retar(raw, rw, fixed)
    raw.unlink()
    data = _zstd_compress(fixed.read_bytes())
    fixed.unlink()
    return data, rw
