#!/usr/bin/env bash
# Issue 25 on a GPU machine (one GPU): the lock is enough.
#
# Usage (repo root):  bash benchmarks/gpu/lock_enough.sh MODE ENV
#   relock ENV    cold build of ENV with the project's own commands, lock it into pixi.lock (and
#                 lockfiles/build-inputs.json), install, run DeepEP's test through `deepep-env task`;
#                 returns pixi.lock, pixi.toml and build-inputs.json in $OUT to commit.
#   reinstall ENV what a fresh clone does: an empty store and channel, sources from the carry folder,
#                 then only `deepep-env install ENV` (substitute, else rebuild from the recipe; accepted
#                 only if every sha256 equals the committed lock's), then the test through `task`.
#   REPACK=1      a conda-mode env: repack the machine's python/pytorch/CUDA first (repack_conda.py) and
#                 serve it at the spec's repack URL; reinstall then compares those packages' sha256 too.
#   KEEP_PKGS="deep-ep ..."  those rebuilt packages come back in $OUT/pkgs/ with their member lists
#                 (a package that differs from the lock gets its member list anyway).
#   NO_TEST=1     build, lock/install and compare only: no test runs and no test record is written
#                 (a --help run once counted as a verified test, issue 38)
#   PLANT_NCCL=1  (a V2 env) after the install: doctor as installed, then doctor with pip torch's NCCL
#                 preloaded ahead of the env's (issue 27.5: the downgrade of DeepEP #710 must be caught).
# Inputs: $GPU_DIR (default .gpu): skeletons/*.skel (wheels rebuilt from the image's install), sources/ (DeepEP 8a07e7e, NVSHMEM 3.4.5, DeepEP dd758ca+fmt, NCCL
# 2.30.7), debs/, pysite/ (benchmarks/gpu/README.md); optional evidence/*.conda (a
# package to compare with this run's: same-named members, sha256 each).
# Output: name=value figures; the last line is the headline.
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:?relock or reinstall}
ENV_NAME=${2:?env name}
GPU_DIR=${GPU_DIR:-.gpu}
PY=${PYTHON:-python3}
. benchmarks/gpu/common.sh
export DEEPEP_ENV_STATE=$PWD/.deepep-env-$MODE          # an empty store and channel every run
rm -rf "$DEEPEP_ENV_STATE" .pixi
setup_tools
# Wheels too big to carry, rebuilt byte for byte from the image's own install (wheel_skeleton.py; the
# recipe and `fetch` check the pinned sha256 again).
rebuild_skeletons || exit 1
# A conda-mode env (REPACK=1, e.g. h200-nvlink-conda): the machine's python, pytorch and CUDA repacked
# into a conda-forge-shaped channel (repack_conda.py, byte-reproducible), served at the spec's repack URL.
if [ -n "${REPACK:-}" ]; then
  step "repack the machine's python, pytorch and CUDA as a channel"
  repack_channel
  export DEEPEP_ENV_MIRRORS="https://conda.deepep-env.example/repack=$REPACK_CHAN"
fi
$DE fetch "$ENV_NAME" --from "$GPU_DIR/sources" > "$OUT/fetch.txt" 2>&1 || { cat "$OUT/fetch.txt"; exit 1; }

