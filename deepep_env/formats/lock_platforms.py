"""The lock's platforms, written the way pixi writes them: the one owner of a platform's name and
virtual packages for the solve, the lock, the staleness check and pixi.toml.

pixi (≥ 0.71) declares platforms as rich entries in ``[workspace] platforms``::

    { name = "linux-64-cuda130", platform = "linux-64", cuda = "13.0", glibc = "2.28", linux = "4.18", archspec = "x86_64" }

and writes each one into ``pixi.lock`` under that *name* (not the subdir) with its declared
virtual packages followed by the subdir defaults it lacks, each as rattler's
``GenericVirtualPackage`` displays itself (``name=version[=build]``, build left out when empty):

    - name: linux-64-cuda130
      subdir: linux-64
      virtual-packages: [__cuda=13.0, __archspec=0=x86_64, __glibc=2.28, __linux=4.18, __unix=0=0]

Sources (prefix-dev/pixi at 2b25fc7, pixi 0.77):
- crates/pixi_manifest/src/toml/platform.rs ``TomlPixiPlatform::deserialize``: ``cuda`` is taken
  first, then the friendly keys in ``FRIENDLY_VIRTUAL_PACKAGES`` order (cuda, archspec, glibc,
  linux, macos, windows); ``archspec`` becomes version ``0`` with the microarchitecture as build.
- crates/pixi_manifest/src/platform.rs ``merge_subdir_defaults`` / ``subdir_default_virtual_packages``:
  defaults not declared are appended in the order __unix (``0=0``), __linux 4.18, __glibc 2.28,
  __archspec.
- crates/pixi_core/src/lock_file/update.rs (building ``rattler_lock::PlatformData``): the strings are
  ``declared_virtual_packages().map(to_string)``; rattler_conda_types ``GenericVirtualPackage``'s
  ``Display`` gives ``__unix=0=0`` and ``__archspec=0=x86_64``.

Virtual packages come from the spec, never from this machine: a lock made on a laptop must be the
lock a B200 node gets.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # annotations only: rattler loads on first use
    from rattler import GenericVirtualPackage

# pixi's subdir defaults for linux (crates/pixi_manifest/src/platform.rs default_glibc_version /
# default_linux_version); conda-forge's current baseline is glibc 2.28 (alma8), and CUDA 12.x/13.x
# packages need it.
GLIBC = "2.28"
LINUX = "4.18"
ARCHSPEC = {"linux-64": "x86_64", "linux-aarch64": "aarch64", "linux-ppc64le": "ppc64le"}


@dataclass(frozen=True)
class VirtualPkg:
    name: str
    version: str
    build: str = ""

    def __str__(self) -> str:
        # rattler_conda_types GenericVirtualPackage's Display: name=version, then =build if not empty.
        return f"{self.name}={self.version}" + (f"={self.build}" if self.build else "")

    @classmethod
    def parse(cls, text: str) -> "VirtualPkg":
        """The inverse of ``str``, as rattler deserializes it (missing version = ``0``)."""
        parts = text.split("=")
        return cls(parts[0], parts[1] if len(parts) > 1 and parts[1] else "0", parts[2] if len(parts) > 2 else "")

    def rattler(self) -> GenericVirtualPackage:
        from rattler import BuildString, GenericVirtualPackage, PackageName, Version

        # py-rattler's BuildString refuses "" (CEP 26); the solver matches no spec on these builds.
        return GenericVirtualPackage(PackageName(self.name), Version(self.version), BuildString(self.build or "0"))


def subdir_defaults(subdir: str) -> list[VirtualPkg]:
    """pixi's ``subdir_default_virtual_packages`` for the unix subdirs we lock."""
    out = [VirtualPkg("__unix", "0", "0")]
    if subdir.startswith("linux-"):
        out += [VirtualPkg("__linux", LINUX), VirtualPkg("__glibc", GLIBC)]
    if subdir in ARCHSPEC:
        out.append(VirtualPkg("__archspec", "0", ARCHSPEC[subdir]))
    return out


