#!/usr/bin/env bash
# Build NCCL's shared library for the spec's architectures and install it the way conda-forge's nccl
# package lays it out (lib/libnccl.so*, include/, lib/pkgconfig/nccl.pc; no static library).
set -euo pipefail
# The helpers the CUDA recipes share (git kept out, SOURCE_DATE_EPOCH, conda CUDA_HOME, nvcc shim):
# recipes/_include/cuda-build.sh.
. "${RECIPE_DIR:-$(dirname "${BASH_SOURCE[0]}")}/cuda-build.sh"

# conda mode: CUDA_HOME joins the build and host envs without copying anything (conda_cuda_home).
if [ "${DEEPEP_CUDA_PROVIDER:-host}" = conda ]; then
  CUDA_HOME="$(conda_cuda_home "/tmp/deepep-env-cuda-${DEEPEP_BUILD_STRING:-build}")"
  trap 'rm -rf "$CUDA_HOME"' EXIT
  CUDARTLIB=cudart          # conda-forge links the shared cudart (cuda-cudart is a run export)
  HOSTCXX="${DEEPEP_CUDA_HOST_CXX:-$(command -v "${CXX:-g++}")}"
else
  CUDA_HOME="${DEEPEP_CUDA_PREFIX:-/usr/local/cuda}"
  CUDARTLIB=cudart_static   # upstream's default: the library needs no CUDA runtime from the env
  HOSTCXX="${DEEPEP_CUDA_HOST_CXX:-g++}"
fi
export CUDA_HOME

# Reproducible nvcc (docs/build-id.md §8): nvcc names temporary files and relocatable-device-code
# module ids after its process id (NCCL compiles its device code with -dc); in a fresh PID namespace
# that id is always the same. NCCL's makefiles take the compiler alone: reproducible_nvcc_bin.
NVCC="$(reproducible_nvcc_bin "$CUDA_HOME" "${SRC_DIR:-$PWD}/../nvcc-shim")"

# Exactly the spec's architectures, as device code (no PTX): "90;100" -> -gencode for sm_90 and sm_100.
gencode=""
for a in ${NCCL_ARCHS//;/ }; do gencode="$gencode -gencode=arch=compute_$a,code=sm_$a"; done
[ -n "$gencode" ] || { echo "deepep-env: no CUDA architectures given (cuda_architectures)" >&2; exit 1; }
# The FP8 multimem ("LDMC") symmetric kernels are compiled for sm_100f whatever NVCC_GENCODE says
# (src/device/Makefile NVCC_GENCODE_LDMC_FP8, symmetric/generate.py kernel_gencode). Without a
# Blackwell architecture in the spec, give them the spec's gencode: their bodies are guarded by
# NCCL_CUDA_ARCH_*SPECIFIC==1000.. (generate.py kernel_conds), so they compile empty for sm_90, and the
# library holds device code for the spec's archs only. (Emptying the variable instead makes upstream
# compile a placeholder with nvcc's default arch: sm_75 code, measured on a CPU build with CUDA 13.0.)
ldmc=()
case ";$NCCL_ARCHS;" in *";10"[0-9]*) ;; *) ldmc=("NVCC_GENCODE_LDMC_FP8=${gencode# }") ;; esac

# The tree must be the release the package is named after (2.30.7.1 <- makefiles/version.mk 2.30.7 + PKG_REVISION 1).
mk() { sed -n "s/^$1 *:= *//p" makefiles/version.mk | tr -d ' '; }
upstream="$(mk NCCL_MAJOR).$(mk NCCL_MINOR).$(mk NCCL_PATCH)"
case "$NCCL_PKG_VERSION" in
  "$upstream"|"$upstream.$(mk PKG_REVISION)") ;;
  *) echo "deepep-env: the staged tree is NCCL $upstream (makefiles/version.mk), the package says $NCCL_PKG_VERSION" >&2; exit 1 ;;
esac

jobs="${CPU_COUNT:-$(nproc)}"
echo "deepep-env: NCCL $upstream (${NCCL_REVISION:0:12}) gencode=[${gencode# }] CUDA_HOME=$CUDA_HOME cudart=$CUDARTLIB host-cxx=$HOSTCXX jobs=$jobs"
# src.lib: the shared library, headers and nccl.pc (no static library, no ncclras/ncclparam tools).
make -j"$jobs" src.lib BUILDDIR="$PWD/build" PREFIX="$PREFIX" CUDA_HOME="$CUDA_HOME" NVCC="$NVCC" \
  CXX="$HOSTCXX" NVCC_GENCODE="${gencode# }" ${ldmc[@]+"${ldmc[@]}"} CUDARTLIB="$CUDARTLIB" \
  NCCL_GIT_BRANCH="v$upstream" NCCL_GIT_COMMIT_HASH="${NCCL_REVISION:-unknown}"

mkdir -p "$PREFIX/lib/pkgconfig" "$PREFIX/include"
cp -P build/lib/libnccl.so* "$PREFIX/lib/"
cp -P build/lib/pkgconfig/nccl.pc "$PREFIX/lib/pkgconfig/"
cp -R build/include/. "$PREFIX/include/"
ls -l "$PREFIX/lib"/libnccl*