package_seconds() {  # each package's build time as the builder printed it ("built  PKG VERSION BUILD  12.3s"),
  # and the timestamped build logs beside the figures (issue 25.7: conda mode against host mode)
  sed -nE 's/^built +([A-Za-z0-9_.-]+) +[^ ]+ +[^ ]+ +([0-9.]+)s$/built_\1_s=\2/p' "$1" | tr '-' '_' | figs
  mkdir -p "$OUT/logs" && cp "$DEEPEP_ENV_STATE"/logs/* "$OUT/logs/" 2>/dev/null
  # what isolation cost each build, from its live log: the package-cache checks and the normalization
  grep -h "package cache checked in\|normalized in\|Archive written to" "$DEEPEP_ENV_STATE"/logs/*.live 2>/dev/null \
    | sed -E "s/Archive written to '.*\/([^/]*)\.conda'/built \1/"
  return 0
}

facts() {  # what the build ids of this host say about it (the fingerprints), and the image's compilers
  step "host facts"
  $DE plan "$ENV_NAME" --json 2>/dev/null > "$OUT/plan.json"
  $PY - "$OUT/plan.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
for n in d.get("builds") or []:
    for comp, ident in ((n.get("preimage") or {}).get("externals") or {}).items():
        for k, v in (ident.get("fingerprint") or {}).items():
            print(f"fp_{n['package']}_{comp}_{k}={v}")
PYEOF
  dpkg-query -W -f='${Package}=${Version}\n' 'g++-13' 'gcc-13' 'python3.12' 'libpython3.12-dev' 2>/dev/null
  /opt/torch/.venv/bin/python3 -c "import setuptools, pip; print('setuptools', setuptools.__version__, 'pip', pip.__version__)"
}

test_task() {   # DeepEP's tests through the task, on every GPU of the host (issue 38: one rank proves nothing)
  local ngpu task args
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  for task in deepep-test-intranode deepep-test-low-latency deepep-test-elastic-ep; do
    args="--num-processes ${ngpu:-1}"
    if [ "$task" = deepep-test-elastic-ep ]; then
      [ "${ENV_NAME%-v2}" != "$ENV_NAME" ] || continue
      args="$args --test-first-only"
    fi
    step "DeepEP test through the task ($task, $args)"
    local t=$(now) k=${task#deepep-test-}
    k=test_${k//-/_}
    timeout 300 $DE task "$task" -e "$ENV_NAME" -- $args > "$OUT/$k.log" 2>&1
    fig "${k}_exit" $?
    fig "${k}_s" "$(since "$t")"
    tail -8 "$OUT/$k.log"
    $PY benchmarks/gpu/parse_deepep.py "$OUT/$k.log" "${k}_" | figs
  done
}

evidence() {  # compare this run's deep-ep with a carried package, member by member
  local e
  for e in "$GPU_DIR"/evidence/*.conda; do
    [ -f "$e" ] || continue
    step "this run's package against $(basename "$e")"
    $PY - "$e" "$DEEPEP_ENV_STATE/channel" <<'PYEOF'
import sys, glob, os
from deepep_env.builder.check import compare_packages
ev = sys.argv[1]
name = os.path.basename(ev).rsplit("-", 2)[0]
mine = sorted(glob.glob(f"{sys.argv[2]}/*/{name}-*.conda"))
for m in mine:
    diffs = compare_packages(ev, m)
    print(f"evidence_diff_members={len(diffs)}")
    for d in diffs[:40]:
        print("  ", d)
PYEOF
  done
}

