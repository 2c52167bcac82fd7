#!/usr/bin/env bash
# Every GPU environment on every GPU of the host, in one lease (issues 37 and 38).
#
# A call runs one command of at most 10 minutes and a machine is held at most 30, so the work runs
# detached (setsid) and later calls follow it:
#   bash benchmarks/gpu/every_gpu.sh start MODE ENV...   MODE relock|reinstall; returns at once
#   bash benchmarks/gpu/every_gpu.sh wait SECONDS        follows the log until the work is done or SECONDS pass
#   bash benchmarks/gpu/every_gpu.sh collect             results into $OUT (each env's lock, records, figures)
# What the work does:
#   1. builds: lock_enough.sh MODE ENV for every ENV at once, each in its own copy of this checkout
#      (own store, channel, build-package cache; one build root), NO_TEST=1 (no test, no record);
#      REPACK=1 for a conda-mode env (*-conda); a V1 DeepEP built by hand beside them (HAND=1, the
#      default: `pip install` against the image's pip NVSHMEM, as field notes §3 measure);
#   2. tests, one at a time, each on all the host's GPUs (--num-processes = the GPU count), through
#      `deepep-env task` with no variable set by hand: intranode and low-latency for every env, and the
#      elastic test_ep.py for a DeepEP 2.x env; then the hand-built DeepEPs' tests (V1 intranode; V2
#      test_ep.py built against the env's NCCL, with EP_DISABLE_GIN=1 and that NCCL preloaded by hand as a user
#      must), the V2 env's elastic test again right after it (the ratio's pair: same conditions, nothing
#      building beside either); HAND=0 builds none, HAND=v2 only DeepEP 2.x; TESTS=0 runs no test at all, TESTS=pair only
#      the V2 pair (hand, then env);
#   3. figures as name=value lines (the last: headline_every_gpu_ok), `deepep-env verified --json`.
# Inputs: $GPU_DIR (default .gpu), the carry make_carry.sh makes and checks against its manifest.
set -uo pipefail
cd "$(dirname "$0")/../.."
EG=${EG_DIR:-/tmp/every-gpu}
CMD=${1:?start, wait or collect}
shift

case $CMD in
  start)
    rm -rf "$EG" && mkdir -p "$EG"
    setsid nohup bash benchmarks/gpu/every_gpu.sh run "$@" > "$EG/log" 2>&1 < /dev/null &
    echo "every_gpu: started ($*), log $EG/log"; exit 0 ;;
  wait)
    limit=${1:-540}; t0=$SECONDS; shown=0
    while :; do
      n=$(wc -l < "$EG/log" 2>/dev/null || echo 0)
      [ "$n" -gt "$shown" ] && { sed -n "$((shown + 1)),${n}p" "$EG/log" | grep -v '^fp_'; shown=$n; }
      [ -f "$EG/done" ] && { echo "every_gpu: done"; exit 0; }
      [ $((SECONDS - t0)) -ge "$limit" ] && { echo "every_gpu: still running after ${limit}s"; exit 0; }
      sleep 5
    done ;;
  collect)
    out=${OUT:-$PWD/.gpu-out}; mkdir -p "$out"
    for d in "$EG"/out-*; do e=${d#"$EG"/out-}; [ -f "$d/pixi.lock" ] && cp "$d/pixi.lock" "$out/$e.pixi.lock"; done
    cp "$EG/figures.txt" "$out/" 2>/dev/null
    tar -czf "$out/every-gpu.tgz" -C "$EG" --exclude='tree-*' --exclude='pkgs-*' --exclude='hand*' . 2>/dev/null
    ls -la "$out"; exit 0 ;;
  run) ;;
  *) echo "every_gpu: $CMD: not start, wait or collect" >&2; exit 2 ;;
esac

