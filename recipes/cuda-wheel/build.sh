#!/usr/bin/env bash
# Repack NVIDIA's CUDA toolkit wheels (each verified by sha256 before it was staged under wheels/<part>/)
# into $PREFIX/cuda, add the libcuda link stub, and carry every wheel's licence.
set -euo pipefail
python3 "$RECIPE_DIR/cuda_from_wheels.py" wheels "$PREFIX/cuda" "$PREFIX/share/doc/deepep-cuda-toolkit"
home="$PREFIX/cuda"
[ -x "$home/bin/nvcc" ] && [ -f "$home/include/cuda.h" ] || { echo "deepep-env: the wheels gave no bin/nvcc or include/cuda.h" >&2; exit 1; }

# The link-time libcuda stub (what NVIDIA's toolkit ships as lib64/stubs/libcuda.so): one empty function per
# driver entry point cuda.h declares, soname libcuda.so.1. No start files and no build id, so its bytes
# follow from cuda.h, the C compiler and the linker (whose versions are facts of this package's id).
c="$SRC_DIR/libcuda-stub.c"
cc -E -P -I"$home/include" "$home/include/cuda.h" | grep -oE '\bcu[A-Z][A-Za-z0-9_]*\s*\(' \
  | sed 's/[[:space:]]*($//' | LC_ALL=C sort -u | sed 's/.*/void &(void) {}/' > "$c"
[ -s "$c" ] || { echo "deepep-env: no driver entry point found in cuda.h" >&2; exit 1; }
cc -shared -fPIC -O0 -nostdlib -Wl,-soname,libcuda.so.1 -Wl,--build-id=none -o "$home/lib/libcuda.so" "$c"
echo "deepep-env: repacked $(ls wheels/*/*.whl | wc -l) wheels into cuda/ ($("$home/bin/nvcc" --version | tail -1)); libcuda stub of $(wc -l < "$c") entry points"
