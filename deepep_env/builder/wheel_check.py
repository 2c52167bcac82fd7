"""The one checked place every wheel provider's pinned wheels pass through before a recipe sees them
(issue 52.2-4, 52.12): the NVSHMEM, CUDA and PyTorch wheel catalogs pin wheels by sha256, and a pin
guards against a changed upstream only when what the pinned bytes say is checked too. A wheel of a
node is refused, in one line naming the wheel, the member and the rule, when a member

- has an absolute name, a ``..`` component or an empty one (``nvidia/cu13//etc/x``),
- is not a regular file or a folder (a symlink: ``lib/x.so -> /etc/passwd``),
- lies under ``<dist>.data/data/`` outside :data:`DATA_ALLOWED` (``etc/conda/activate.d/`` would run at
  every activation, ``bin/`` would come first on PATH),

when its ``METADATA`` names another project than the catalog's (the wheel's file name, which every
catalog ties to its project: envspec/*_wheels.py), and when two wheels of one node would install one
path with other bytes. The recipe scripts (recipes/*-wheel/) get the same checks at the next relock."""
from __future__ import annotations

import re
import stat
import zipfile
from pathlib import Path
from typing import Mapping, Optional

from deepep_env.base.errors import UserError

DATA_ALLOWED = ("share/",)          # the pinned wheels' only .data/data files: sympy's man page
_SCHEMES_TO_SITE = ("purelib", "platlib")
ACCEPTED = "the wheel the catalog pins, as PyPI serves it (re-pin only a wheel you have read)"


def normalise(name: str) -> str:
    """PEP 503: ``Foo_Bar.baz`` is ``foo-bar-baz``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def check_wheels(package: str, wheels: Mapping[str, Path]) -> None:
    """Each of ``wheels`` ({part: wheel file}) checked alone, then all together for paths two of them
    would install with other bytes. One line on the first rule broken."""
    seen: dict[str, tuple[Path, zipfile.ZipInfo]] = {}
    for part in sorted(wheels):
        wheel = wheels[part]
        try:
            with zipfile.ZipFile(wheel) as z:
                infos = z.infolist()
                _check_metadata(package, wheel, z, infos)
                for info in infos:
                    _check_member(package, wheel, info)
                    where = _installed(info.filename)
                    if where is not None and not info.is_dir():
                        _check_clash(package, seen, where, wheel, z, info)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as exc:
            _refuse(package, wheel, None, f"is not a readable wheel ({type(exc).__name__})")


def _refuse(package: str, wheel: Path, member: Optional[str], rule: str) -> None:
    what = f"{wheel.name}: member {member!r}" if member is not None else wheel.name
    raise UserError(f"package {package}: wheel {what} {rule}; refused before the recipe sees it", accepted=ACCEPTED)


def _check_member(package: str, wheel: Path, info: zipfile.ZipInfo) -> None:
    name = info.filename
    parts = name.rstrip("/").split("/")
    if name.startswith("/") or "\\" in name or re.match(r"^[A-Za-z]:", name):
        _refuse(package, wheel, name, "has an absolute path")
    if ".." in parts:
        _refuse(package, wheel, name, "has a '..' component")
    if "" in parts or "." in parts:
        _refuse(package, wheel, name, "has an empty or '.' component (an absolute path inside it)")
    kind = stat.S_IFMT(info.external_attr >> 16)
    if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
        _refuse(package, wheel, name, "is not a regular file or folder (a symlink or device; wheels hold files)")
    if len(parts) >= 3 and parts[0].endswith(".data") and parts[1] == "data" and not info.is_dir():
        rest = "/".join(parts[2:])
        if not rest.startswith(DATA_ALLOWED):
            _refuse(package, wheel, name, f"installs {rest} into the environment's prefix (.data/data files are "
                                          f"accepted under {', '.join(DATA_ALLOWED)} only: not etc/conda/, bin/, lib/)")


def _check_metadata(package: str, wheel: Path, z: zipfile.ZipFile, infos: list[zipfile.ZipInfo]) -> None:
    """One ``*.dist-info/METADATA`` at the top, whose ``Name:`` is the catalog's project."""
    project = wheel.name.split("-", 1)[0]
    metas = [i.filename for i in infos if re.fullmatch(r"[^/]+\.dist-info/METADATA", i.filename)]
    if len(metas) != 1:
        _refuse(package, wheel, None, f"has {len(metas)} *.dist-info/METADATA (one is accepted)")
    text = z.read(metas[0])[:1 << 20].decode("utf-8", "replace")
    name = next((ln[5:].strip() for ln in text.splitlines() if ln.startswith("Name:")), None)
    if name is None or not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", name) \
            or normalise(name) != normalise(project):
        _refuse(package, wheel, metas[0], f"names the project {name!r}, not the catalog's {normalise(project)!r}")


def _installed(name: str) -> Optional[str]:
    """The path a member would be installed at, relative to one place for every wheel of a node:
    ``.data/purelib|platlib/X`` and the wheel's root at ``X``, ``.data/<scheme>/X`` at ``<scheme>:X``."""
    parts = name.split("/")
    if len(parts) >= 3 and parts[0].endswith(".data"):
        return "/".join(parts[2:]) if parts[1] in _SCHEMES_TO_SITE else f"{parts[1]}:" + "/".join(parts[2:])
    return name


def _check_clash(package: str, seen: dict[str, tuple[Path, zipfile.ZipInfo]], where: str, wheel: Path,
                 z: zipfile.ZipFile, info: zipfile.ZipInfo) -> None:
    first = seen.setdefault(where, (wheel, info))
    if first[0] == wheel:
        return
    other, oinfo = first
    same = oinfo.file_size == info.file_size and oinfo.CRC == info.CRC
    if same:
        with zipfile.ZipFile(other) as oz:
            same = oz.read(oinfo) == z.read(info)
    if not same:
        _refuse(package, wheel, info.filename, f"installs {where}, which {other.name} installs with other bytes")
