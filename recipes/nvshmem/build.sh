#!/usr/bin/env bash
# Configure and build NVSHMEM for DeepEP. Everything not needed is off: fewer dependencies, faster
# builds, nothing that could be loaded by accident (no MPI/SHMEM/UCX/PMIx/libfabric bootstraps).
set -euo pipefail
# The helpers the CUDA recipes share (git kept out, SOURCE_DATE_EPOCH, conda CUDA_HOME, nvcc shim):
# recipes/_include/cuda-build.sh.
. "${RECIPE_DIR:-$(dirname "${BASH_SOURCE[0]}")}/cuda-build.sh"

on_off() { case "$1" in true|True|1|ON|on) echo ON ;; *) echo OFF ;; esac; }

# conda mode: CUDA_HOME joins the build and host envs (conda_cuda_home). Its path is short and a
# function of the build string alone: NVSHMEM embeds CUDA_HOME in its build variables (nvshmem-info -b),
# whose printer truncates long values.
if [ "${DEEPEP_CUDA_PROVIDER:-host}" = conda ]; then
  CUDA_HOME="$(conda_cuda_home "/tmp/deepep-env-cuda-${DEEPEP_BUILD_STRING:-build}")"
  trap 'rm -rf "$CUDA_HOME"' EXIT
  export CUDA_HOME
  # nvcc compiles host code with the env's g++ (gxx_linux-64 sets CXX), not whatever c++ is on PATH.
  if [ -n "${CXX:-}" ] && [ -z "${DEEPEP_CUDA_HOST_CXX:-}" ]; then DEEPEP_CUDA_HOST_CXX="$(command -v "$CXX")"; fi
else
  export CUDA_HOME="${DEEPEP_CUDA_PREFIX:-/usr/local/cuda}"
fi
RDMA="$(rdma_prefix)"

# Reproducible nvcc (reproducible_nvcc, docs/build-id.md §8). Only the compiler goes through the
# shim: CUDA_HOME stays the toolkit's own path, because NVSHMEM records it in its build variables
# (nvshmem-info -b), whose wrapping truncates long values.
NVCC_HOME="$(reproducible_nvcc "$CUDA_HOME" "${SRC_DIR:-$PWD}/../nvcc-shim")"
export NVSHMEM_DEVICELIB_CUDA_HOME="$NVCC_HOME"   # the device library's own CMake project takes nvcc from here
IBGDA=$(on_off "${NVSHMEM_WANT_IBGDA:-true}")
GDR=$(on_off "${NVSHMEM_WANT_GDRCOPY:-false}")

inc=("$RDMA/include")
while IFS= read -r d; do inc+=("$d"); done < <(cccl_include_dirs "$CUDA_HOME")   # CUDA 13's CCCL
libdirs=()
while IFS= read -r d; do libdirs+=("$d"); done < <(rdma_lib_dirs "$RDMA")
export CPATH="$(IFS=:; echo "${inc[*]}")${CPATH:+:$CPATH}"
export LIBRARY_PATH="$(IFS=:; echo "${libdirs[*]}")${LIBRARY_PATH:+:$LIBRARY_PATH}"
incflags=""
for d in "${inc[@]}"; do incflags="$incflags -I$d"; done
linkflags=""
for d in "${libdirs[@]}"; do linkflags="$linkflags -L$d -Wl,-rpath-link,$d"; done

# IBGDA links libmlx5 directly (find_library(MLX5_lib)); point at the rdma-core copy we were given.
mlx5_args=()
for d in "${libdirs[@]}"; do
  if [ -e "$d/libmlx5.so" ]; then mlx5_args+=("-DMLX5_lib=$d/libmlx5.so"); break; fi
done

gdr_args=()
if [ "$GDR" = ON ]; then
  gdr_args+=("-DGDRCOPY_HOME=${DEEPEP_GDRCOPY_PREFIX:-$PREFIX}")
fi

