#!/usr/bin/env bash
# The seed platforms on PyPI's stack (issue 40): gcp-b200-wheel (seed 000, sm_100) and h20-roce-wheel
# (seed 003, sm_90), DeepEP built on a machine with no GPU from pinned wheels, and the lock shown to be
# enough on a fresh clone.
#
#   bash benchmarks/seed/pypi_stack.sh prereqs                the host externals those specs name: the venv
#        /opt/deepep-cu130 (python3.12 -m venv, or $PYTHON312 -m venv; CPython 3.12.1, the locked ids'
#        interpreter; torch 2.11.0 and its CUDA 13 wheels by version and sha256, benchmarks/seed/cu130-venv.txt,
#        pip --require-hashes: h20-roce-wheel's PyTorch), the bare venv /opt/deepep-py312 (the same interpreter
#        and its own pip, nothing else: gcp-b200-wheel's PyTorch is the package deepep-pytorch, built from the
#        same wheels pinned in recipes/pytorch-wheel/sources.toml) and rdma-core's headers (Debian's debs by version, unpacked into $RDMA, default
#        /tmp/deepep-rdma; NVSHMEM's IBGDA headers include <infiniband/mlx5dv.h>). The CUDA toolkit is no
#        longer one of them: the specs' `[cuda] provider = "wheel"` builds it from NVIDIA's wheels pinned in
#        recipes/cuda-wheel/sources.toml (a package of the graph, in the lock's build ids).
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

prereqs() {
  local t; t=$(now)
  [ -x "$VENV/bin/python3" ] || "${PYTHON312:-python3.12}" -m venv "$VENV" \
    || { echo "pypi_stack: no Python 3.12 to make $VENV (PYTHON312=/path/to/python3.12)" >&2; return 1; }
  # pip's own progress on a terminal (a few GB of wheels, minutes); quiet in a log (issue 56)
  local quiet=(); [ -t 2 ] || quiet=(-q)
  echo "pypi_stack: prereqs: $VENV from $HERE/cu130-venv.txt (hash-pinned wheels, a few GB on a fresh machine)" >&2
  "$VENV/bin/pip" install "${quiet[@]}" --no-deps --require-hashes -r "$HERE/cu130-venv.txt" || return 1
  [ -x "$BARE/bin/python3" ] || "${PYTHON312:-python3.12}" -m venv "$BARE" || return 1
  fig venv_s "$(since "$t")"
  if [ ! -f "$RDMA/.extracted" ]; then
    local d; d=$(mktemp -d)
    echo "pypi_stack: prereqs: rdma-core 44.0 headers and libraries into $RDMA (apt-get download)" >&2
    (cd "$d" && apt-get download -q=2 libibverbs-dev=44.0-2 ibverbs-providers=44.0-2 libibverbs1=44.0-2) || return 1
    mkdir -p "$RDMA" && for f in "$d"/*.deb; do dpkg -x "$f" "$RDMA"; done && touch "$RDMA/.extracted"
  fi
  "$VENV/bin/python3" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>/dev/null
  # The interpreter is a host external: its version and headers are in the build ids. The lock was built
  # with CPython 3.12.1 (pyenv's); another patch release gives other ids (plan says "other host").
  local v; v=$("$VENV/bin/python3" -c 'import platform; print(platform.python_version())')
  [ "$v" = 3.12.1 ] || echo "pypi_stack: note: $VENV runs Python $v; the locked ids were built with 3.12.1 (PYTHON312=/path/to/python3.12.1)" >&2
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
