# Shell helpers shared by the CUDA recipes: nvshmem, nccl, deep-ep and deep-ep-v2. Each of those
# folders holds cuda-build.sh, a relative symlink to this file, and its build.sh sources it:
#   . "${RECIPE_DIR:-$(dirname "${BASH_SOURCE[0]}")}/cuda-build.sh"
# (rattler-build's RECIPE_DIR is the recipe folder itself; run by hand, the script's own folder.)
# This file is part of each of those recipes' build id: recipe_sha256 hashes the content behind a
# symlink. The builder ships it in every package's info/recipe/ as a regular file (normalize.py).
# Sourced under `set -euo pipefail`: every top-level statement here must succeed.

# NVSHMEM's git_commit step, DeepEP's setup.py (it appends `git rev-parse --short HEAD` to its
# version) and NCCL's generate_git_version.py ask git: inside another work tree (a build dir under a
# project checkout) they would record that repo's commit. Keep git out.
export GIT_DIR=/nonexistent GIT_CEILING_DIRECTORIES=/

# __DATE__/__TIME__ (nvshmem-info prints them) and the nvcc shim's .cu mtimes follow
# SOURCE_DATE_EPOCH: the builder derives it from the build id.
if [ -n "${DEEPEP_SOURCE_DATE_EPOCH:-}" ]; then export SOURCE_DATE_EPOCH="$DEEPEP_SOURCE_DATE_EPOCH"; fi

# conda_cuda_home DIR: conda-forge's CUDA is split (nvcc, ptxas and nvvm in the build env, the
# target's headers and libraries in the host env under targets/x86_64-linux); CMake, NCCL's makefiles
# and torch.utils.cpp_extension want one CUDA_HOME (bin/nvcc, include/, lib64/). DIR joins the two
# without copying anything; prints DIR.
conda_cuda_home() {
  local home="$1" tgt="targets/x86_64-linux" e
  rm -rf "$home" && mkdir -p "$home/bin" "$home/targets"
  for e in "$BUILD_PREFIX"/bin/*; do ln -s "$e" "$home/bin/"; done
  if [ -d "$BUILD_PREFIX/nvvm" ]; then ln -s "$BUILD_PREFIX/nvvm" "$home/nvvm"; fi
  ln -s "$PREFIX/$tgt/include" "$home/include"
  ln -s "$PREFIX/$tgt/lib" "$home/lib64"
  ln -s "$PREFIX/$tgt" "$home/$tgt"
  echo "$home"
}

# rdma_prefix: the rdma-core the build reads (libmlx5, <infiniband/mlx5dv.h>): the spec's
# rdma_core_prefix, else the host env's (conda mode) or the system's (host mode).
rdma_prefix() {
  if [ "${DEEPEP_CUDA_PROVIDER:-host}" = conda ]; then echo "${DEEPEP_RDMA_CORE_PREFIX:-$PREFIX}"
  else echo "${DEEPEP_RDMA_CORE_PREFIX:-/usr}"; fi
}

# rdma_lib_dirs PREFIX: its library folders that exist, one a line (Debian multiarch first).
rdma_lib_dirs() {
  local d
  for d in "$1/lib/x86_64-linux-gnu" "$1/lib64" "$1/lib"; do
    if [ -d "$d" ]; then echo "$d"; fi
  done
}

# cccl_include_dirs CUDA_HOME: CUDA 13 moved CCCL (cuda/std/...) under targets/<arch>/include/cccl;
# NVSHMEM's headers include it (DeepEP issue #568). The folders that exist, one a line.
cccl_include_dirs() {
  local d
  for d in "$1/targets/x86_64-linux/include/cccl" "$1/targets/sbsa-linux/include/cccl" "$1/include/cccl"; do
    if [ -d "$d" ]; then echo "$d"; fi
  done
}

# Reproducible nvcc (docs/build-id.md §8): nvcc names its temporary files, and the module id of each
# relocatable-device-code unit, after its own process id, and both end up in the objects (measured on
# H100 and H200: the only bytes that differed between two builds of the same inputs). In a fresh PID
# namespace nvcc's pid is always the same, so its output is too.
#
# _nvcc_pid_namespace: the command prefix that runs a process in a fresh PID namespace; fails (with
# a note) where unshare is refused.
_nvcc_pid_namespace() {
  if unshare --pid --fork true 2>/dev/null; then echo "unshare --pid --fork"
  elif unshare --user --map-root-user --pid --fork true 2>/dev/null; then echo "unshare --user --map-root-user --pid --fork"
  else
    echo "deepep-env: note: cannot make a PID namespace here (unshare refused): nvcc output will embed process ids, so this package will not be byte-reproducible" >&2
    return 1
  fi
}

# _write_nvcc_shim REAL_CUDA_HOME NS FILE: FILE runs REAL_CUDA_HOME's nvcc in NS. Each nvcc gets a
# temporary folder of its own (in its namespace every nvcc has the same pid, so their tmpxft_<pid>_*
# files would collide in a shared /tmp), and its .cu inputs get the build's fixed mtime: a unit with
# no externally visible kernel gets a module id hashed from its source file's mtime (measured;
# NVSHMEM's configure-time transfer_device.cu is such a unit).
_write_nvcc_shim() {
  local real="$1" ns="$2" out="$3"
  cat > "$out" <<SHIM
#!/bin/sh
for a in "\$@"; do case "\$a" in *.cu) [ -f "\$a" ] && touch -d "@${SOURCE_DATE_EPOCH:-315532800}" "\$a" ;; esac; done
t=\$(mktemp -d) || exit 1
TMPDIR="\$t" $ns "$(readlink -f "$real/bin/nvcc")" "\$@"
rc=\$?
rm -rf "\$t"
exit \$rc
SHIM
  chmod +x "$out"
}

# reproducible_nvcc REAL_CUDA_HOME SHIM_DIR: prints a CUDA_HOME whose bin/nvcc is the shim and whose
# every other entry links to the real toolkit (SHIM_DIR; REAL_CUDA_HOME where unshare is refused).
reproducible_nvcc() {
  local real="$1" shim="$2" ns e
  ns="$(_nvcc_pid_namespace)" || { echo "$real"; return 0; }
  rm -rf "$shim" && mkdir -p "$shim/bin"
  for e in "$real"/*; do [ "$(basename "$e")" = bin ] || ln -s "$e" "$shim/"; done
  for e in "$real"/bin/*; do ln -s "$e" "$shim/bin/"; done
  rm -f "$shim/bin/nvcc"
  _write_nvcc_shim "$real" "$ns" "$shim/bin/nvcc"
  echo "$shim"
}

# reproducible_nvcc_bin REAL_CUDA_HOME SHIM_DIR: prints the path of an nvcc for builds that take the
# compiler alone (NCCL's NVCC=): SHIM_DIR/nvcc, or the real one where unshare is refused.
reproducible_nvcc_bin() {
  local real="$1" shim="$2" ns
  ns="$(_nvcc_pid_namespace)" || { echo "$real/bin/nvcc"; return 0; }
  rm -rf "$shim" && mkdir -p "$shim"
  _write_nvcc_shim "$real" "$ns" "$shim/nvcc"
  echo "$shim/nvcc"
}