# nvshmem-info links CUDA::cuda_driver. Toolkits installed without the stubs folder (pip/conda
# layouts, some images) leave FindCUDAToolkit without libcuda.so: use the driver's own copy.
drv_args=()
for c in "${DEEPEP_CUDA_DRIVER_LIBRARY:-}" "$CUDA_HOME/lib64/stubs/libcuda.so" "$CUDA_HOME/targets/x86_64-linux/lib/stubs/libcuda.so" \
         /usr/lib/x86_64-linux-gnu/libcuda.so /usr/lib/x86_64-linux-gnu/libcuda.so.1 \
         /usr/local/nvidia/lib64/libcuda.so /usr/local/nvidia/lib64/libcuda.so.1 /usr/lib64/libcuda.so.1; do
  if [ -n "$c" ] && [ -e "$c" ]; then drv_args+=("-DCUDA_cuda_driver_LIBRARY=$c"); break; fi
done

hostcxx_args=()
if [ -n "${DEEPEP_CUDA_HOST_CXX:-}" ]; then
  export CUDAHOSTCXX="$DEEPEP_CUDA_HOST_CXX"
  hostcxx_args+=("-DCMAKE_CUDA_HOST_COMPILER=$DEEPEP_CUDA_HOST_CXX")
fi

jobs="${CPU_COUNT:-$(nproc)}"
echo "deepep-env: NVSHMEM archs=${NVSHMEM_ARCHS} IBGDA=$IBGDA GDRCopy=$GDR CUDA_HOME=$CUDA_HOME rdma-core=$RDMA jobs=$jobs"

cmake -S . -B _build -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$PREFIX" \
  -DNVSHMEM_PREFIX="$PREFIX" \
  -DCUDA_HOME="$CUDA_HOME" \
  -DCMAKE_CUDA_COMPILER="$NVCC_HOME/bin/nvcc" \
  -DCMAKE_CUDA_ARCHITECTURES="${NVSHMEM_ARCHS}" \
  -DCMAKE_C_FLAGS="$incflags" -DCMAKE_CXX_FLAGS="$incflags" -DCMAKE_CUDA_FLAGS="$incflags" \
  -DCMAKE_SHARED_LINKER_FLAGS="$linkflags" -DCMAKE_EXE_LINKER_FLAGS="$linkflags" \
  -DCMAKE_LIBRARY_PATH="$(IFS=';'; echo "${libdirs[*]}")" \
  -DNVSHMEM_IBGDA_SUPPORT="$IBGDA" \
  -DNVSHMEM_USE_GDRCOPY="$GDR" "${gdr_args[@]}" "${drv_args[@]}" "${mlx5_args[@]}" "${hostcxx_args[@]}" \
  -DNVSHMEM_IBRC_SUPPORT=ON \
  -DNVSHMEM_USE_MLX5DV=ON \
  -DNVSHMEM_MPI_SUPPORT=OFF -DNVSHMEM_SHMEM_SUPPORT=OFF -DNVSHMEM_PMIX_SUPPORT=OFF \
  -DNVSHMEM_UCX_SUPPORT=OFF -DNVSHMEM_LIBFABRIC_SUPPORT=OFF -DNVSHMEM_IBDEVX_SUPPORT=OFF \
  -DNVSHMEM_USE_NCCL=OFF \
  -DNVSHMEM_BUILD_TESTS=OFF -DNVSHMEM_BUILD_EXAMPLES=OFF -DNVSHMEM_BUILD_PYTHON_LIB=OFF \
  -DNVSHMEM_BUILD_HYDRA_LAUNCHER=OFF -DNVSHMEM_BUILD_TXZ_PACKAGE=OFF -DNVSHMEM_BUILD_BITCODE_LIBRARY=OFF

# CPATH/LIBRARY_PATH stay exported: the device library is an ExternalProject configured during the
# build step and sees only a fixed list of -D arguments.
cmake --build _build -j "$jobs"
cmake --install _build
# Upstream installs sources and notes at the prefix root; keep the license, drop the rest.
mkdir -p "$PREFIX/share/doc/nvshmem"
for f in changelog License.txt version.txt git_commit.txt; do
  [ -e "$PREFIX/$f" ] && mv "$PREFIX/$f" "$PREFIX/share/doc/nvshmem/"
done
rm -rf "$PREFIX/share/src"
# libnvshmem.a (host and device in one static archive) is not what DeepEP links (libnvshmem_host.so +
# libnvshmem_device.a) and pip's NVSHMEM does not ship it either: leave it out of the package.
rm -f "$PREFIX/lib/libnvshmem.a"
