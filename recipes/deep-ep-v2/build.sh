#!/usr/bin/env bash
# Build DeepEP 2.x's extension (deep_ep._C: legacy kernels + NVSHMEM/NCCL backends; the V2 kernels
# are JIT-compiled at run time) against the spec's NCCL and NVSHMEM, install the module, its tests
# and a build record.
set -euo pipefail
# The helpers the CUDA recipes share (git kept out, SOURCE_DATE_EPOCH, conda CUDA_HOME, nvcc shim):
# recipes/_include/cuda-build.sh.
. "${RECIPE_DIR:-$(dirname "${BASH_SOURCE[0]}")}/cuda-build.sh"

PY="${DEEPEP_PYTHON:-$PREFIX/bin/python}"
[ -x "$PY" ] || command -v "$PY" >/dev/null || { echo "deepep-env: no Python at $PY (python_executable, or python in the host env)" >&2; exit 1; }
site="$PREFIX/lib/python${DEEPEP_PY_VERSION}/site-packages"

# conda mode: CUDA_HOME joins the build and host envs without copying anything (conda_cuda_home).
if [ "${DEEPEP_CUDA_PROVIDER:-host}" = conda ]; then
  export CUDA_HOME="$(conda_cuda_home "${SRC_DIR:-$PWD}/../cuda-home")"
  [ -n "${CXX:-}" ] && export CUDAHOSTCXX="${CUDAHOSTCXX:-$(command -v "$CXX")}"
  export CPATH="$PREFIX/targets/x86_64-linux/include${CPATH:+:$CPATH}"
else
  export CUDA_HOME="${DEEPEP_CUDA_PREFIX:-/usr/local/cuda}"
fi
RDMA="$(rdma_prefix)"

# Reproducible nvcc: CUDA_HOME becomes a shim whose bin/nvcc runs in a fresh PID namespace (docs/build-id.md §8).
CUDA_HOME="$(reproducible_nvcc "$CUDA_HOME" "${SRC_DIR:-$PWD}/../nvcc-shim")"
export CUDA_HOME PATH="$CUDA_HOME/bin:$PATH"

# Where DeepEP's own deep_ep/utils/find_pkgs.py looks: EP_<NAME>_ROOT_DIR, <NAME>_DIR, else the
# nvidia-<name> wheel of the running Python. Nothing else may leak in (setup.py bakes EP_JIT_CACHE_DIR,
# EP_NCCL_ROOT_DIR, EP_NUM_TOPK_IDX_BITS, EP_JIT_PRINT_COMPILER_COMMAND into deep_ep/envs.py).
unset EP_NCCL_ROOT_DIR NCCL_DIR EP_NVSHMEM_ROOT_DIR NVSHMEM_DIR EP_JIT_CACHE_DIR EP_JIT_PRINT_COMPILER_COMMAND EP_NUM_TOPK_IDX_BITS TOPK_IDX_BITS
wheel_version() {  # the version of the host Python's nvidia-<name>-cu* wheel, or nothing
  "$PY" - "$1" <<'PYEOF'
import sys
from importlib.metadata import distributions
for d in distributions():
    n = (d.metadata["Name"] or "").lower().replace("_", "-")
    if n.startswith(f"nvidia-{sys.argv[1]}-cu"):
        print(d.version); break
PYEOF
}
check_wheel() {  # name spec_version: the wheel DeepEP will find is the version the spec (and build id) says
  local got; got="$(wheel_version "$1")"
  case "$got" in "$2"|"$2".*) echo "deepep-env: $1 from the host Python's wheel: $got" ;;
    *) echo "deepep-env: the spec says $1 $2 (provider pip/host), the host Python has nvidia-$1 ${got:-none}" >&2; exit 1 ;; esac
}
case "$DEEPEP_NCCL_PROVIDER" in
  source|conda) export EP_NCCL_ROOT_DIR="$PREFIX" ;;   # baked into deep_ep/envs.py; rattler-build relocates it
  *) check_wheel nccl "$DEEPEP_NCCL_VERSION" ;;
esac
case "$DEEPEP_NVSHMEM_PROVIDER" in
  source) export NVSHMEM_DIR="$PREFIX" ;;
  *) check_wheel nvshmem "$DEEPEP_NVSHMEM_VERSION" ;;
esac

export TORCH_CUDA_ARCH_LIST="${DEEPEP_TORCH_CUDA_ARCH_LIST}"
case "${DEEPEP_AGGRESSIVE_PTX:-false}" in
  true|True|1) export DISABLE_AGGRESSIVE_PTX_INSTRS=0 ;;
  *) export DISABLE_AGGRESSIVE_PTX_INSTRS=1 ;;
