"""A CUDA toolkit folder (CUDA_HOME) made from NVIDIA's wheels, the same on every machine.

    python3 cuda_from_wheels.py WHEELS DEST [LICENCE_DIR]

WHEELS holds the wheels recipes/cuda-wheel/sources.toml pins, at any depth (the builder staged each
one, verified by its sha256, in a folder of its own), taken in the order of their file names. Each
wheel's ``nvidia/cu13/`` tree is unpacked into DEST (NVIDIA's build metadata, ``.metadata/``, left
out), as pip would install it: a member whose zip mode is executable gets 0755, every other 0644.
Then the links a toolkit has and the wheels do not: ``lib/libX.so`` → ``libX.so.N`` for each
versioned library with no development link, ``lib64`` → ``lib``, and
``targets/x86_64-linux/{include,lib}`` (where CMake's FindCUDAToolkit and CCCL look). DEST must not
exist (recipes/cuda-wheel/build.sh runs it into the package's $PREFIX/cuda). Needs only the standard
library; the output is a function of the wheels alone.
"""
from __future__ import annotations

import re
import shutil
import sys
import zipfile
from pathlib import Path

ROOT = "nvidia/cu13/"
_VERSIONED = re.compile(r"^(lib[^/]+\.so)\.\d+$")


def unpack(wheel: Path, dest: Path) -> int:
    n = 0
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            name = info.filename
            if not name.startswith(ROOT) or name.endswith("/") or name.startswith(ROOT + ".metadata/"):
                continue
            target = dest / name[len(ROOT):]
            target.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)
            target.chmod(0o755 if (info.external_attr >> 16) & 0o111 else 0o644)
            n += 1
    return n


def add_links(dest: Path) -> None:
    lib = dest / "lib"
    for f in sorted(lib.iterdir()):
        m = _VERSIONED.match(f.name)
        if m and not (lib / m.group(1)).exists():
            (lib / m.group(1)).symlink_to(f.name)
    (dest / "lib64").symlink_to("lib")
    tgt = dest / "targets" / "x86_64-linux"
    tgt.mkdir(parents=True)
    (tgt / "include").symlink_to("../../include")
    (tgt / "lib").symlink_to("../../lib")


def licences(wheel: Path, doc: Path) -> int:
    """The wheel's licence files (``*.dist-info/licenses/*``, ``LICENSE*``) and its METADATA, under
    ``doc/<wheel's dist name>/``: a repack carries the licence it was given."""
    n = 0
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            parts = info.filename.split("/")
            if not parts[0].endswith(".dist-info") or info.filename.endswith("/"):
                continue
            if parts[1:2] == ["licenses"] or parts[-1].startswith("LICENSE") or parts[-1] == "METADATA":
                target = doc / parts[0][: -len(".dist-info")] / "/".join(parts[1:])
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(info))
                target.chmod(0o644)
                n += parts[-1] != "METADATA"
    return n


def main(wheels: str, dest: str, doc: str = "") -> int:
    found = sorted(Path(wheels).rglob("nvidia_*.whl"), key=lambda p: p.name)
    if not found:
        print(f"cuda_from_wheels: no nvidia_*.whl in {wheels}", file=sys.stderr)
        return 1
    work = Path(dest)
    if work.exists():
        print(f"cuda_from_wheels: {dest} exists (it must not)", file=sys.stderr)
        return 1
    work.mkdir(parents=True)
    for w in found:
        print(f"{w.name}: {unpack(w, work)} files")
        if doc and not licences(w, Path(doc)):
            print(f"cuda_from_wheels: {w.name} carries no licence file", file=sys.stderr)
            return 1
    add_links(work)
    return 0


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        print("usage: cuda_from_wheels.py WHEELS DEST [LICENCE_DIR]", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
