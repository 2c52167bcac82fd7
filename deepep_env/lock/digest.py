"""The digest of an environment's locked package set: the identity a test record is valid for.

``sha256`` over the sorted list of the sha256 of every package in the env's lock section for one
platform, one per line. A package the lock gives no sha256 (never the case for a lock deepep-env
writes) stands in as ``name=version=build``. Order in the lock, URLs and channel names do not
count: the same bytes installed are the same digest. Every reader (records, ``verified``, ``plan``,
``diff``, ``publish``) calls :func:`section_digest`.
"""
from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Iterable, Optional

from deepep_env.base.errors import UserError

if TYPE_CHECKING:  # annotations only: no import at run time
    from deepep_env.formats.lockfile import LockData


def section_digest(packages: Iterable) -> str:
    """``sha256:<hex>`` of a lock section's packages (``LockedPackage``)."""
    items = sorted((p.sha256 or f"{p.name}={p.version}={p.build}").lower() for p in packages)
    return "sha256:" + hashlib.sha256("\n".join(items).encode("ascii", "replace")).hexdigest()


def env_digests(lock: LockData, env: str) -> dict[str, str]:
    """platform → digest, for every platform the lock has for ``env`` (pixi environment name)."""
    e = lock.env(env)
    if e is None:
        return {}
    return {plat: section_digest(pkgs) for plat, pkgs in sorted(e.packages.items()) if pkgs}


def all_digests(lock: LockData) -> dict[tuple[str, str], str]:
    """(env, platform) → digest, for every environment of the lock."""
    return {(env, plat): d for env in sorted(lock.envs) for plat, d in env_digests(lock, env).items()}


def env_digest(lock: LockData, env: str, platform: Optional[str] = None) -> tuple[str, str]:
    """(platform, digest) of ``env``: its one platform, or ``platform`` when the lock has several."""
    digests = env_digests(lock, env)
    if not digests:
        raise UserError(f"the lock has no packages for environment {env!r}", file=lock.path, field="-e",
                        accepted=", ".join(sorted(n for n in lock.envs if env_digests(lock, n))) or "none")
    if platform is not None:
        if platform not in digests:
            raise UserError(f"the lock has no platform {platform!r} for {env}", file=lock.path,
                            field="--lock-platform", accepted=", ".join(digests))
        return platform, digests[platform]
    if len(digests) > 1:
        raise UserError(f"environment {env!r} is locked for several platforms; name one", file=lock.path,
                        field="--lock-platform", accepted=", ".join(digests))
    return next(iter(digests.items()))