esac
[ -n "${DEEPEP_CUDA_HOST_CXX:-}" ] && export CUDAHOSTCXX="$DEEPEP_CUDA_HOST_CXX"
export MAX_JOBS="${CPU_COUNT:-$(nproc)}"
# setup.py hard-codes /usr/local/cuda/include/cccl; CUDA 13 keeps CCCL under targets/<arch>/include/cccl.
while IFS= read -r d; do export CPATH="$d${CPATH:+:$CPATH}"; done < <(cccl_include_dirs "$CUDA_HOME")
# NVSHMEM's installed IBGDA headers include <infiniband/mlx5dv.h>; -lcuda needs a libcuda.so to link.
[ -d "$RDMA/include/infiniband" ] && export CPATH="$RDMA/include${CPATH:+:$CPATH}"
for d in "$CUDA_HOME/lib64/stubs" "$CUDA_HOME/targets/x86_64-linux/lib/stubs" "$PREFIX/lib/stubs"; do
  [ -d "$d" ] && export LIBRARY_PATH="${LIBRARY_PATH:+$LIBRARY_PATH:}$d"
done

echo "deepep-env: DeepEP ${DEEPEP_REVISION} (EPv2) arch=${TORCH_CUDA_ARCH_LIST} nccl=${DEEPEP_NCCL_PROVIDER} ${DEEPEP_NCCL_VERSION} nvshmem=${DEEPEP_NVSHMEM_PROVIDER} ${DEEPEP_NVSHMEM_VERSION} python=$PY cuda=${DEEPEP_CUDA_PROVIDER:-host} jobs=$MAX_JOBS"
"$PY" -c "import torch, sys; print('deepep-env: torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])"

mkdir -p "$site"
if ! "$PY" -m pip install . --no-deps --no-build-isolation --no-index --no-compile --target "$site" -v > "$SRC_DIR/../pip-build.log" 2>&1; then
  grep -n -E -B3 -A12 "(error|Error|FAILED)" "$SRC_DIR/../pip-build.log" | head -n 150
  exit 1
fi
grep -E "^ > |Build summary" "$SRC_DIR/../pip-build.log" | head -20 || true
tail -n 20 "$SRC_DIR/../pip-build.log"

# With a host/pip PyTorch, torch/__init__.py _preload_cuda_deps() dlopens the first
# <sys.path entry>/nvidia/nccl/lib/libnccl.so.* by path; the env's site-packages is first on
# PYTHONPATH, so this link makes that the env's NCCL — one NCCL in the process (check_nccl_so()).
shim=""
if [ "${DEEPEP_PYTORCH_PROVIDER:-host}" != conda ] && [ -n "${EP_NCCL_ROOT_DIR:-}" ]; then
  mkdir -p "$site/nvidia/nccl/lib"
  ln -s ../../../../../libnccl.so.2 "$site/nvidia/nccl/lib/libnccl.so.2"
  shim="nvidia/nccl/lib/libnccl.so.2"
fi

# DeepEP's tests, so an installed env can verify itself: the legacy (V1 API) tests where the
# deepep-test-* tasks look, the EPv2 tests under elastic/. They import deep_ep.utils (installed).
mkdir -p "$PREFIX/share/deep-ep/tests/elastic"
cp tests/legacy/*.py "$PREFIX/share/deep-ep/tests/"
cp tests/elastic/*.py "$PREFIX/share/deep-ep/tests/elastic/"
cp "$RECIPE_DIR/verify_install.py" "$PREFIX/share/deep-ep/verify_install.py"

"$PY" - "$site/deep_ep/_deepep_env_build.json" <<PYEOF
import json, sys
json.dump({
    "format": "deepep-env/deep-ep-build/v1",
    "engine": "v2",
    "revision": "${DEEPEP_REVISION}",
    "build_string": "${DEEPEP_BUILD_STRING}",
    "torch_cuda_arch_list": "${TORCH_CUDA_ARCH_LIST}",
    "disable_aggressive_ptx_instrs": int("${DISABLE_AGGRESSIVE_PTX_INSTRS}"),
    "nccl": {"provider": "${DEEPEP_NCCL_PROVIDER}", "version": "${DEEPEP_NCCL_VERSION}", "torch_preload_link": "${shim}"},
    "nvshmem": {"provider": "${DEEPEP_NVSHMEM_PROVIDER}", "version": "${DEEPEP_NVSHMEM_VERSION}"},
    "jit": {"cache_variable": "EP_JIT_CACHE_DIR", "default_cache": "\$HOME/.deep_ep", "needs": ["nvcc>=12.3", "cuobjdump"]},
    "require": [f for f in "${DEEPEP_REQUIRE}".replace("[", "").replace("]", "").replace("'", "").replace('"', "").replace(",", " ").split() if f],
}, open(sys.argv[1], "w"), indent=2)
PYEOF
