"""Git submodules of a source fetched as an archive: put each one's tree at its path before hashing.

An archive of a superproject (GitHub's ``/archive/<rev>.tar.gz``, ``git archive``) holds an empty
folder where a gitlink is; DeepEP 2.x records ``third-party/fmt`` that way. The catalogue pins the
commit each gitlink names (``recipes/<pkg>/sources.toml`` ``[… .source.submodules."<path>"]``); the
tree hash covers the submodule's files, so a wrong or missing submodule is a hash mismatch, never a
silent partial tree. A ``git`` fetch does the same with ``git submodule update`` (sources/fetch.py).
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Callable, NamedTuple, Optional, Sequence

from deepep_env.sources.cache import is_archive, unpack

if TYPE_CHECKING:  # annotations only: no import at run time
    from deepep_env.envspec.catalog import SourcePin


class Submodule(NamedTuple):
    path: str                 # relative, validated by spec/catalog.py (_submodule_path)
    git: Optional[str]
    rev: str
    urls: tuple[str, ...]


def submodules_of(pin: SourcePin) -> tuple[Submodule, ...]:
    """Hashable submodule tuples of a source pin (sorted by path)."""
    return tuple(Submodule(p, s.git, s.rev, tuple(s.urls)) for p, s in sorted(pin.submodules.items()))


def _into(src_root: Path, target: Path) -> None:
    """Move the unpacked submodule tree to ``target`` (an empty or absent folder)."""
    if target.exists():
        if any(target.iterdir()):
            raise OSError(f"{target} is not empty")
        target.rmdir()
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(src_root), str(target))


def _one(sub: Submodule, root: Path, scratch: Path, download: Callable[[str, Path], None],
         git_checkout: Callable[[str, str, Path], None]) -> Optional[str]:
    target = root / sub.path
    if not target.resolve().is_relative_to(root.resolve()):   # the catalogue refuses this already
        return f"submodule {sub.path}: outside the tree"
    scratch.mkdir(parents=True, exist_ok=True)
    errors = []
    for i, url in enumerate(sub.urls):
        blob = scratch / f"sub-{i}"
        try:
            download(url, blob)
            if not is_archive(blob):
                errors.append(f"{url}: not a tar or zip archive")
                continue
            _into(unpack(blob, scratch / f"sub-{i}-unpacked"), target)
            return None
        except Exception as exc:  # noqa: BLE001 - network, archive or filesystem: try the next copy
            errors.append(f"{url}: {getattr(exc, 'reason', exc)}")
    if sub.git:
        try:
            git_checkout(sub.git, sub.rev, scratch / "sub-git")
            _into(scratch / "sub-git", target)
            return None
        except Exception as exc:  # noqa: BLE001
            errors.append(f"git {sub.git} {sub.rev[:12]}: {exc}")
    return f"submodule {sub.path} ({sub.rev[:12]}): " + ("; ".join(errors) or "no URL or git remote catalogued")


def place_submodules(subs: Sequence[Submodule], root: Path, scratch: Path,
                     download: Callable[[str, Path], None],
                     git_checkout: Callable[[str, str, Path], None]) -> Optional[str]:
    """Fill each submodule folder of the unpacked tree ``root``; return the first error, or None."""
    for k, sub in enumerate(subs):
        err = _one(sub, root, scratch / f"submodule-{k}", download, git_checkout)
        if err:
            return err
    return None
