#!/usr/bin/env bash
# An environment built and locked on a machine with no GPU (issue 40: h20-roce, DeepEP for sm_90
# from PyPI's stack), run on this machine's GPUs through the project's own commands:
#   GPU_DIR=.gpuN bash benchmarks/gpu/cpu_built.sh ENV
# Its DeepEP package comes in the carry ($GPU_DIR/cpu-built/*.conda, the very file the lock names by
# sha256: install checks it); every other package (NVSHMEM from NVIDIA's wheel, deepep-env) is rebuilt
# here from the lock and must come out byte-identical. The spec's interpreter, /opt/deepep-cu130, is the
# image's own torch 2.11.0+cu130 venv (a link: the same PyPI release the package was built against).
# Then DeepEP's intranode and low-latency tests on every GPU of the host through `deepep-env task`, nothing
# set by hand (round fourteen needed a third call for the second: one call now does both).
# Figures as name=value lines, the last one the headline. The test's record lands in this working tree,
# which the device's next call replaces with the local one (one record was lost so, 2026-11-28), so it is
# copied to $WORK/verified, which common.sh packs into the caller's $OUT/results.tgz at exit.
set -uo pipefail
cd "$(dirname "$0")/../.."
ENV_NAME=${1:?env}
GPU_DIR=${GPU_DIR:-.gpu}
PY=${PYTHON:-python3}
WORK=${WORK:-/tmp/cpu-built}
mkdir -p "$WORK"
. benchmarks/gpu/common.sh
setup_tools
rebuild_skeletons || exit 1   # NVIDIA's NVSHMEM wheel, rebuilt from the image's install
[ -e /opt/deepep-cu130 ] || ln -s /opt/torch/.venv /opt/deepep-cu130
export DEEPEP_ENV_STATE=$PWD/.deepep-env-cpu-built
rm -rf "$DEEPEP_ENV_STATE" .pixi
DE=($PY -m deepep_env.cli.main)
# The sources of what is rebuilt here (NVSHMEM's wheel, deepep-env). A wheel-CUDA env's ten toolkit wheels
# (115 MB) do not fit the carry (64 MiB) and are not needed: only DeepEP builds against them, and it comes
# built. So fetch says they are missing (exit 2) after caching the rest; the install below is the check.
"${DE[@]}" fetch "$ENV_NAME" --from "$GPU_DIR/sources" > "$WORK/fetch.txt" 2>&1; fig cpu_built_fetch_exit $?
grep -o "error: .*" "$WORK/fetch.txt" | cut -c1-200
mkdir -p "$DEEPEP_ENV_STATE/channel/linux-64" && cp "$GPU_DIR"/cpu-built/*.conda "$DEEPEP_ENV_STATE/channel/linux-64/"
t=$(now)
"${DE[@]}" install "$ENV_NAME" > "$WORK/install.txt" 2>&1; rc=$?
tail -6 "$WORK/install.txt"
fig cpu_built_install_exit "$rc"; fig cpu_built_install_s "$(since "$t")"
$PY benchmarks/gpu/same_as_lock.py "$ENV_NAME" "$DEEPEP_ENV_STATE/channel" cpu_built_ | figs
[ "$rc" = 0 ] || { fig headline_cpu_built_ok 0; exit 1; }
"${DE[@]}" doctor "$ENV_NAME" > "$WORK/doctor.txt" 2>&1; fig cpu_built_doctor_exit $?
grep -E "^(ERROR|WARN)|errors," "$WORK/doctor.txt" | head -8
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
cpu_built_test() {  # cpu_built_test TASK NAME: one DeepEP test on every GPU through `deepep-env task`
  local t rc; t=$(now)
  timeout 300 "${DE[@]}" task "$1" -e "$ENV_NAME" -- --num-processes "$NGPU" > "$WORK/$2.log" 2>&1
  rc=$?
  fig "cpu_built_$2_exit" "$rc"; fig "cpu_built_$2_s" "$(since "$t")"
  tail -3 "$WORK/$2.log"
  $PY benchmarks/gpu/parse_deepep.py "$WORK/$2.log" "cpu_built_$2_" | figs
  return "$rc"
}
cpu_built_test deepep-test-intranode intranode; ok=$?
cpu_built_test deepep-test-low-latency lowlatency || ok=1
rm -rf "$WORK/verified" && mkdir -p "$WORK/verified" && cp -r "verified/$ENV_NAME" "$WORK/verified/" 2>/dev/null
fig headline_cpu_built_ok "$([ "$ok" = 0 ] && echo 1 || echo 0)"
