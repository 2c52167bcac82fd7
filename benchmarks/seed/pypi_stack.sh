#!/usr/bin/env bash
# The seed platforms on PyPI's stack (issue 40): gcp-b200 (seed 000, sm_100) and h20-roce
# (seed 003, sm_90), DeepEP built on a machine with no GPU from pinned wheels, and the lock shown to be
# enough on a fresh clone.
#
#   bash benchmarks/seed/pypi_stack.sh prereqs                the host externals those specs name:
#        env_specs/prepare/pypi-stack.sh (their `[host] prepare`; its header says what it makes)
#   bash benchmarks/seed/pypi_stack.sh relock ENV SOURCES     fetch (PyPI for the NVSHMEM wheel, SOURCES for
#        DeepEP's tarball), build, lock, pixi sync and export, in this checkout.
#   bash benchmarks/seed/pypi_stack.sh reinstall ENV SOURCES DIR
#        a fresh clone of HEAD in DIR, its own venv (README's command 1 setup), an empty store and channel;
#        `fetch --from SOURCES`, then `install ENV` alone; every package's sha256 against the committed
#        lock; then `activate` and `doctor` (on the bundled A4 capture for a gcp-b200 env), on the prefix.
# SOURCES: a folder holding DeepEP's tarball for the spec's revision (benchmarks/gpu/make_carry.sh makes
# deepep-8a07e7e.tar.xz; `git archive` of a DeepEP clone makes any other; fetch --from checks each
# against the recipes' pinned tree hash; GitHub itself is not reachable from the machines here).
# Figures as name=value lines, the last one the headline.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
VENV=/opt/deepep-cu130
BARE=/opt/deepep-py312
RDMA=${RDMA:-/tmp/deepep-rdma}
export DEEPEP_ENV_RDMA_CORE=$RDMA/usr
fig() { echo "$1=$2"; }
now() { date +%s.%N; }
since() { python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$1" "$(now)"; }

prereqs() {   # the specs' own host preparation (their [host] prepare)
  bash "$ROOT/env_specs/prepare/pypi-stack.sh"
}

relock() {
  ENV_NAME=${1:?ENV}; local src=${2:?SOURCES}; cd "$ROOT" || return 1
  local de=(python3 -m deepep_env.cli.main) t rc
  [ -x .venv/bin/deepep-env ] && de=(.venv/bin/deepep-env)
  "${de[@]}" fetch "$ENV_NAME" --from "$src" || return 1
  t=$(now); "${de[@]}" build "$ENV_NAME" --offline; rc=$?
  fig build_s "$(since "$t")"; fig build_exit "$rc"; [ "$rc" = 0 ] || return 1
  "${de[@]}" lock "$ENV_NAME" && "${de[@]}" pixi sync > /dev/null && "${de[@]}" export --all > /dev/null
}

reinstall() {
  ENV_NAME=${1:?ENV}; local src=${2:?SOURCES} dir=${3:?DIR} t rc
  src=$(cd "$src" && pwd)
  rm -rf "$dir" && git clone -q "$ROOT" "$dir" && ln -sfn "$(cd "$ROOT/../shared" 2>/dev/null && pwd)" "$dir/../shared" 2>/dev/null
  cd "$dir" || return 1
  fig commit "$(git rev-parse --short HEAD)"
  t=$(now)
  python3 -m venv .venv && .venv/bin/pip install -q -e . || return 1
  fig setup_s "$(since "$t")"
  export DEEPEP_ENV_STATE=$dir/.deepep-env-fresh
  local de=.venv/bin/deepep-env
  $de lock "$ENV_NAME" --check || return 1
  $de fetch "$ENV_NAME" --from "$src" || return 1
  t=$(now); $de install "$ENV_NAME"; rc=$?
  fig install_rebuild_s "$(since "$t")"; fig install_exit "$rc"
  .venv/bin/python "$HERE/../gpu/same_as_lock.py" "$ENV_NAME" "$DEEPEP_ENV_STATE/channel" rebuilt_ --totals
  [ "$rc" = 0 ] || return 1
  local host=(); case $ENV_NAME in gcp-b200*) host=(--demo-host gcp-b200-demo) ;; esac
  $de activate "$ENV_NAME" "${host[@]}" > activate.txt 2>&1; fig activate_exit $?
  grep -E "^export (NVSHMEM_IBGDA_NIC_HANDLER|NVSHMEM_QP_DEPTH|DEEP_EP_DEVICE_TO_HCA_MAPPING|LD_PRELOAD)=" activate.txt | head -4
  $de doctor "$ENV_NAME" "${host[@]}" > doctor.txt 2>&1; fig doctor_exit $?
  fig doctor_env_not_installed "$(grep -c 'env.not-installed' doctor.txt)"
}

case ${1:-} in
  prereqs) prereqs ;;
  relock) shift; relock "$@" ;;
  reinstall) shift
    reinstall "$@"; rc=$?
    ok=$([ "$rc" = 0 ] && echo 1 || echo 0)
    fig headline_reinstall_ok "$ok"; exit $((1 - ok)) ;;
  *) echo "pypi_stack: prereqs, relock ENV SOURCES or reinstall ENV SOURCES DIR" >&2; exit 2 ;;
esac
