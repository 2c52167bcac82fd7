#!/usr/bin/env bash
# Build DeepEP's extension with the spec's flags and install the module, its tests and a build record.
set -euo pipefail
# The helpers the CUDA recipes share (git kept out, SOURCE_DATE_EPOCH, conda CUDA_HOME, nvcc shim):
# recipes/_include/cuda-build.sh.
. "${RECIPE_DIR:-$(dirname "${BASH_SOURCE[0]}")}/cuda-build.sh"

# Host mode: the machine's Python and CUDA toolkit (python_executable, cuda_prefix). Conda mode: the
# host env's python and conda-forge's CUDA layout (recipe.yaml says which packages).
PY="${DEEPEP_PYTHON:-$PREFIX/bin/python}"
[ -x "$PY" ] || command -v "$PY" >/dev/null || { echo "deepep-env: no Python at $PY (python_executable, or python in the host env)" >&2; exit 1; }
site="$PREFIX/lib/python${DEEPEP_PY_VERSION}/site-packages"

# conda mode: CUDA_HOME joins the build and host envs without copying anything (conda_cuda_home).
if [ "${DEEPEP_CUDA_PROVIDER:-host}" = conda ]; then
  export CUDA_HOME="$(conda_cuda_home "${SRC_DIR:-$PWD}/../cuda-home")"
  # nvcc compiles host code with the env's g++ (gxx_linux-64 sets CXX), not whatever c++ is on PATH.
  [ -n "${CXX:-}" ] && export CUDAHOSTCXX="${CUDAHOSTCXX:-$(command -v "$CXX")}"
  export CPATH="$PREFIX/targets/x86_64-linux/include${CPATH:+:$CPATH}"
else
  export CUDA_HOME="${DEEPEP_CUDA_PREFIX:-/usr/local/cuda}"
fi
RDMA="$(rdma_prefix)"

# Reproducible nvcc: CUDA_HOME becomes a shim whose bin/nvcc runs in a fresh PID namespace (docs/build-id.md §8).
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
while IFS= read -r d; do export CPATH="$d${CPATH:+:$CPATH}"; done < <(cccl_include_dirs "$CUDA_HOME")
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
