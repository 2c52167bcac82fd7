#!/usr/bin/env bash
# Issue 17 on a GPU machine (one GPU is enough), with the project's own commands only:
#   fetch --from (carried upstream trees) → build NCCL (sm_90 only) + DeepEP 2.x (rattler-build, keyed
#   by build id) → lock → install → doctor → import probe (which NCCL is mapped) → DeepEP 2.x's legacy
#   low-latency test and tests/elastic/test_ep.py from the installed env → name=value figures; and the
#   hand builds of the same NCCL and DeepEP (make / pip install, no deepep-env) for comparison.
#
# Usage (repo root):  bash benchmarks/gpu/run_v2.sh [phase…]   Three commands on one warm machine,
# each under 9 minutes on 16 cores (estimates from the scouting run: NCCL 252 s, DeepEP 118 s by hand):
#   1. (default) setup build lock install doctor probe lowlatency     ~8 min
#   2. setup ep handdeepep       the EPv2 test (its first use JIT-compiles the kernels) + DeepEP by hand
#   3. setup handnccl            NCCL by hand, the same tree and gencode
# Inputs (no network on the machine):
#   $V2_SOURCES/   DeepEP dd758ca with fmt at third-party/fmt (tar.xz), NCCL v2.30.7-1 (tar.xz):
#                  matched by content hash (docs/gpu-sources.md says how they were made)
#   $GPU_DIR/      pysite/, debs/ as for run_h200.sh (benchmarks/gpu/README.md)
# Every phase checks the clock: one that would run past V2_DEADLINE_S (default 530 s from the start)
# is skipped with a v2_<phase>_skipped=1 figure, so a command never runs into the 10-minute limit.
set -uo pipefail
cd "$(dirname "$0")/../.."
ENV_NAME=${ENV_NAME:-h200-nvlink-v2}
GPU_DIR=${GPU_DIR:-.gpu}
V2_SOURCES=${V2_SOURCES:-.gpu17/sources}
PHASES=${*:-setup build lock install doctor probe lowlatency}
PY=${PYTHON:-python3}
V2PY=${V2_PYTHON:-/opt/torch/.venv/bin/python3}      # the spec's python.executable (PyTorch lives there)
[ -x "$V2PY" ] || V2PY=python3
DEADLINE=${V2_DEADLINE_S:-530}
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)   # every GPU of the host: one rank proves nothing (issue 38)
[ "${NGPU:-0}" -gt 0 ] || NGPU=1
EP_ARGS=${EP_ARGS:---num-processes $NGPU --test-first-only}
EP_TIMEOUT_S=${EP_TIMEOUT_S:-330}   # leaves handdeepep its ~150 s in command 2
LL_ARGS=${LL_ARGS:---num-processes $NGPU}
ARCH_GENCODE=${ARCH_GENCODE:--gencode=arch=compute_90,code=sm_90}   # what the spec's cuda.architectures gives
. benchmarks/gpu/common.sh   # the work folder, figures, setup_tools (pysite, debs, patchelf)

# Time left before the deadline, in seconds; a phase needing more says so and is skipped.
left() { echo $(( DEADLINE - SECONDS )); }
room() {  # phase seconds_needed
  if [ "$(left)" -lt "$2" ]; then echo "skipped $1: needs ~$2 s, $(left) s left before ${DEADLINE} s"; fig "v2_${1}_skipped" 1; return 1; fi
}

setup() {
  step setup
  setup_tools
  $DE fetch "$ENV_NAME" --from "$V2_SOURCES" || exit 1
  $DE spec show "$ENV_NAME" | tail -20
}