@dataclass(frozen=True)
class LockPlatformDef:
    """One rich platform: its pixi name, conda subdir and virtual packages (in pixi's order)."""

    name: str
    subdir: str
    cuda: Optional[str]
    virtual_packages: tuple[VirtualPkg, ...]

    @property
    def strings(self) -> list[str]:
        return [str(v) for v in self.virtual_packages]

    def manifest_entry(self) -> dict[str, str]:
        """The ``[workspace] platforms`` entry pixi.toml declares for this platform."""
        entry = {"name": self.name, "platform": self.subdir}
        if self.cuda:
            entry["cuda"] = self.cuda
        if self.subdir.startswith("linux-"):
            entry.update({"glibc": GLIBC, "linux": LINUX})
        if self.subdir in ARCHSPEC:
            entry["archspec"] = ARCHSPEC[self.subdir]
        return entry


def platform_name(subdir: str, cuda: Optional[str]) -> str:
    return f"{subdir}-cuda{cuda.replace('.', '')}" if cuda else subdir


def platform_for(subdir: str, cuda: Optional[str]) -> LockPlatformDef:
    """The rich platform a spec's (subdir, CUDA) maps to, with virtual packages as pixi lists them:
    the declared ones in pixi's parse order (cuda, archspec, glibc, linux), then missing defaults.
    Without CUDA it is the bare subdir platform (pixi's ``from_subdir``: the defaults only)."""
    if not cuda:
        return LockPlatformDef(subdir, subdir, None, tuple(subdir_defaults(subdir)))
    declared: list[VirtualPkg] = [VirtualPkg("__cuda", cuda)]
    if subdir in ARCHSPEC:
        declared.append(VirtualPkg("__archspec", "0", ARCHSPEC[subdir]))
    if subdir.startswith("linux-"):
        declared += [VirtualPkg("__glibc", GLIBC), VirtualPkg("__linux", LINUX)]
    names = {v.name for v in declared}
    declared += [d for d in subdir_defaults(subdir) if d.name not in names]
    return LockPlatformDef(platform_name(subdir, cuda), subdir, cuda, tuple(declared))


# ---------------------------------------------------------------------------------------------
# Names on disk. pixi writes every rich platform (name != subdir) under a short alias ``p1``,
# ``p2``, … numbered in the declaration order of the workspace's rich platforms, and on load
# renames each row back to the manifest platform of the same identity (subdir + the virtual
# packages that are not subdir defaults): prefix-dev/pixi crates/pixi_core/src/lock_file/
# platform_rename.rs ``shorten_platform_names`` / ``align_platform_names`` (since pixi 0.71).

ALIAS_RE = re.compile(r"^p\d+$")


def aliases(order: list[str], names: set[str]) -> dict[str, str]:
    """name → the name written on disk: every rich platform of ``order`` (the manifest's, used or
    not) ``p1``… in that order, then any other rich names sorted; bare subdirs as themselves."""
    rich = [n for n in order if not _is_subdir(n)]
    rich += sorted(n for n in names if n not in rich and not _is_subdir(n))
    out = {n: n for n in set(order) | names if _is_subdir(n)}
    out.update({n: f"p{i}" for i, n in enumerate(rich, 1)})
    return out


def _is_subdir(name: str) -> bool:
    return name in KNOWN_SUBDIRS


KNOWN_SUBDIRS = {"noarch", "linux-32", "linux-64", "linux-aarch64", "linux-armv6l", "linux-armv7l",
                 "linux-ppc64le", "linux-ppc64", "linux-s390x", "linux-riscv32", "linux-riscv64", "osx-64",
                 "osx-arm64", "win-32", "win-64", "win-arm64", "emscripten-wasm32", "wasi-wasm32", "zos-z"}


def identity(subdir: str, strings: list[str]) -> tuple[str, tuple[str, ...]]:
    """pixi's platform identity: the subdir and the non-default virtual packages (as strings)."""
    defaults = {str(v) for v in subdir_defaults(subdir)}
    return subdir, tuple(sorted(s for s in strings if s not in defaults))


def canonical_name(subdir: str, strings: list[str]) -> str:
    """The name deepep-env's specs give a platform of this identity (``linux-64-cuda130``): how a
    ``pN`` row written by pixi or deepep-env is read back without the manifest at hand."""
    _, custom = identity(subdir, strings)
    if not custom:
        return subdir
    if len(custom) == 1 and custom[0].startswith("__cuda="):
        return platform_name(subdir, VirtualPkg.parse(custom[0]).version)
    return ""
