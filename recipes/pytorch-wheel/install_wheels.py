"""Install pinned wheels into a site-packages folder as pip would, the same bytes on every machine.

    python3 install_wheels.py WHEELS_DIR SITE_PACKAGES DOC_DIR

WHEELS_DIR holds one folder per part of recipes/pytorch-wheel/sources.toml (the builder staged each
wheel, verified by its sha256, in a folder of its own), each with exactly one ``.whl``; the wheels
are installed in the order of those folders' names. Every member of a wheel is written as pip
installs it: the wheel's root and its ``<dist>.data/purelib`` and ``<dist>.data/platlib`` into
SITE_PACKAGES, ``<dist>.data/data`` under the prefix (SITE_PACKAGES/../../..: ``lib/pythonX.Y/
site-packages`` is three levels below it); ``<dist>.data/scripts`` and ``<dist>.data/headers`` are
left out, each counted in a note. A member whose zip mode has an execute bit gets 0755, every other
file 0644, every folder 0755 (whatever the umask). A member path that is absolute or has a ``..``
component is refused (exit 1, one line), before anything is written. Two wheels may write the same
path only with the same bytes.

What pip does and this does not: no ``INSTALLER`` file, the wheels' ``RECORD`` as they ship it, no
console-script launchers (the ones a wheel declares in ``entry_points.txt`` are printed instead:
such a launcher holds the path of the interpreter that installed it, which this package has not got).
DOC_DIR/<project>/ gets each wheel's ``METADATA`` and licence files (``LICENSE*``, ``LICENCE*``,
``COPYING*``, ``NOTICE*`` and everything under ``licenses/`` of its dist-info): a repack carries the
licence it was given. Needs only the standard library (Python >= 3.9); the output is a function of
the wheels alone (no clock, no umask, no order of a directory listing).
"""
from __future__ import annotations

import configparser
import hashlib
import os
import re
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

LICENCE_PREFIXES = ("LICENSE", "LICENCE", "COPYING", "NOTICE")
SKIPPED_SCHEMES = ("scripts", "headers")
_CHUNK = 1 << 20


class Refused(Exception):
    """One line saying why nothing (more) is installed."""


def _mkdirs(path: Path) -> None:
    """``path`` and every missing parent, each 0755 (independent of the umask)."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        d.mkdir()
        d.chmod(0o755)


def _check_names(wheel: Path, infos: List[zipfile.ZipInfo]) -> str:
    """The wheel's one ``.dist-info`` folder; refuses absolute paths and ``..`` components."""
    dist_infos = set()
    for info in infos:
        name = info.filename
        parts = name.rstrip("/").split("/")
        if name.startswith("/") or ".." in parts:
            raise Refused(f"{wheel.name}: unsafe member path {name!r} (absolute, or a '..' component)")
        if parts[0].endswith(".dist-info"):
            dist_infos.add(parts[0])
    if len(dist_infos) != 1:
        raise Refused(f"{wheel.name}: {len(dist_infos)} .dist-info folders (a wheel has exactly one)")
    return dist_infos.pop()


def _project(metadata: bytes, wheel: Path) -> str:
    """The canonical project name (PEP 503: lowercase, runs of -_. as one '-') from METADATA's Name."""
    for line in metadata.decode("utf-8", "replace").splitlines():
        if not line.strip():
            break   # the headers end at the first empty line
        if line.lower().startswith("name:"):
            return re.sub(r"[-_.]+", "-", line.split(":", 1)[1].strip()).lower()
    raise Refused(f"{wheel.name}: METADATA has no Name")


def _entry_points(z: zipfile.ZipFile, dist_info: str) -> List[Tuple[str, str]]:
    """(kind, name) of each launcher the wheel declares: [console_scripts] and [gui_scripts]."""
    try:
        text = z.read(f"{dist_info}/entry_points.txt").decode("utf-8")
    except KeyError:
        return []
    cp = configparser.ConfigParser(delimiters=("=",), interpolation=None, strict=False)
    cp.optionxform = str   # keep the launchers' case
    cp.read_string(text)
    return [(kind, name) for kind in ("console_scripts", "gui_scripts") if cp.has_section(kind)
            for name in cp.options(kind)]


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def _member_sha256(z: zipfile.ZipFile, info: zipfile.ZipInfo) -> str:
    h = hashlib.sha256()
    with z.open(info) as src:
        for block in iter(lambda: src.read(_CHUNK), b""):
            h.update(block)
    return h.hexdigest()


