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
repack_channel
cat "$OUT/repack-sha256.txt"
cp "$OUT/repack-sha256.txt" "$RESULTS/"
