#!/usr/bin/env bash
# Two lock_enough.sh runs in one call (one call is at most 10 minutes; a machine start costs minutes of
# device time): a CPU-heavy build (NVSHMEM, NCCL) beside another env's, each in its own checkout.
#
# Usage (repo root, GPU machine):
#   PAIR_B_VARS="REPACK=1 NO_TEST=1" bash benchmarks/gpu/pair.sh reinstall h200-nvlink h200-nvlink-conda
#   PAIR_A_VARS / PAIR_B_VARS: VAR=value words for each run (REPACK=1, NO_TEST=1, PLANT_NCCL=1).
#   PAIR_PIN=1: each run on its own half of the machine's CPUs (taskset; NUMA node 0 and 1 when there
#   are two), so the two builds time like two machines of half the size: item 7's A/B of conda mode
#   against host mode in one call, e.g. on a 2-GPU host (32 cores):
#   PAIR_PIN=1 PAIR_B_VARS="REPACK=1 NO_TEST=1" PAIR_A_VARS="NO_TEST=1" bash benchmarks/gpu/pair.sh \
#     reinstall h200-nvlink h200-nvlink-conda
#
# What a session learnt (docs/benchmarks.md, third round): each run needs its own checkout, WORK and OUT
# and its own DEEPEP_ENV_BUILD_PKGS_DIR (builds that share the build-package cache take turns), but the
# same build root (it is in the bytes and, when moved, in every id); the second run starts once the
# first has extracted the carried debs and python site (extracted once per machine); a call returns at
# most 8 files from $OUT, so each run's lock, record and figures come back under a/ b/ names and the
# rest as one tarball.
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?relock or reinstall}
A=${2:?first env}
B=${3:?second env}
OUT=${OUT:-$PWD/.gpu-out}
mkdir -p "$OUT"
LIMIT=${PAIR_LIMIT_S:-570}
T=${PAIR_TMP:-/tmp}                                   # where both runs' work and output folders go
READY=${PAIR_READY_FILE:-/tmp/deepep-rdma/.extracted}  # common.sh's setup_tools, done once per machine
B_TREE=$T/pair-b
for w in ${PAIR_A_VARS:-} ${PAIR_B_VARS:-}; do   # VAR=value words only: env(1) would run anything else
  [[ "$w" =~ ^[A-Z_][A-Z0-9_]*=[^[:space:]]*$ ]] || { echo "pair.sh: PAIR_A_VARS/PAIR_B_VARS: '$w' is not VAR=value" >&2; exit 2; }
done
PIN_A=() PIN_B=()
if [ -n "${PAIR_PIN:-}" ]; then   # nproc, ninja and rattler-build's CPU_COUNT follow the affinity
  if [ -r /sys/devices/system/node/node1/cpulist ]; then
    cpus_a=$(cat /sys/devices/system/node/node0/cpulist) cpus_b=$(cat /sys/devices/system/node/node1/cpulist)
  else
    n=$(nproc); cpus_a="0-$((n / 2 - 1))" cpus_b="$((n / 2))-$((n - 1))"
  fi
  PIN_A=(taskset -c "$cpus_a") PIN_B=(taskset -c "$cpus_b")
  echo "pair_pin_a=$cpus_a"; echo "pair_pin_b=$cpus_b"
  lscpu | grep -E '^(Model name|Socket|Core|Thread|NUMA node)' || true
fi
rm -rf "$B_TREE" && mkdir -p "$B_TREE"
tar --exclude=./.pixi --exclude='./.deepep-env*' --exclude=./.gpu-out -cf - . | tar -xf - -C "$B_TREE"

one() {  # one() TAG DIR ENV VARS...
  local tag=$1 dir=$2 env=$3 pin; shift 3
  if [ "$tag" = a ]; then pin=("${PIN_A[@]}"); else pin=("${PIN_B[@]}"); fi
  (cd "$dir" && env "$@" GPU_DIR="${GPU_DIR:-.gpu}" WORK="$T/pair-work-$tag" OUT="$T/pair-out-$tag" \
     DEEPEP_ENV_BUILD_PKGS_DIR="$T/pair-pkgs-$tag" timeout "$LIMIT" "${pin[@]}" bash benchmarks/gpu/lock_enough.sh "$MODE" "$env" \
     > "$T/pair-$tag.txt" 2>&1; echo "pair_${tag}_rc=$?" >> "$T/pair-$tag.txt")
}
rm -rf "$T"/pair-work-* "$T"/pair-out-* "$T"/pair-pkgs-*
# shellcheck disable=SC2086
one a "$PWD" "$A" ${PAIR_A_VARS:-} &
for _ in $(seq 120); do [ -f "$READY" ] && break; sleep 1; done
sleep 2
# shellcheck disable=SC2086
one b "$B_TREE" "$B" ${PAIR_B_VARS:-} &
wait
for tag in a b; do
  for f in figures.txt pixi.lock build-inputs.json; do
    [ -f "$T/pair-out-$tag/$f" ] && cp "$T/pair-out-$tag/$f" "$OUT/$tag.$f"
  done
done
tar -czf "$OUT/pair-rest.tgz" -C "$T" pair-a.txt pair-b.txt pair-out-a pair-out-b pair-work-a pair-work-b 2>/dev/null
for tag in a b; do echo "===== $tag"; grep -v '^fp_' "$T/pair-$tag.txt" | tail -25; done
ok() { grep -q "^headline_${MODE}_ok=1" "$T/pair-$1.txt"; }
echo "headline_pair_${MODE}_ok=$( ok a && ok b && echo 1 || echo 0)"