class Installer:
    def __init__(self, site: Path, doc: Path) -> None:
        self.site = site
        self.prefix = site.parent.parent.parent
        self.doc = doc
        self.written: Dict[Path, Tuple[str, str]] = {}   # path -> (sha256, wheel that wrote it)
        self.files = 0
        self.shared = 0
        self.skipped: Dict[str, int] = {}
        self.data_dirs: List[str] = []
        self.launchers: List[str] = []
        self.no_licence: List[str] = []

    def _target(self, wheel: Path, name: str, data_dir: str) -> Optional[Path]:
        """Where member ``name`` goes; None when it is left out (scripts, headers)."""
        parts = name.split("/")
        if parts[0] != data_dir:
            return self.site.joinpath(*parts)
        if len(parts) < 3:
            raise Refused(f"{wheel.name}: {name!r} is not in a scheme folder of {data_dir}/")
        scheme, rest = parts[1], parts[2:]
        if scheme in ("purelib", "platlib"):
            return self.site.joinpath(*rest)
        if scheme == "data":
            return self.prefix.joinpath(*rest)
        if scheme in SKIPPED_SCHEMES:
            self.skipped[scheme] = self.skipped.get(scheme, 0) + 1
            return None
        raise Refused(f"{wheel.name}: {name!r}: unknown scheme {scheme!r} in {data_dir}/")

    def _dir_target(self, name: str, data_dir: str) -> Optional[Path]:
        """Where a folder entry goes; None for the .data folder, its scheme folders and the left-out schemes."""
        parts = name.rstrip("/").split("/")
        if parts[0] != data_dir:
            return self.site.joinpath(*parts)
        if len(parts) < 3 or parts[1] in SKIPPED_SCHEMES:
            return None
        if parts[1] in ("purelib", "platlib"):
            return self.site.joinpath(*parts[2:])
        return self.prefix.joinpath(*parts[2:]) if parts[1] == "data" else None

    def install(self, wheel: Path) -> int:
        n = 0
        with zipfile.ZipFile(wheel) as z:
            infos = z.infolist()
            dist_info = _check_names(wheel, infos)
            data_dir = dist_info[: -len(".dist-info")] + ".data"
            schemes = sorted({i.filename.split("/")[1] for i in infos
                              if i.filename.split("/")[0] == data_dir and i.filename.count("/") >= 2})
            if schemes:
                self.data_dirs.append(f"{wheel.name}: {data_dir}/{{{','.join(schemes)}}}")
            for info in infos:
                if info.is_dir():
                    target = self._dir_target(info.filename, data_dir)
                    if target is not None:
                        _mkdirs(target)
                    continue
                target = self._target(wheel, info.filename, data_dir)
                if target is None:
                    continue
                if target.is_dir():
                    raise Refused(f"{wheel.name}: {info.filename} would replace the folder {target}")
                if target in self.written or target.exists():
                    old, by = self.written.get(target) or (_file_sha256(target), "a file already there")
                    if _member_sha256(z, info) != old:
                        raise Refused(f"{wheel.name}: {info.filename} would overwrite {target} "
                                      f"(written by {by}) with other bytes")
                    self.shared += 1
                    continue
                _mkdirs(target.parent)
                h = hashlib.sha256()
                with z.open(info) as src, open(target, "wb") as out:
                    for block in iter(lambda: src.read(_CHUNK), b""):
                        h.update(block)
                        out.write(block)
                target.chmod(0o755 if (info.external_attr >> 16) & 0o111 else 0o644)
                self.written[target] = (h.hexdigest(), wheel.name)
                n += 1
            self.files += n
            for kind, name in _entry_points(z, dist_info):
                self.launchers.append(f"{name} ({kind}, {wheel.name})")
            self._docs(z, wheel, dist_info, infos)
        return n

    def _docs(self, z: zipfile.ZipFile, wheel: Path, dist_info: str, infos: List[zipfile.ZipInfo]) -> None:
        metadata = z.read(f"{dist_info}/METADATA")
        dest = self.doc / _project(metadata, wheel)
        licences = 0
        for info in infos:
            parts = info.filename.split("/")
            if parts[0] != dist_info or info.is_dir():
                continue
            rel = parts[1:]
            is_licence = rel[0] == "licenses" or rel[-1].upper().startswith(LICENCE_PREFIXES)
            if not is_licence and rel != ["METADATA"]:
                continue
            target = dest.joinpath(*rel)
            _mkdirs(target.parent)
            with z.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out, _CHUNK)
            target.chmod(0o644)
            licences += is_licence
        if not licences:
            self.no_licence.append(wheel.name)


def wheels_of(root: Path) -> List[Path]:
    """One wheel per folder of ``root``, in the order of the folders' names."""
    if not root.is_dir():
        raise Refused(f"{root} is not a folder")
    found = []
    for part in sorted(os.listdir(root)):
        d = root / part
        whls = sorted(p for p in d.iterdir() if p.name.endswith(".whl")) if d.is_dir() else []
        if len(whls) != 1:
            raise Refused(f"{d} holds {len(whls)} .whl files (one folder per wheel, exactly one wheel each)")
        found.append(whls[0])
    if not found:
        raise Refused(f"no wheel in {root}")
    return found


def main(wheels_dir: str, site_packages: str, doc_dir: str) -> int:
    try:
        wheels = wheels_of(Path(wheels_dir))
        for w in wheels:   # every path checked before anything is written
            with zipfile.ZipFile(w) as z:
                _check_names(w, z.infolist())
        site = Path(site_packages).absolute()
        inst = Installer(site, Path(doc_dir).absolute())
        _mkdirs(site)
        _mkdirs(inst.doc)
        for w in wheels:
            print(f"{w.name}: {inst.install(w)} files", flush=True)
    except (Refused, zipfile.BadZipFile, OSError) as exc:
        print(f"install_wheels: {exc}", file=sys.stderr)
        return 1
    for d in inst.data_dirs:
        print(f"note: .data folder {d}")
    for scheme, count in sorted(inst.skipped.items()):
        print(f"note: {count} file(s) of .data/{scheme} not installed")
    if inst.shared:
        print(f"note: {inst.shared} path(s) shipped by more than one wheel, with the same bytes")
    for w in inst.no_licence:
        print(f"note: {w} carries no licence file (its METADATA is kept)")
    for launcher in inst.launchers:
        print(f"note: launcher not generated: {launcher}")
    print(f"deepep-env: installed {len(wheels)} wheels, {inst.files} files into {inst.site}; "
          f"{len(inst.launchers)} console scripts not generated")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print("usage: install_wheels.py WHEELS_DIR SITE_PACKAGES DOC_DIR", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
