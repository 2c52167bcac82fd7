"""Stage a build's sources: copy each verified tree out of the cache, re-verify it, apply patches.

The staged folder is what rattler-build gets as a ``path:`` source, so the patched tree *is* the
tree that is built and packaged — the opposite of seed 000 §4.1, where the patch went into a copy
that was never installed. Patches apply in catalogue order to the node's primary source with
``patch -p<strip> --forward`` (a patch that is already applied, or does not apply, fails instead
of being reversed or half-applied); ``git apply`` is the fallback where ``patch`` is missing.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Mapping, Optional, Sequence

from deepep_env.base.errors import UserError
from deepep_env.base.hashing import tree_sha256
from deepep_env.sources.cache import SourceCache


def primary_source(package: str, names: Sequence[str]) -> Optional[str]:
    """The source patches apply to: the one named like the package, else the only/first one."""
    if not names:
        return None
    if package in names:
        return package
    return sorted(names)[0]


def _apply(package: str, patch_name: str, patch_file: Path, strip: int, src: Path) -> None:
    if shutil.which("patch"):
        cmd = ["patch", f"-p{strip}", "--batch", "--forward", "--no-backup-if-mismatch", "-i", str(patch_file)]
        env = None
    else:
        cmd = ["git", "apply", f"-p{strip}", "--whitespace=nowarn", str(patch_file)]
        # The work dir may sit inside the project's git checkout; stop git from finding it, or
        # `git apply` would resolve paths against that repository and skip our files.
        env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(src.parent)}
    res = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        lines = [ln.strip() for ln in (res.stdout + "\n" + res.stderr).splitlines() if ln.strip()]
        hint = next((ln for ln in lines if "FAILED" in ln or "error" in ln.lower() or "Reversed" in ln),
                    lines[-1] if lines else f"exit {res.returncode}")
        raise UserError(f"package {package}: patch {patch_name} does not apply: {hint}",
                        accepted="a patch made against the pinned source revision")


def stage(package: str, sources: Mapping[str, str], patches: Sequence[tuple[str, str, int]],
          cache: SourceCache, workdir: Path) -> dict[str, Path]:
    """Copy ``sources`` ({name: tree digest}) to ``workdir/<name>`` and apply ``patches``
    ([(name, sha256 digest, strip)], in order) to the primary source. Returns {name: path}.

    ``workdir`` is emptied first: a build killed midway leaves a stale half-patched copy that
    must never be reused.
    """
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    out: dict[str, Path] = {}
    for name, digest in sources.items():
        cached = cache.tree(digest)
        if cached is None:
            raise UserError(f"package {package}: source {name} ({digest}) is not in the source cache {cache.root}",
                            accepted="`deepep-env fetch ENV` (or `--from DIR`) first")
        dst = workdir / name
        shutil.copytree(cached, dst, symlinks=True)
        got = tree_sha256(dst)
        if got != digest:  # the cache is content-addressed; a mismatch means it was modified
            raise UserError(f"package {package}: source cache entry for {name} is corrupt: expected {digest}, "
                            f"got {got}", file=cached, accepted="delete that folder and fetch again")
        out[name] = dst
    if patches:
        target = primary_source(package, list(out))
        if target is None:
            raise UserError(f"package {package}: has patches but no source to apply them to")
        for pname, pdigest, strip in patches:
            pfile = cache.patch(pdigest)
            if pfile is None:
                raise UserError(f"package {package}: patch {pname} ({pdigest}) is not in the source cache {cache.root}",
                                accepted="`deepep-env fetch ENV` (or `--from DIR`) first")
            # absolute: `patch` runs inside the source tree, so a relative --source-cache would miss it
            _apply(package, pname, Path(pfile).resolve(), strip, out[target])
    return out