build() {
  step "build $ENV_NAME (NCCL then DeepEP 2.x; cold unless the store has them)"
  local t=$(now) report="$OUT/build-$ENV_NAME.json"
  $DE build "$ENV_NAME" --offline --json > "$report" 2> "$OUT/build-$ENV_NAME.err"; local rc=$?
  tail -5 "$OUT/build-$ENV_NAME.err"
  cp "$DEEPEP_ENV_STATE"/logs/*.log* "$OUT/" 2>/dev/null
  fig v2_build_s "$(since "$t")"
  $PY - "$report" <<'PYEOF' | figs
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except ValueError:
    sys.exit(0)
for n in d.get("nodes", []):
    k = "v2_build_" + n["package"].replace("-", "_")
    print(f"{k}_s={n.get('seconds', 0):.1f}")
    print(f"{k}_cold={int(n.get('status') == 'built')}")
    print(f"{k}_build={(n.get('outputs') or ['?'])[0].rsplit('-', 1)[-1].removesuffix('.conda')}")
PYEOF
  if [ $rc -ne 0 ]; then
    for l in "$DEEPEP_ENV_STATE"/logs/*.log; do echo "--- $l"; tail -80 "$l"; done
    exit 1
  fi
}

lock_install() {
  step "lock + install"
  $DE lock "$ENV_NAME" || exit 1   # into pixi.lock, every other environment kept
  cp pixi.lock "$OUT/$ENV_NAME.pixi.lock"
  local t=$(now)
  $DE install "$ENV_NAME" || exit 1   # into pixi's prefix, .pixi/envs/ENV
  fig v2_install_s "$(since "$t")"
}

doctor() {
  step doctor
  $DE doctor "$ENV_NAME" --verbose | tee "$OUT/doctor.txt"; local rc=${PIPESTATUS[0]}
  fig v2_doctor_exit "$rc"
  fig v2_doctor_v2_confirmed "$(grep -c '^ok    deepep-v2\.' "$OUT/doctor.txt")"
  $DE doctor "$ENV_NAME" --json > "$OUT/doctor.json" 2>/dev/null
}

probe() {
  # What the installed env's process really maps: one libnccl, the env's, with torch and deep_ep both
  # imported (deep_ep/__init__.py check_nccl_so runs at import), and the JIT's settings. Then the same
  # import without the overlay (PYTHONPATH only, no LD_PRELOAD): does the site-packages link alone do it?
  step "import probe"
  cat > "$OUT/probe.py" <<'PYEOF'
import os, sys
import torch
ok = 1
try:
    import deep_ep
except Exception as exc:  # the failure is the figure
    ok = 0
    print(f"import_error={type(exc).__name__}: {str(exc)[:300]}".replace("\n", " "))
maps = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libnccl" in l})
pfx = os.environ.get("CONDA_PREFIX", "")
print(f"import_ok={ok}")
print(f"nccl_mapped_count={len(maps)}")
print(f"nccl_mapped={','.join(maps) or 'none'}")
print(f"nccl_in_prefix={int(bool(maps) and bool(pfx) and all(m.startswith(pfx) for m in maps))}")
print(f"torch_nccl_version={'.'.join(map(str, torch.cuda.nccl.version()))}")
print(f"deep_ep_file={getattr(sys.modules.get('deep_ep'), '__file__', 'none')}")
print(f"ep_jit_cache_dir={os.environ.get('EP_JIT_CACHE_DIR', 'unset')}")
PYEOF
  $DE run "$ENV_NAME" -- "$V2PY" "$OUT/probe.py" 2>&1 | tee "$OUT/probe.txt" | sed 's/^/v2_probe_/' | grep -E '^v2_probe_[a-z_]+=' | figs
  local site; site=$(grep -o '^deep_ep_file=.*' "$OUT/probe.txt" | sed 's#^deep_ep_file=##; s#/deep_ep/__init__.py$##')
  if [ -d "$site" ]; then
    PYTHONPATH="$site" "$V2PY" "$OUT/probe.py" 2>&1 | tee "$OUT/probe-plain.txt" | grep -E '^(import_ok|nccl_mapped_count)=' \
      | sed 's/^/v2_probe_without_overlay_/' | figs
  fi
}

run_test() {  # name seconds-reserve cap file args…  (from the installed env, through `deepep-env run`)
  local name=$1 reserve=$2 cap=$3 file=$4; shift 4
  room "$name" "$reserve" || return 0
  local limit=$(( $(left) - 5 )); [ "$limit" -gt "$cap" ] && limit=$cap
  step "DeepEP $file $* (at most $limit s)"
  local t=$(now) pre=()
  # nvcc compiles the JIT's kernels with the host compiler the machine pairs with CUDA (CUDAHOSTCXX),
  # as the builds did (nvcc reads NVCC_PREPEND_FLAGS; DeepEP's JIT has no compiler-binding knob).
  if [ -n "${CUDAHOSTCXX:-}" ]; then pre=(env "NVCC_PREPEND_FLAGS=-ccbin $CUDAHOSTCXX ${NVCC_PREPEND_FLAGS:-}"); fig v2_jit_ccbin "$CUDAHOSTCXX"; fi
  ${pre[@]+"${pre[@]}"} timeout --kill-after=10 "$limit" $DE run "$ENV_NAME" -- \
    bash -c 'exec "$0" "$CONDA_PREFIX/share/deep-ep/tests/'"$file"'" "$@"' "$V2PY" "$@" 2>&1 | tee "$OUT/$name.log"
  fig "v2_${name}_exit" "${PIPESTATUS[0]}"
  fig "v2_${name}_s" "$(since "$t")"
  $PY benchmarks/gpu/parse_deepep.py "$OUT/$name.log" "v2_${name}_" | figs
}

jit_cache() {
  local dir; dir=$($DE run "$ENV_NAME" -- sh -c 'echo "$EP_JIT_CACHE_DIR"' 2>/dev/null | tail -1)
  [ -d "$dir" ] || return 0
  fig v2_jit_kernels "$(find "$dir/cache" -maxdepth 1 -name 'kernel.*' 2>/dev/null | wc -l)"
  fig v2_jit_cache_mb "$(du -sm "$dir" | cut -f1)"
}

handnccl() {
  # The yardstick: NCCL by hand from the same tarball, same target and architectures, plain make.
  room handnccl 300 || return 0
  step "NCCL by hand (make src.lib, $ARCH_GENCODE)"
  rm -rf /tmp/hand-nccl && mkdir -p /tmp/hand-nccl
  tar -xJf "$(ls "$V2_SOURCES"/nccl-v${V2_NCCL_VERSION:-2.30.7}-*.tar.xz | head -1)" -C /tmp/hand-nccl --strip-components=1
  local t=$(now)
  ( cd /tmp/hand-nccl && make -j"$(nproc)" src.lib NVCC_GENCODE="$ARCH_GENCODE" NVCC_GENCODE_LDMC_FP8= \
      CUDA_HOME=/usr/local/cuda ${CUDAHOSTCXX:+CXX=$CUDAHOSTCXX} ) > "$OUT/hand-nccl.log" 2>&1
  fig v2_hand_build_nccl_exit $?
  fig v2_hand_build_nccl_s "$(since "$t")"
}

handdeepep() {
  # DeepEP 2.x by hand: pip install from the same tarball against the hand-built NCCL (else the
  # env's), the machine's pip NVSHMEM (DeepEP's find_pkgs.py), TORCH_CUDA_ARCH_LIST=9.0.
  room handdeepep 150 || return 0
  step "DeepEP 2.x by hand (pip install)"
  rm -rf /tmp/hand-v2 /tmp/hand-v2-site && mkdir -p /tmp/hand-v2 /tmp/hand-v2-site
  tar -xJf "$(ls "$V2_SOURCES"/deepep-dd758ca*.tar.xz | head -1)" -C /tmp/hand-v2 --strip-components=1
  local root=/tmp/hand-nccl/build
  [ -f "$root/include/nccl.h" ] || root="$PWD/.pixi/envs/$ENV_NAME"
  local t=$(now)
  ( cd /tmp/hand-v2 && GIT_DIR=/nonexistent EP_NCCL_ROOT_DIR="$root" TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=$(nproc) \
      CPATH=/tmp/deepep-rdma/usr/include:/usr/local/cuda/targets/x86_64-linux/include/cccl \
      "$V2PY" -m pip install . --no-deps --no-build-isolation --no-index --target /tmp/hand-v2-site ) > "$OUT/hand-deepep.log" 2>&1
  fig v2_hand_build_deepep_exit $?
  fig v2_hand_build_deepep_s "$(since "$t")"
  fig v2_hand_nccl_root "$root"
}

has setup && setup
has build && { room build 420 && build; }
has lock || has install && lock_install
has doctor && doctor
has probe && probe
has lowlatency && run_test lowlatency 45 120 test_low_latency.py $LL_ARGS
has ep && { run_test ep 90 "$EP_TIMEOUT_S" elastic/test_ep.py $EP_ARGS; jit_cache; }
has handnccl && handnccl
has handdeepep && handdeepep
fig v2_elapsed_s "$SECONDS"
# Same-run comparisons from everything measured in this work folder (earlier commands included).
$PY benchmarks/gpu/compare.py "$OUT/figures-all.txt" | tee -a "$FIG"
echo
echo "===== figures"
cat "$FIG"
