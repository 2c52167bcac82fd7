#!/usr/bin/env bash
# Build DeepEP's extension with the spec's flags and install the module, its tests and a build record.
set -euo pipefail
# setup.py appends `git rev-parse --short HEAD` to its version: never let it see an enclosing repo.
export GIT_DIR=/nonexistent GIT_CEILING_DIRECTORIES=/

# Host mode: the machine's Python and CUDA toolkit (python_executable, cuda_prefix). Conda mode: the
# host env's python and conda-forge's CUDA layout (recipe.yaml says which packages).
PY="${DEEPEP_PYTHON:-$PREFIX/bin/python}"
[ -x "$PY" ] || command -v "$PY" >/dev/null || { echo "deepep-env: no Python at $PY (python_executable, or python in the host env)" >&2; exit 1; }
site="$PREFIX/lib/python${DEEPEP_PY_VERSION}/site-packages"

# conda-forge's CUDA is split: nvcc, ptxas and nvvm in the build env, the target's headers and
# libraries in the host env under targets/x86_64-linux. torch.utils.cpp_extension wants one
# CUDA_HOME (bin/nvcc, include/, lib64/): this folder joins the two without copying anything.
conda_cuda_home() {
  local home="$1" tgt="targets/x86_64-linux"
  rm -rf "$home" && mkdir -p "$home/bin"
  for e in "$BUILD_PREFIX"/bin/*; do ln -s "$e" "$home/bin/"; done
  [ -d "$BUILD_PREFIX/nvvm" ] && ln -s "$BUILD_PREFIX/nvvm" "$home/nvvm"
  ln -s "$PREFIX/$tgt/include" "$home/include"
  ln -s "$PREFIX/$tgt/lib" "$home/lib64"
  mkdir -p "$home/targets" && ln -s "$PREFIX/$tgt" "$home/$tgt"
  echo "$home"
}
if [ "${DEEPEP_CUDA_PROVIDER:-host}" = conda ]; then
  export CUDA_HOME="$(conda_cuda_home "${SRC_DIR:-$PWD}/../cuda-home")"
  # nvcc compiles host code with the env's g++ (gxx_linux-64 sets CXX), not whatever c++ is on PATH.
  [ -n "${CXX:-}" ] && export CUDAHOSTCXX="${CUDAHOSTCXX:-$(command -v "$CXX")}"
  export CPATH="$PREFIX/targets/x86_64-linux/include${CPATH:+:$CPATH}"
  RDMA="${DEEPEP_RDMA_CORE_PREFIX:-$PREFIX}"
else
  export CUDA_HOME="${DEEPEP_CUDA_PREFIX:-/usr/local/cuda}"
  RDMA="${DEEPEP_RDMA_CORE_PREFIX:-/usr}"
fi

# Reproducible nvcc (docs/build-id.md §7): nvcc names its temporary files, and the module id of each
# relocatable-device-code unit, after its own process id, and both end up in the objects (measured on
# H100 and H200: the only bytes that differed between two builds of the same inputs). In a fresh PID
# namespace nvcc's pid is always the same, so its output is too. CUDA_HOME becomes a shim whose
# bin/nvcc runs the real one that way; everything else links to the real toolkit.
reproducible_nvcc() {
  local real="$1" shim="$2" ns=""
  if unshare --pid --fork true 2>/dev/null; then ns="unshare --pid --fork"
  elif unshare --user --map-root-user --pid --fork true 2>/dev/null; then ns="unshare --user --map-root-user --pid --fork"
  else
    echo "deepep-env: note: cannot make a PID namespace here (unshare refused): nvcc output will embed process ids, so this package will not be byte-reproducible" >&2
    echo "$real"; return
  fi
  rm -rf "$shim" && mkdir -p "$shim/bin"
  for e in "$real"/*; do [ "$(basename "$e")" = bin ] || ln -s "$e" "$shim/"; done
  for e in "$real"/bin/*; do ln -s "$e" "$shim/bin/"; done
  rm -f "$shim/bin/nvcc"
  # Each nvcc gets a temporary folder of its own (in its namespace every nvcc has the same pid, so
  # their tmpxft_<pid>_* files would collide in a shared /tmp), and its .cu inputs get the build's
  # fixed mtime: a unit with no externally visible kernel gets a module id hashed from its source
  # file's mtime (measured; NVSHMEM's configure-time transfer_device.cu is such a unit).
  cat > "$shim/bin/nvcc" <<SHIM
#!/bin/sh
for a in "\$@"; do case "\$a" in *.cu) [ -f "\$a" ] && touch -d "@${SOURCE_DATE_EPOCH:-315532800}" "\$a" ;; esac; done
t=\$(mktemp -d) || exit 1
TMPDIR="\$t" $ns "$(readlink -f "$real/bin/nvcc")" "\$@"
rc=\$?
rm -rf "\$t"
exit \$rc
SHIM
  chmod +x "$shim/bin/nvcc"
  echo "$shim"
}
[ -n "${DEEPEP_SOURCE_DATE_EPOCH:-}" ] && export SOURCE_DATE_EPOCH="$DEEPEP_SOURCE_DATE_EPOCH"
CUDA_HOME="$(reproducible_nvcc "$CUDA_HOME" "${SRC_DIR:-$PWD}/../nvcc-shim")"
export CUDA_HOME
export PATH="$CUDA_HOME/bin:$PATH"
# Our NVSHMEM (deepep-nvshmem) is in the host prefix: headers, libnvshmem_device.a and the
# host library. setup.py adds -rpath $NVSHMEM_DIR/lib, which rattler-build turns into $ORIGIN-relative.
export NVSHMEM_DIR="$PREFIX"
export TORCH_CUDA_ARCH_LIST="${DEEPEP_TORCH_CUDA_ARCH_LIST}"
case "${DEEPEP_AGGRESSIVE_PTX:-false}" in
  true|True|1) export DISABLE_AGGRESSIVE_PTX_INSTRS=0 ;;
  *) export DISABLE_AGGRESSIVE_PTX_INSTRS=1 ;;
esac
[ -n "${DEEPEP_CUDA_HOST_CXX:-}" ] && export CUDAHOSTCXX="$DEEPEP_CUDA_HOST_CXX"
export MAX_JOBS="${CPU_COUNT:-$(nproc)}"
# CUDA 13 keeps CCCL under targets/<arch>/include/cccl; NVSHMEM's headers include cuda/std/* (DeepEP #568).
for d in "$CUDA_HOME/targets/x86_64-linux/include/cccl" "$CUDA_HOME/include/cccl"; do
  [ -d "$d" ] && export CPATH="$d${CPATH:+:$CPATH}"
done
# DeepEP's configs.cuh and NVSHMEM's installed nvshmem_common_ibgda.h include <infiniband/mlx5dv.h>.
[ -d "$RDMA/include/infiniband" ] && export CPATH="$RDMA/include${CPATH:+:$CPATH}"

echo "deepep-env: DeepEP ${DEEPEP_REVISION} arch=${TORCH_CUDA_ARCH_LIST} DISABLE_AGGRESSIVE_PTX_INSTRS=${DISABLE_AGGRESSIVE_PTX_INSTRS} python=$PY cuda=${DEEPEP_CUDA_PROVIDER:-host} jobs=$MAX_JOBS"
"$PY" -c "import torch, sys; print('deepep-env: torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])"

mkdir -p "$site"
# The whole pip log stays in the build log's folder; on failure, the compiler's own error lines.
if ! "$PY" -m pip install . --no-deps --no-build-isolation --no-index --no-compile --target "$site" -v > "$SRC_DIR/../pip-build.log" 2>&1; then
  grep -n -E -B3 -A12 "(error|Error|FAILED)" "$SRC_DIR/../pip-build.log" | head -n 150
  exit 1
fi
tail -n 40 "$SRC_DIR/../pip-build.log"

# The tests DeepEP ships, so an installed env can verify itself (tests import utils.py beside them).
mkdir -p "$PREFIX/share/deep-ep/tests"
cp tests/*.py "$PREFIX/share/deep-ep/tests/"
cp "$RECIPE_DIR/verify_install.py" "$PREFIX/share/deep-ep/verify_install.py"

"$PY" - "$site/deep_ep/_deepep_env_build.json" <<PYEOF
import json, sys
json.dump({
    "format": "deepep-env/deep-ep-build/v1",
    "revision": "${DEEPEP_REVISION}",
    "build_string": "${DEEPEP_BUILD_STRING}",
    "torch_cuda_arch_list": "${TORCH_CUDA_ARCH_LIST}",
    "disable_aggressive_ptx_instrs": int("${DISABLE_AGGRESSIVE_PTX_INSTRS}"),
    "require": [f for f in "${DEEPEP_REQUIRE}".replace("[", "").replace("]", "").replace("'", "").replace('"', "").replace(",", " ").split() if f],
}, open(sys.argv[1], "w"), indent=2)
PYEOF
