#!/usr/bin/env bash
# What only the GPU machines' transfer limit needs beside `deepep-env carry` (64 MiB per call, no network):
#   pysite/site-py312-x86_64.tar.xz  deepep-env's runtime dependencies installed for CPython 3.12, xz'd: the
#                                    carry's wheels of the same pins (data/carry-requirements.txt, by sha256)
#                                    are 70 MB as wheels, 39 MB as one xz'd site
#   skeletons/*.skel                 NVIDIA's NVSHMEM cu13 3.4.5 wheel (60 MB) as a 31 kB skeleton, rebuilt
#                                    byte for byte from the image's installed copy (wheel_skeleton.py); the
#                                    carry leaves that source to the machine (--source-here)
#   wheels/                          pip and setuptools for `deepep-env repack` when the image's venv lacks them
# Usage (repo root, a machine with PyPI): bash benchmarks/gpu/gpu_site.sh [DIR]   (default .gpu)
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-.gpu}
PY=${VENV_PY:-.venv/bin/python}
rm -rf "$DIR"/{pysite,skeletons,wheels}
mkdir -p "$DIR"/{pysite,skeletons,wheels}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
PLAT=(--python-version 3.12 --implementation cp --only-binary=:all: --platform manylinux_2_28_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64
      --platform manylinux1_x86_64 --platform linux_x86_64)
"$PY" -m pip download -q --no-deps --require-hashes "${PLAT[@]}" -d "$T/whl" -r deepep_env/data/carry-requirements.txt
"$PY" -m pip install -q --no-index --no-deps --no-compile "${PLAT[@]}" --target "$T/site" "$T"/whl/*.whl
find "$T/site" -name __pycache__ -prune -exec rm -rf {} +
rm -f "$T"/site/*.dist-info/direct_url.json   # pip's record of this run's temporary folder
sed -i '/\.dist-info\/direct_url\.json,/d' "$T"/site/*.dist-info/RECORD
rm -f "$T"/site/zstandard/_cffi.*.so   # zstandard's fallback backend (12 MB): its C backend is what loads
sed -i '/^zstandard\/_cffi\..*\.so,/d' "$T"/site/zstandard-*.dist-info/RECORD
(cd "$T/site" && tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - . | xz -9e -T2) \
  > "$DIR/pysite/site-py312-x86_64.tar.xz"
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 -d "$DIR/wheels" pip==24.0 setuptools==81.0.0
"$PY" -m pip download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 -d "$T/w" nvidia-nvshmem-cu13==3.4.5
"$PY" benchmarks/gpu/wheel_skeleton.py make "$T"/w/nvidia_nvshmem_cu13-3.4.5-*.whl \
  "$DIR/skeletons/nvidia_nvshmem_cu13-3.4.5-x86_64.skel" > /dev/null
du -sh "$DIR"/*