MODE=${1:?relock or reinstall}
shift
ENVS=("$@")
[ ${#ENVS[@]} -gt 0 ] || { echo "every_gpu: no env named" >&2; exit 2; }
PY=${PYTHON:-python3}
GPU_DIR=$(cd "${GPU_DIR:-.gpu}" && pwd)
WORK=$EG/main OUT=$EG/results
. benchmarks/gpu/common.sh
FIG=$EG/figures.txt
: > "$FIG"
trap 'pack; touch "$EG/done"' EXIT
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fig gpus "$NGPU"
setup_tools    # once: the carried site and rdma-core, before the runs beside each other read them

build_env() {  # build_env ENV: lock_enough.sh in a copy of this checkout
  local env=$1 tree=$EG/tree-$1 vars=(NO_TEST=1)
  [ "${env%-conda}" != "$env" ] && vars+=(REPACK=1)
  mkdir -p "$tree" && tar --exclude=./.pixi --exclude='./.deepep-env*' --exclude=./.gpu-out --exclude='./.gpu*' -cf - . | tar -xf - -C "$tree"
  (cd "$tree" && env "${vars[@]}" GPU_DIR="$GPU_DIR" WORK="$EG/work-$env" OUT="$EG/out-$env" \
     DEEPEP_ENV_BUILD_PKGS_DIR="$EG/pkgs-$env" timeout "${BUILD_LIMIT_S:-1500}" \
     bash benchmarks/gpu/lock_enough.sh "$MODE" "$env" > "$EG/$env.txt" 2>&1; echo "build_rc=$?" >> "$EG/$env.txt")
}

hand_v1() {  # DeepEP 1.2.1 by hand: the recipe's tree, the image's pip NVSHMEM, `pip install`
  rm -rf "$EG/hand" "$EG/hand-site" && mkdir -p "$EG/hand" "$EG/hand-site"
  tar -xJf "$GPU_DIR"/sources/deepep-8a07e7e.tar.xz -C "$EG/hand" --strip-components=1
  local t; t=$(now)
  ( cd "$EG/hand" && GIT_DIR=/nonexistent TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 \
      CPATH=/tmp/deepep-rdma/usr/include:/usr/local/cuda/targets/x86_64-linux/include/cccl \
      $PY -m pip install . --no-deps --no-build-isolation --no-index --target "$EG/hand-site" ) > "$EG/hand-build.log" 2>&1
  echo "hand_v1_build_exit=$?" >> "$EG/hand-build.log"; echo "hand_v1_build_s=$(since "$t")" >> "$EG/hand-build.log"
}

hand_v2() {  # DeepEP 2.1.0 by hand against the env's NCCL (the same NCCL build), `pip install`
  local root=$EG/tree-h200-nvlink-v2/.pixi/envs/h200-nvlink-v2
  [ -f "$root/include/nccl.h" ] || return 0
  rm -rf "$EG/hand-v2" "$EG/hand-v2-site" && mkdir -p "$EG/hand-v2" "$EG/hand-v2-site"
  tar -xJf "$GPU_DIR"/sources/deepep-dd758ca*.tar.xz -C "$EG/hand-v2" --strip-components=1
  # The image exports CXX=/opt/gcc/bin/g++ (Ubuntu 13.3.0-6ubuntu2~24.04), and torch's extension builder
  # compiles and links with $CXX: the extension it made carried libstdc++ inside it, a second C++ runtime
  # beside torch's libstdc++.so.6, and died with SIGSEGV in its first dispatch (2026-11-28, H100: the
  # hand build's extension inside the env's package crashed, the env's extension inside the hand build's
  # package passed; the hand .so had no NEEDED libstdc++.so.6 and 2578 exported std:: symbols, the env's 333).
  # The recipe never sees that CXX (rattler-build's build environment drops it) and links with the PATH's
  # c++; so does this baseline now.
  ( cd "$EG/hand-v2" && env -u CXX -u CC GIT_DIR=/nonexistent EP_NCCL_ROOT_DIR="$root" TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 \
      CPATH=/tmp/deepep-rdma/usr/include:/usr/local/cuda/targets/x86_64-linux/include/cccl \
      $PY -m pip install . --no-deps --no-build-isolation --no-index --target "$EG/hand-v2-site" ) > "$EG/hand-v2-build.log" 2>&1
  echo "hand_v2_build_exit=$?" >> "$EG/hand-v2-build.log"
  # the NCCL it was built against is the one torch loads: what `pip install -U nvidia-nccl-cu13==<the env's>`
  # does to the venv (torch/__init__.py dlopens the first <sys.path>/nvidia/nccl/lib/libnccl.so.* by path);
  # the machine has no index, so a link in the hand build's own --target site stands for that wheel
  mkdir -p "$EG/hand-v2-site/nvidia/nccl/lib" && ln -sf "$root/lib/libnccl.so.2" "$EG/hand-v2-site/nvidia/nccl/lib/libnccl.so.2"
}

swap_v2() {  # SWAP=1 (issue 38 diagnosis): which half of the hand build dies, its extension or its package
  local envsite=$EG/tree-h200-nvlink-v2/.pixi/envs/h200-nvlink-v2/lib/python3.12/site-packages hand=$EG/hand-v2-site
  local so_env so_hand
  so_env=$(ls "$envsite"/deep_ep/_C*.so 2>/dev/null | head -1); so_hand=$(ls "$hand"/deep_ep/_C*.so 2>/dev/null | head -1)
  [ -n "$so_env" ] && [ -n "$so_hand" ] || { fig swap_skipped 1; return; }
  step "the two DeepEP 2.1.0 builds, file by file (deep_ep/; the extension's sha256 and size)"
  (cd "$envsite" && find deep_ep -type f ! -name '*.pyc' | LC_ALL=C sort | xargs sha256sum) > "$EG/swap-env.sha256"
  (cd "$hand" && find deep_ep -type f ! -name '*.pyc' | LC_ALL=C sort | xargs sha256sum) > "$EG/swap-hand.sha256"
  diff "$EG/swap-env.sha256" "$EG/swap-hand.sha256" | grep '^[<>]' | sed 's/^/  /' | head -20
  diff "$envsite/deep_ep/envs.py" "$hand/deep_ep/envs.py" | head -10
  ls -la "$so_env" "$so_hand"
  readelf -d "$so_env" | grep -E 'NEEDED|RPATH|RUNPATH' | sed 's/^/  env  /'
  readelf -d "$so_hand" | grep -E 'NEEDED|RPATH|RUNPATH' | sed 's/^/  hand /'
  # C: the env's package with the hand build's extension; D: the hand build's package with the env's
  rm -rf "$EG/hand-v2-site-C" "$EG/hand-v2-site-D"
  cp -a "$hand" "$EG/hand-v2-site-D" && cp -a "$so_env" "$EG/hand-v2-site-D/deep_ep/$(basename "$so_hand")"
  mkdir -p "$EG/hand-v2-site-C" && cp -a "$envsite/deep_ep" "$EG/hand-v2-site-C/" && cp -a "$hand/nvidia" "$EG/hand-v2-site-C/" \
    && rm -f "$EG/hand-v2-site-C/deep_ep/$(basename "$so_env")" && cp -a "$so_hand" "$EG/hand-v2-site-C/deep_ep/"
  for v in C D; do
    HAND_ARGS=--test-first-only hand_test "swap_${v}_elastic" "$EG/hand-v2-site-$v" "$EG/hand-v2/tests" elastic/test_ep.py \
      EP_DISABLE_GIN=1 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 PYTHONFAULTHANDLER=1
  done
}

step "builds: ${ENVS[*]} ($MODE), each in its own checkout copy"
t=$(now)
want_v2() { [ "${TESTS:-1}" != 0 ] && { [ "${HAND:-1}" = 1 ] || [ "${HAND:-}" = v2 ]; }; }
for env in "${ENVS[@]}"; do
  # the hand-built DeepEP 2.x needs the V2 env's NCCL: it builds as soon as that env is installed
  if [ "$env" = h200-nvlink-v2 ] && want_v2; then { build_env "$env"; hand_v2; } & else build_env "$env" & fi
  sleep 2
done
[ "${HAND:-1}" = 1 ] && [ "${TESTS:-1}" != 0 ] && hand_v1 &
wait
fig builds_s "$(since "$t")"
for env in "${ENVS[@]}"; do
  k=${env//-/_}
  grep -v '^fp_' "$EG/$env.txt" | tail -8
  sed -nE 's/^(built_[a-z0-9_]+_s|rebuilt_same_sha256|rebuilt_packages|install_exit|build_exit|doctor_exit|build_rc)=(.*)$/\1=\2/p' "$EG/$env.txt" \
    | sed "s/^/${k}_/" | figs
done
cat "$EG/hand-build.log" 2>/dev/null | grep '^hand_v1_' | figs

run_task() {  # run_task ENV TASK FIGPREFIX EXTRA...: one DeepEP test on all GPUs, through deepep-env task
  local env=$1 task=$2 name=$3 t; shift 3
  local tree=$EG/tree-$env
  [ -d "$tree/.pixi/envs/$env" ] || { fig "${name}_skipped" 1; return; }
  step "$env: $task on $NGPU GPU(s)"
  t=$(now)
  (cd "$tree" && PYTHONPATH=/tmp/deepep-site:$tree DEEPEP_ENV_STATE=$tree/.deepep-env-$MODE \
     timeout "${TEST_LIMIT_S:-300}" $PY -m deepep_env.cli.main task "$task" -e "$env" -- --num-processes "$NGPU" "$@") \
     > "$EG/$name.log" 2>&1
  fig "${name}_exit" $?
  fig "${name}_s" "$(since "$t")"
  tail -4 "$EG/$name.log"
  $PY benchmarks/gpu/parse_deepep.py "$EG/$name.log" "${name}_" | figs
}

hand_test() {  # hand_test NAME SITE TESTDIR SCRIPT [VAR=value...]: a hand build's own test, by hand
  local name=$1 site=$2 dir=$3 script=$4; shift 4
  [ -d "$site" ] && [ -n "$(ls "$site" 2>/dev/null)" ] || { fig "${name}_skipped" 1; return; }
  step "hand build: $script on $NGPU GPU(s)"
  (cd "$dir" && env "$@" PYTHONPATH="$site" timeout "${TEST_LIMIT_S:-300}" $PY "$script" --num-processes "$NGPU" \
     ${HAND_ARGS:-}) > "$EG/$name.log" 2>&1
  fig "${name}_exit" $?
  tail -4 "$EG/$name.log"
  $PY benchmarks/gpu/parse_deepep.py "$EG/$name.log" "${name}_" | figs
}

case ${TESTS:-1} in 0|pair) ENVS_TESTED=() ;; *) ENVS_TESTED=("${ENVS[@]}") ;; esac
for env in ${ENVS_TESTED[@]+"${ENVS_TESTED[@]}"}; do
  k=${env//-/_}
  run_task "$env" deepep-test-intranode "${k}_intranode"
  run_task "$env" deepep-test-low-latency "${k}_lowlatency"
  [ "${env%-v2}" != "$env" ] && run_task "$env" deepep-test-elastic-ep "${k}_elastic" --test-first-only
done
wait
if want_v2; then
  [ "${HAND:-1}" = 1 ] && hand_test hand_intranode "$EG/hand-site" "$EG/hand/tests" test_intranode.py
  # one NCCL in the process, the one it was built against (hand_v2's site link: a pip NCCL upgrade), so
  # DeepEP's own check_nccl_so passes unaided. Tried before and dropped (2026-11-27): LD_PRELOAD of the env's
  # NCCL leaves torch's pip copy mapped beside it ("Duplicate NCCL runtime"); skipping that check with
  # EP_SUPPRESS_NCCL_CHECK=1 runs with two NCCLs and dies with SIGSEGV in the first dispatch (H100 and 2x H200).
  # NVLink multicast off, as the lent machines require and the env's spec [env] sets; no Gin transport here.
  HAND_ARGS=--test-first-only hand_test hand_v2_elastic "$EG/hand-v2-site" "$EG/hand-v2/tests" elastic/test_ep.py \
    EP_DISABLE_GIN=1 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 PYTHONFAULTHANDLER=1
  # where it dies: each rank's Python stack at the fault (faulthandler; spawned ranks inherit the variable)
  grep -A14 -m2 "Fatal Python error" "$EG/hand_v2_elastic.log" | head -40
  if grep -q '^hand_v2_elastic_exit=[1-9]' "$FIG"; then  # diagnosis only: the hand build under the env's activation
    step "hand build: elastic/test_ep.py inside deepep-env run h200-nvlink-v2 (hand site first)"
    (cd "$EG/hand-v2/tests" && PYTHONPATH=/tmp/deepep-site:$EG/tree-h200-nvlink-v2 timeout "${TEST_LIMIT_S:-300}" \
       $PY -m deepep_env.cli.main run h200-nvlink-v2 --prefix "$EG/tree-h200-nvlink-v2/.pixi/envs/h200-nvlink-v2" -- \
       bash -c 'PYTHONPATH=$0:$PYTHONPATH exec python3 elastic/test_ep.py --num-processes $1 --test-first-only' \
       "$EG/hand-v2-site" "$NGPU") > "$EG/hand_v2_under_env.log" 2>&1
    fig hand_v2_under_env_exit $?
    tail -4 "$EG/hand_v2_under_env.log"
  fi
  [ "${SWAP:-0}" = 1 ] && swap_v2
  [ -d "$EG/hand-v2-site/deep_ep" ] && run_task h200-nvlink-v2 deepep-test-elastic-ep h200_nvlink_v2_elasticpair --test-first-only
fi
for env in "${ENVS[@]}"; do
  (cd "$EG/tree-$env" && PYTHONPATH=/tmp/deepep-site:$EG/tree-$env $PY -m deepep_env.cli.main verified --json \
     > "$EG/out-$env/verified.json" 2>&1; cp -r verified "$EG/out-$env/" 2>/dev/null)
done
$PY benchmarks/gpu/every_ratios.py "$FIG" | figs
# the environments' tests decide the headline; the hand builds are baselines and diagnoses (a hand V2 that
# dies is a missing ratio, not a failed environment: it read 0 for that alone on 2026-11-28)
bad=$(grep -E '_(intranode|lowlatency|elastic)_exit=[1-9]' "$FIG" | grep -vc '^hand_')
fails=$(grep -cE '_build_rc=[1-9]' "$FIG")
fig headline_every_gpu_ok "$([ "$bad" = 0 ] && [ "$fails" = 0 ] && echo 1 || echo 0)"
