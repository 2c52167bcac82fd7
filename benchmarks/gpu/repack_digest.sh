#!/usr/bin/env bash
# Issue 25.1/25.8: does the conda-mode harness repack byte-identically on another machine? Repack the
# machine's python, pytorch and CUDA (repack_conda.py) and print every package's sha256, so that the
# lists of two fresh machines can be compared (diff the returned repack-sha256.txt files).
# Usage (repo root, GPU machine): GPU_DIR=.gpu bash benchmarks/gpu/repack_digest.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
GPU_DIR=${GPU_DIR:-.gpu}
PY=${PYTHON:-python3}
. benchmarks/gpu/common.sh
setup_tools > "$OUT/setup.txt" 2>&1
t=$(now)
$PY benchmarks/gpu/repack_conda.py /tmp/deepep-repack --wheels "$GPU_DIR/wheels" --rdma /tmp/deepep-rdma/usr \
  > "$OUT/repack.log" 2>&1 || { tail -30 "$OUT/repack.log"; exit 1; }
fig repack_s "$(since "$t")"
(cd /tmp/deepep-repack && sha256sum */*.conda | sort -k2) | tee "$RESULTS/repack-sha256.txt"
fig repack_packages "$(wc -l < "$RESULTS/repack-sha256.txt")"
fig repack_digest "$(sha256sum < "$RESULTS/repack-sha256.txt" | cut -c1-16)"
