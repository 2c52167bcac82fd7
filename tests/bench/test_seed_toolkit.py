"""recipes/cuda-wheel/cuda_from_wheels.py: the CUDA toolkit the seed envs build against, unpacked from
NVIDIA's wheels (issue 40), inside recipes/cuda-wheel's build. The package's bytes must follow from the
wheels alone, so the unpacking must be the same on every machine: members as pip installs them
(0755 where the zip says executable, else 0644), NVIDIA's .metadata left out, and the links a toolkit
has and the wheels do not. Real wheels are 115 MB; these are tiny ones of the same shape."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "recipes" / "cuda-wheel" / "cuda_from_wheels.py"


def _wheel(path: Path, members: dict[str, tuple[bytes, int]]) -> None:
    with zipfile.ZipFile(path, "w") as z:
        for name, (data, mode) in members.items():
            info = zipfile.ZipInfo(name, date_time=(2025, 1, 1, 0, 0, 0))
            info.external_attr = (stat.S_IFREG | mode) << 16
            z.writestr(info, data)


def _make(tmp_path: Path) -> Path:
    wheels = tmp_path / "wheels"
    wheels.mkdir(parents=True)
    _wheel(wheels / "nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64.whl", {
        "nvidia/cu13/bin/nvcc": (b"#!/bin/sh\necho nvcc\n", 0o775),
        "nvidia/cu13/include/crt/host_config.h": (b"/* crt */\n", 0o664),
        "nvidia/cu13/.metadata/provenance.txt": (b"build farm\n", 0o644),
        "nvidia_cuda_nvcc-13.0.88.dist-info/RECORD": (b"", 0o644),
    })
    _wheel(wheels / "nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_x86_64.whl", {
        "nvidia/cu13/include/cuda_runtime.h": (b"/* runtime */\n", 0o644),
        "nvidia/cu13/lib/libcudart.so.13": (b"\x7fELF", 0o755),
        "nvidia/cu13/lib/libcudart_static.a": (b"!<arch>\n", 0o644),
    })
    dest = tmp_path / "cuda"
    r = subprocess.run([sys.executable, str(SCRIPT), str(wheels), str(dest)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return dest


def _tree(root: Path) -> list[tuple[str, str]]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for n in sorted(dirnames + filenames):
            p = Path(dirpath, n)
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out.append((rel, "-> " + os.readlink(p)))
            elif p.is_file():
                out.append((rel, oct(p.stat().st_mode & 0o777)))
    return sorted(out)


def test_the_toolkit_is_the_wheels_members_with_pips_modes_and_a_toolkits_links(tmp_path):
    dest = _make(tmp_path)
    assert _tree(dest) == [
        ("bin/nvcc", "0o755"),
        ("include/crt/host_config.h", "0o644"),
        ("include/cuda_runtime.h", "0o644"),
        ("lib/libcudart.so", "-> libcudart.so.13"),
        ("lib/libcudart.so.13", "0o755"),
        ("lib/libcudart_static.a", "0o644"),
        ("lib64", "-> lib"),
        ("targets/x86_64-linux/include", "-> ../../include"),
        ("targets/x86_64-linux/lib", "-> ../../lib"),
    ]


def test_two_unpackings_hash_the_same_and_a_present_destination_is_refused(tmp_path):
    from deepep_env.base.hashing import tree_sha256

    a = _make(tmp_path / "a")
    b = _make(tmp_path / "b")
    assert tree_sha256(a / "include") == tree_sha256(b / "include")   # the "headers" fact of the id
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "a" / "wheels"), str(a)], capture_output=True,
                       text=True)
    assert r.returncode == 1 and "exists" in r.stderr and (a / "bin" / "nvcc").is_file()
