"""rdma-core's library files by name: which libibverbs a directory provides, which provider ABIs.

The one owner of these rules. The host probe (``HostFacts.libraries``, read by the overlay's
``rdmav-drivers`` rule) and doctor's loader checks (``lib.*``) both read directories through here,
each with its own way of listing them (a :class:`~deepep_env.platform.rootfs.RootFS` under --root,
doctor's path view). Seed 002: ``/usr/local/nvidia/lib64`` held libibverbs 1.14.56 (provider ABI
rdmav57) next to the system's 1.14.50 (rdmav34); rdma-core's load_driver()
(libibverbs/dynamic_driver.c) opens ``lib<driver>-rdmav<ABI>.so`` from its provider directory
``<libdir>/libibverbs``.
"""
from __future__ import annotations

import re
from typing import Callable, Iterable, Optional

from deepep_env.platform.facts import LibraryCopy

# Where libibverbs copies live on the hosts the seeds describe: the distribution's directories,
# /usr/local/lib, and GKE's driver mount (seed 002).
LIBRARY_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
)
# The distribution's own library directories: its libibverbs and the provider directory beside it
# (``<dir>/libibverbs``), where a libibverbs from anywhere looks by default.
SYSTEM_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")

IBVERBS_SONAME = "libibverbs.so.1"
_LIB_RE = re.compile(r"^lib(ibverbs|mlx5)\.so(?:\.(\d+(?:\.\d+)*))?$")
_VERSIONED = re.compile(r"^libibverbs\.so\.1\.(\d+(?:\.\d+)*)$")
_PROVIDER = re.compile(r"^lib([a-z0-9_]+)-rdmav(\d+)\.so$")


def provider_abi(name: str) -> Optional[tuple[str, int]]:
    """(driver, ABI) of a provider file name: ``libmlx5-rdmav57.so`` → ("mlx5", 57)."""
    m = _PROVIDER.match(name)
    return (m.group(1), int(m.group(2))) if m else None


def ibverbs_version(name: str) -> Optional[str]:
    """The version a versioned libibverbs file name carries: ``libibverbs.so.1.14.50.0`` → 1.14.50.0."""
    m = _VERSIONED.match(name)
    return "1." + m.group(1) if m else None


def _version_key(name: str) -> list[int]:
    m = _VERSIONED.match(name)
    return [int(x) for x in m.group(1).split(".")] if m else []


def ibverbs_file(names: Iterable[str], link_name: Callable[[str], Optional[str]]) -> Optional[tuple[str, str]]:
    """(the entry the loader opens for the soname, the file name it ends at) in a directory with
    ``names``, or None. ``link_name(entry)``: the basename its symlink chain ends at. Without the
    soname link, the newest versioned file."""
    names = list(names)
    if IBVERBS_SONAME in names:
        return IBVERBS_SONAME, link_name(IBVERBS_SONAME) or IBVERBS_SONAME
    versioned = sorted((n for n in names if _VERSIONED.match(n)), key=_version_key)
    return (versioned[-1], versioned[-1]) if versioned else None


def library_copies(d: str, names: Iterable[str], link_target: Callable[[str], Optional[str]],
                   provider_names: Iterable[str]) -> list[LibraryCopy]:
    """The libibverbs/libmlx5 entries of directory ``d`` (``names``; ``link_target(name)``: the
    symlink's target or None) and the mlx5 providers in ``d/libibverbs`` (``provider_names``)."""
    out = []
    for name in names:
        m = _LIB_RE.match(name)
        if m:
            out.append(LibraryCopy(dir=d, name=name, kind=f"lib{m.group(1)}", version=m.group(2), link_target=link_target(name)))
    for name in provider_names:
        p = provider_abi(name)
        if p and p[0] == "mlx5":
            out.append(LibraryCopy(dir=f"{d}/libibverbs", name=name, kind="provider", rdmav=p[1]))
    return out
