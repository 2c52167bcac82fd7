#!/usr/bin/env bash
# gdrcopy tools: GDRCopy's tests/ Makefile (v2.5.1), linked against libgdrapi from this recipe's
# first output (now in $PREFIX) and libcuda. The tools are GPU-side test programs; pplat is built
# by nvcc with `-arch=all` (GDRCopy's own choice for CUDA >= 12.6, scripts/get_cuda_gencode.sh).
set -euo pipefail

if [ "${CUDA_PROVIDER:-conda}" = "conda" ] || [ -z "${CUDA_HOME:-}" ]; then
  CUDA_HOME="$BUILD_PREFIX"
  CUDA_INC_DIR="$PREFIX/include"
else
  CUDA_INC_DIR="$CUDA_HOME/include"
fi

# -lcuda needs a link-time libcuda.so: the toolkit's stubs, or the driver's libcuda.so.1 (pip-style
# toolkits such as the 8xH200 machine's /usr/local/cuda ship no stubs).
STUBS=""
for d in "$PREFIX/lib/stubs" "$CUDA_HOME/lib64/stubs" "$CUDA_HOME/lib/stubs" \
         "$CUDA_HOME/targets/x86_64-linux/lib/stubs" "$CUDA_HOME/targets/sbsa-linux/lib/stubs"; do
  if [ -e "$d/libcuda.so" ]; then STUBS="$d"; break; fi
done
if [ -z "$STUBS" ]; then
  for f in /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/lib64/libcuda.so.1 /usr/lib/aarch64-linux-gnu/libcuda.so.1 \
           /usr/local/nvidia/lib64/libcuda.so.1; do
    if [ -e "$f" ]; then
      STUBS="$SRC_DIR/.libcuda-link"; mkdir -p "$STUBS"; ln -sf "$f" "$STUBS/libcuda.so"; break
    fi
  done
fi
if [ -z "$STUBS" ]; then
  echo "error: gdrcopy tools need libcuda.so to link: no stubs under $CUDA_HOME and no driver libcuda.so.1" >&2
  exit 1
fi

NVCC="$CUDA_HOME/bin/nvcc"
[ -x "$NVCC" ] || NVCC="$(command -v nvcc)"
cd tests
make -j"${JOBS:-1}" exes \
  CUDA="$CUDA_HOME" NVCC="$NVCC" \
  CUDA_LIB="-L $STUBS -L $CUDA_HOME/lib64 -L $PREFIX/lib" \
  CUDA_INC="-I $CUDA_INC_DIR"
# Link against the libgdrapi of the first output (in $PREFIX), not src/: the Makefile's
# -L ../src would also work, but $PREFIX is what the package will run with.
make install DESTBIN="$PREFIX/bin"
