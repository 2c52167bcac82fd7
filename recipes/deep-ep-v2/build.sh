#!/usr/bin/env bash
# Build DeepEP 2.x's extension (deep_ep._C: legacy kernels + NVSHMEM/NCCL backends; the V2 kernels
# are JIT-compiled at run time) against the spec's NCCL and NVSHMEM, install the module, its tests
# and a build record.
set -euo pipefail
# setup.py appends `git rev-parse --short HEAD` to its version: never let it see an enclosing repo.
export GIT_DIR=/nonexistent GIT_CEILING_DIRECTORIES=/

PY="${DEEPEP_PYTHON:-$PREFIX/bin/python}"
[ -x "$PY" ] || command -v "$PY" >/dev/null || { echo "deepep-env: no Python at $PY (python_executable, or python in the host env)" >&2; exit 1; }
site="$PREFIX/lib/python${DEEPEP_PY_VERSION}/site-packages"

# conda-forge's CUDA is split (nvcc in the build env, headers/libraries in the host env under
# targets/x86_64-linux); torch.utils.cpp_extension wants one CUDA_HOME: join the two, no copies.
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
  [ -n "${CXX:-}" ] && export CUDAHOSTCXX="${CUDAHOSTCXX:-$(command -v "$CXX")}"
  export CPATH="$PREFIX/targets/x86_64-linux/include${CPATH:+:$CPATH}"
  RDMA="${DEEPEP_RDMA_CORE_PREFIX:-$PREFIX}"
else
  export CUDA_HOME="${DEEPEP_CUDA_PREFIX:-/usr/local/cuda}"
  RDMA="${DEEPEP_RDMA_CORE_PREFIX:-/usr}"
fi

# Reproducible nvcc (docs/build-id.md §8), as in recipes/deep-ep: a fresh PID namespace per nvcc.
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
for d in "$CUDA_HOME/targets/x86_64-linux/include/cccl" "$CUDA_HOME/include/cccl"; do
  [ -d "$d" ] && export CPATH="$d${CPATH:+:$CPATH}"
done
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