if [ "$MODE" = relock ]; then
  step "cold build of $ENV_NAME"
  t=$(now)
  $DE build "$ENV_NAME" --offline > "$OUT/build.txt" 2>&1; rc=$?
  tail -8 "$OUT/build.txt"; package_seconds "$OUT/build.txt"
  fig build_s "$(since "$t")"; fig build_exit "$rc"
  [ "$rc" = 0 ] || { for l in "$DEEPEP_ENV_STATE"/logs/*.log; do tail -40 "$l"; done; exit 1; }
  $DE lock "$ENV_NAME" && $DE pixi sync >/dev/null || exit 1
  cp pixi.lock pixi.toml lockfiles/build-inputs.json "$RESULTS/"
  facts
  evidence
  t=$(now); $DE install "$ENV_NAME" || exit 1; fig install_s "$(since "$t")"
  step "doctor on the installed env"
  $DE doctor "$ENV_NAME" > "$OUT/doctor.txt" 2>&1; fig doctor_exit $?
  grep -E "^(ERROR|WARN)" "$OUT/doctor.txt" | head -20; tail -3 "$OUT/doctor.txt"
  ls .pixi/envs/"$ENV_NAME"/lib/libnvshmem* .pixi/envs/"$ENV_NAME"/lib/nvshmem_* 2>/dev/null | head -12
else
  # The lock must be this checkout's (CI's checks): a tool package locked from other code
  # cannot be rebuilt under its id, and install would say so only after the long builds.
  { $DE lock "$ENV_NAME" --check && $DE lock all --only deepep-env --check; } > "$OUT/lock-check.txt" 2>&1 || { cat "$OUT/lock-check.txt"; exit 1; }
  step "fresh clone: install $ENV_NAME from the committed lock alone"
  t=$(now)
  $DE install "$ENV_NAME" > "$OUT/install.txt" 2>&1; rc=$?
  tail -12 "$OUT/install.txt"; package_seconds "$OUT/install.txt"
  fig install_rebuild_s "$(since "$t")"; fig install_exit "$rc"
  # Every rebuilt package against the lock, also when install refused (the refused one stays in the
  # channel); each that differs gets its members' sha256 listed in the work folder (results.tgz), so two
  # machines' lists can be diffed without carrying the packages back.
  $PY benchmarks/gpu/same_as_lock.py "$ENV_NAME" "$DEEPEP_ENV_STATE/channel" rebuilt_ --totals \
    --also "${REPACK_CHAN:-}" --members "$OUT" | figs   # the repack channel's packages too (REPACK=1)
  [ "$rc" = 0 ] || exit 1
fi
plant_nccl_downgrade() {  # issue 27.5: torch's pip NCCL preloaded ahead of the env's; doctor must say so
  local torch_nccl pfx=".pixi/envs/$ENV_NAME"
  torch_nccl="$(/opt/torch/.venv/bin/python3 -c 'import glob, nvidia.nccl as n; print(sorted(glob.glob(n.__path__[0] + "/lib/libnccl.so*"))[0])')"
  step "doctor, as installed"
  $DE doctor "$ENV_NAME" > "$OUT/doctor-clean.txt" 2>&1; fig doctor_clean_exit $?
  grep -E "^(✗|!|error|warning)|nccl" "$OUT/doctor-clean.txt" | head -20
  step "doctor with torch's NCCL preloaded ahead of the env's ($torch_nccl)"
  LD_PRELOAD="$torch_nccl" $DE doctor "$ENV_NAME" -v > "$OUT/doctor-planted.txt" 2>&1; fig doctor_planted_exit $?
  grep -n -A6 "nccl-downgraded" "$OUT/doctor-planted.txt" | head -30
  fig planted_nccl_downgrade_caught "$(grep -c 'deepep-v2.nccl-downgraded' "$OUT/doctor-planted.txt")"
  fig planted_by_ncclGetVersion "$(grep -c 'ncclGetVersion' "$OUT/doctor-planted.txt")"
  step "what the plant does to DeepEP itself (import deep_ep under the same LD_PRELOAD)"
  LD_PRELOAD="$torch_nccl" PYTHONPATH="$PWD/$pfx/lib/python3.12/site-packages" /opt/torch/.venv/bin/python3 \
    -c 'import torch, deep_ep; print("import ok")' > "$OUT/import-planted.txt" 2>&1; fig import_planted_exit $?
  tail -4 "$OUT/import-planted.txt"
}

[ -n "${PLANT_NCCL:-}" ] && plant_nccl_downgrade
if [ -n "${NO_TEST:-}" ]; then   # builds only (every_gpu.sh runs the tests after all builds): no test, no record
  fig tests_skipped 1
  fig headline_"$MODE"_ok 1
else
  test_task
  fig headline_"$MODE"_ok "$( grep -qE '^test_[a-z_]+_exit=[1-9]' "$FIG" && echo 0 || echo 1)"
fi
