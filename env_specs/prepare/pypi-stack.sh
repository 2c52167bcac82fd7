#!/usr/bin/env bash
# The host externals of the PyPI-stack specs (gcp-b200, h20-roce: their `[host] prepare`), made
# on a new machine; deepep-env never runs this, it names it where those externals are missing.
#   - /opt/deepep-cu130: a venv of CPython 3.12 (python3.12, or $PYTHON312; 3.12.1 is the locked ids'
#     interpreter) with torch 2.11.0 and its CUDA 13 wheels by version and sha256 (cu130-venv.txt beside this
#     file, pip --require-hashes): h20-roce's PyTorch; and what DeepEP's tests import beside it (numpy:
#     tests-venv.txt, by version and sha256);
#   - /opt/deepep-py312: the same interpreter and its own pip, nothing else (gcp-b200's PyTorch is the
#     package deepep-pytorch, built from the wheels recipes/pytorch-wheel/sources.toml pins);
#   - rdma-core's headers (Debian 12's debs by version) unpacked into $RDMA (default /tmp/deepep-rdma): NVSHMEM's
#     IBGDA headers include <infiniband/mlx5dv.h>; then `export DEEPEP_ENV_RDMA_CORE=$RDMA/usr`.
# The CUDA toolkit is not one of them: `[cuda] provider = "wheel"` builds it from NVIDIA's wheels pinned in
# recipes/cuda-wheel/sources.toml. Usage: bash env_specs/prepare/pypi-stack.sh
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
VENV=/opt/deepep-cu130
BARE=/opt/deepep-py312
RDMA=${RDMA:-/tmp/deepep-rdma}
now() { date +%s.%N; }
since() { python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$1" "$(now)"; }

t=$(now)
[ -x "$VENV/bin/python3" ] || "${PYTHON312:-python3.12}" -m venv "$VENV" \
  || { echo "prepare: no Python 3.12 to make $VENV (PYTHON312=/path/to/python3.12)" >&2; exit 1; }
# pip's own progress on a terminal (a few GB of wheels on a fresh machine: minutes); quiet in a log (issue 56)
quiet=(); [ -t 2 ] || quiet=(-q)
echo "prepare: $VENV from $HERE/cu130-venv.txt and tests-venv.txt (hash-pinned wheels)" >&2
"$VENV/bin/pip" install "${quiet[@]}" --no-deps --require-hashes -r "$HERE/cu130-venv.txt" -r "$HERE/tests-venv.txt" || exit 1
[ -x "$BARE/bin/python3" ] || "${PYTHON312:-python3.12}" -m venv "$BARE" || exit 1
echo "venv_s=$(since "$t")"
if [ ! -f "$RDMA/.extracted" ]; then
  echo "prepare: rdma-core 44.0 headers and libraries into $RDMA (apt-get download)" >&2
  d=$(mktemp -d)
  (cd "$d" && apt-get download -q=2 libibverbs-dev=44.0-2 ibverbs-providers=44.0-2 libibverbs1=44.0-2) || exit 1
  mkdir -p "$RDMA" && for f in "$d"/*.deb; do dpkg -x "$f" "$RDMA"; done && touch "$RDMA/.extracted"
  rm -rf "$d"
fi
"$VENV/bin/python3" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>/dev/null
# The interpreter is a host external: its version and headers are in the build ids. The lock was built
# with CPython 3.12.1 (pyenv's); another patch release gives other ids (plan says "other host").
v=$("$VENV/bin/python3" -c 'import platform; print(platform.python_version())')
[ "$v" = 3.12.1 ] || echo "prepare: note: $VENV runs Python $v; the locked ids were built with 3.12.1 (PYTHON312=/path/to/python3.12.1)" >&2
exit 0
