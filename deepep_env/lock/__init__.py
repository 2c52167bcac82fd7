"""Locks: solve → pixi.lock (v7), staleness check with typed reasons, diff as data, conda-lock export.

Specification and design choices: docs/lockfiles.md.

- :func:`lock_env` / :func:`lock_request` — solve a spec (or a :class:`LockRequest` given as data)
  with py-rattler into the project's ``pixi.lock``.
- :func:`check_lock` / :func:`check_request` — is the lock still what the spec asks? (:class:`LockCheck`)
- :func:`diff_locks` / :func:`diff_data` — :class:`LockDiff` between two locks (paths or ``REV:path``).
- :func:`export_conda_lock` / :func:`sync_exports` — conda-lock files through conda-lock's models
  (one environment, or ``lockfiles/`` for every one).
- :func:`read_lock` — any pixi.lock as plain data.
"""
from deepep_env.lock.check import (
    BuildIdChanged, ChannelChanged, DependencyMissing, EnvironmentMissing, LockCheck, LockMissing,
    PackageMissing, PackageNotRequired, PinChanged, PlatformAdded, PlatformRemoved, Reason,
    VirtualPackagesChanged, check_lock, check_request,
)
from deepep_env.lock.diff import LockDiff, diff_data, diff_locks
from deepep_env.lock.export import export_conda_lock
from deepep_env.lock.exports import sync_exports
from deepep_env.formats.lockfile import LockData, LockedPackage, read_lock
from deepep_env.formats.lock_platforms import LockPlatformDef, VirtualPkg, platform_for
from deepep_env.lock.request import LockRequest, Requirement, request_for_env
from deepep_env.lock.solve import LockResult, default_lock_path, lock_env, lock_request

__all__ = [
    "BuildIdChanged", "ChannelChanged", "DependencyMissing", "EnvironmentMissing", "LockCheck", "LockMissing",
    "PackageMissing", "PackageNotRequired", "PinChanged", "PlatformAdded", "PlatformRemoved", "Reason",
    "VirtualPackagesChanged", "check_lock", "check_request", "LockDiff", "diff_data", "diff_locks",
    "export_conda_lock", "sync_exports", "LockData", "LockedPackage", "read_lock", "LockRequest", "Requirement", "VirtualPkg",
    "request_for_env", "LockPlatformDef", "platform_for", "LockResult", "default_lock_path", "lock_env", "lock_request",
]
