"""The only place identities are computed. Specification: docs/build-id.md.

Digests always carry their algorithm (``sha256:<hex>``). Nothing here uses Python's ``hash()``.

- :func:`canonical_json` — the byte form every pre-image is serialised to.
- :func:`file_sha256` — content hash of one file (patches, archives).
- :func:`tree_sha256` — content hash of an unpacked source tree (a NAR-like walk), so that a
  GitHub tarball, a git checkout and a mirror's copy of the same tree hash the same.
- :func:`build_id` — a package's identity: sha256 over the canonical JSON of its pre-image.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any, Iterable, Mapping

from deepep_env.base.readfile import open_regular  # never blocks on a FIFO, never reads /dev/zero

ALGO = "sha256"
BUILD_ID_SCHEME = "deepep-env/build-id/v1"
TREE_SCHEME = "deepep-env/tree/v1"

# Names that are never part of a source tree's identity (VCS metadata differs between a clone and
# an archive of the same revision).
TREE_IGNORED = frozenset({".git", ".hg", ".svn"})


def digest(data: bytes) -> str:
    return f"{ALGO}:{hashlib.sha256(data).hexdigest()}"


def is_digest(value: str) -> bool:
    algo, _, hexpart = value.partition(":")
    return algo == ALGO and len(hexpart) == 64 and all(c in "0123456789abcdef" for c in hexpart)


def canonical_json(obj: Any) -> bytes:
    """Sorted keys, no insignificant whitespace, UTF-8, no NaN: the pre-image byte form."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with os.fdopen(open_regular(path), "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return f"{ALGO}:{h.hexdigest()}"


def _tree_entries(root: Path) -> Iterable[tuple[str, str, bytes]]:
    """(relative posix path, kind, payload) for every entry under root, in byte order of path."""
    stack = [""]
    out: list[tuple[str, str, bytes]] = []
    while stack:
        rel = stack.pop()
        base = root / rel if rel else root
        with os.scandir(base) as it:
            for entry in it:
                if entry.name in TREE_IGNORED and not rel:
                    continue
                relpath = f"{rel}/{entry.name}" if rel else entry.name
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    out.append((relpath, "symlink", os.readlink(entry.path).encode()))
                elif stat.S_ISDIR(st.st_mode):
                    out.append((relpath, "dir", b""))
                    stack.append(relpath)
                elif stat.S_ISREG(st.st_mode):
                    kind = "exe" if st.st_mode & 0o111 else "file"
                    out.append((relpath, kind, bytes.fromhex(file_sha256(entry.path)[7:])))
    out.sort(key=lambda e: e[0].encode("utf-8"))
    return out


def tree_sha256(root: str | Path) -> str:
    """Content hash of a directory tree: paths, file kinds (file/exe/symlink/dir) and contents.

    Timestamps, owners and permission bits other than "executable" do not count, so the same
    revision unpacked from any archive or checked out from any clone hashes the same.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(root)
    h = hashlib.sha256()
    h.update(TREE_SCHEME.encode() + b"\0")
    for relpath, kind, payload in _tree_entries(root):
        h.update(relpath.encode("utf-8") + b"\0" + kind.encode() + b"\0")
        h.update(len(payload).to_bytes(8, "big") + payload)
    return f"{ALGO}:{h.hexdigest()}"


def file_tree_sha256(name: str, file_digest: str) -> str:
    """:func:`tree_sha256` of a folder that holds one regular, non-executable file ``name`` whose
    content hashes to ``file_digest``: how a single-file source (a pinned wheel) is a cache tree,
    its id computed from the file's published sha256 without the file."""
    h = hashlib.sha256()
    h.update(TREE_SCHEME.encode() + b"\0")
    payload = bytes.fromhex(file_digest.split(":", 1)[1])
    h.update(name.encode("utf-8") + b"\0" + b"file" + b"\0")
    h.update(len(payload).to_bytes(8, "big") + payload)
    return f"{ALGO}:{h.hexdigest()}"


def drop_defaults(obj: Any) -> Any:
    """Remove empty values (None, "", [], {}) recursively: a field added later with an empty
    default moves no existing id (the rattler-build/pixi habit)."""
    if isinstance(obj, Mapping):
        cleaned = {k: drop_defaults(v) for k, v in obj.items()}
        return {k: v for k, v in cleaned.items() if v not in (None, "", [], {})}
    if isinstance(obj, (list, tuple)):
        return [drop_defaults(v) for v in obj]
    return obj


def build_id_preimage(
    *,
    package: str,
    recipe: str,
    sources: Mapping[str, str] | None = None,
    patches: Iterable[str] = (),
    variant: Mapping[str, Any] | None = None,
    dependencies: Mapping[str, str] | None = None,
    externals: Mapping[str, Any] | None = None,
    virtual_packages: Mapping[str, str] | None = None,
    resolved: Mapping[str, Any] | None = None,
    build_root: str | None = None,
    build_tools: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The documented pre-image of a build id (docs/build-id.md §2). Order of patches matters
    (they apply in order); everything else is a mapping and therefore order-free."""
    return drop_defaults(
        {
            "scheme": BUILD_ID_SCHEME,
            "package": package,
            "recipe": recipe,
            "sources": dict(sources or {}),
            "patches": list(patches),
            "variant": dict(variant or {}),
            "dependencies": dict(dependencies or {}),
            "externals": dict(externals or {}),
            "virtual_packages": dict(virtual_packages or {}),
            # the packages the build and host environments resolved to outside the graph (sha256)
            "resolved": dict(resolved or {}),
            # a build root other than the default (it is compiled into the bytes); absent otherwise
            "build_root": build_root,
            # the tools rattler-build runs on the package (patchelf) when they are not the pinned ones
            "build_tools": dict(build_tools) if build_tools else None,
        }
    )


def build_id(preimage: Mapping[str, Any]) -> str:
    return digest(canonical_json(preimage))


def short_id(full: str, n: int = 12) -> str:
    """The hex part, truncated: used in build strings and store paths."""
    return full.split(":", 1)[-1][:n]


RECIPE_IGNORED_SUFFIXES = (".pyc",)
RECIPE_IGNORED_DIRS = frozenset({"__pycache__"})
# The source catalog lists pins for *every* version; the one a build uses enters its id through the
# source's content hash, so pinning another version must not move this build's id.
RECIPE_IGNORED_FILES = frozenset({"sources.toml"})


def recipe_files(recipe_dir: str | Path) -> list[tuple[str, Path]]:
    """(relative path, path) of every file that makes a recipe folder's identity, in path order: all
    but the ignored ones above; a link counts as the file it names. The package's ``info/recipe/``
    holds exactly these (builder/normalize.py), so nothing in the folder reaches a package's bytes
    without being in its id (issue 37: sources.toml did)."""
    root = Path(recipe_dir)
    out = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if (any(part in RECIPE_IGNORED_DIRS for part in rel.parts) or p.suffix in RECIPE_IGNORED_SUFFIXES
                or rel.as_posix() in RECIPE_IGNORED_FILES):
            continue
        if p.is_file():
            out.append((rel.as_posix(), p))
    return out


def recipe_digest(file_digests: Iterable[tuple[str, str]]) -> str:
    """The recipe hash of (relative path, sha256 of its content) pairs (:func:`recipe_sha256`)."""
    entries = [{"path": rel, "sha256": sha} for rel, sha in file_digests]
    return digest(canonical_json({"scheme": "deepep-env/recipe/v1", "files": entries}))


def recipe_sha256(recipe_dir: str | Path) -> str:
    """Hash of every file in a recipe directory (recipe.yaml, build scripts, local patches)."""
    return recipe_digest((rel, file_sha256(p)) for rel, p in recipe_files(recipe_dir))
