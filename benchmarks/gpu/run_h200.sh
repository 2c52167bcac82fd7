#!/usr/bin/env bash
# Issue 9 on a GPU machine, with the project's own commands only:
#   fetch (from local upstream copies) → build NVSHMEM + DeepEP (rattler-build, keyed by build id)
#   → lock → install → doctor → DeepEP's own tests via `deepep-env run` → figures as name=value.
#
# Usage (from the repo root):  bash benchmarks/gpu/run_h200.sh [phase…]
#   phases: setup build lock install doctor intranode lowlatency noop verified   (the default)
#           handbuild baseline ptx ab                                           (the comparisons)
#   handbuild  NVSHMEM by hand in this run (cmake + ninja, the recipe's flags, no rattler-build)
#   baseline   DeepEP by hand (`pip install`, pip NVSHMEM) and its intranode test: field notes §3, this run
#   ptx        the aggressive-PTX variant (h200-nvlink-ptx): build, lock, install, intranode
#   ab         both tests alternating upstream default (h200-nvlink) / aggressive PTX (AB_ROUNDS, default 2)
#   repro      issue 14: this run's package sha256s against the committed lock; the packages to $OUT
#   conda      issue 13: repack the machine's python/pytorch/CUDA as conda packages (repack_conda.py),
#              build h200-nvlink-conda in isolated envs from them, lock, install, doctor, low-latency
# Inputs when the machine has no network (see benchmarks/gpu/README.md):
#   $GPU_DIR/sources/*.tar.gz   upstream trees (git archive of the pinned revisions)
#   $GPU_DIR/debs/*.deb         rdma-core headers + libmlx5 link stub (Debian's libibverbs-dev & co.)
#   $GPU_DIR/pysite/*.tar.xz    py-rattler-build, py-rattler, pydantic for the machine's python
# Output: $OUT/ (logs) and name=value lines on stdout; the last line is the headline.
set -uo pipefail
cd "$(dirname "$0")/../.."
ENV_NAME=${ENV_NAME:-h200-nvlink}
MAIN_ENV=$ENV_NAME
PTX_ENV=${PTX_ENV:-h200-nvlink-ptx}
GPU_DIR=${GPU_DIR:-.gpu}
PHASES=${*:-setup build lock install doctor intranode lowlatency noop verified}
PY=${PYTHON:-python3}
# DeepEP's tests spawn 8 processes by default; on a machine with fewer GPUs, one per GPU (every GPU: issue 38).
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ -z "${INTRANODE_ARGS+x}" ] && [ "${NGPU:-0}" -gt 0 ] && [ "$NGPU" -lt 8 ]; then INTRANODE_ARGS="--num-processes $NGPU"; fi
INTRANODE_ARGS=${INTRANODE_ARGS:-}
LL_ARGS=${LL_ARGS:-$INTRANODE_ARGS}
. benchmarks/gpu/common.sh   # the work folder, figures, setup_tools (pysite, debs, patchelf)

setup() {
  step setup
  [ -f "$OUT/committed.pixi.lock" ] || cp pixi.lock "$OUT/committed.pixi.lock"   # what repro compares with
  setup_tools
  $DE fetch "$ENV_NAME" --from "$GPU_DIR/sources" || exit 1
}

build() {
  step "build (cold unless the store has it)"
  local t=$(now)
  local report="$OUT/build-$ENV_NAME.json"
  $DE build "$ENV_NAME" --offline --json > "$report" 2> "$OUT/build-$ENV_NAME.err"; local rc=$?
  cat "$report"; tail -5 "$OUT/build-$ENV_NAME.err"
  cp "$DEEPEP_ENV_STATE"/logs/*.log.live "$OUT/" 2>/dev/null
  fig "build_${ENV_NAME//-/_}_s" "$(since "$t")"
  # figures of the main env are build_<pkg>_…; another env's carry its name (build_h200_nvlink_ptx_<pkg>_…)
  local pfx=""; [ "$ENV_NAME" = "$MAIN_ENV" ] || pfx="${ENV_NAME//-/_}_"
  $PY - "$report" "$pfx" <<'PYEOF' | figs
import json, sys
d = json.load(open(sys.argv[1]))
for n in d.get("nodes", d if isinstance(d, list) else []):
    k = f"build_{sys.argv[2]}{n['package'].replace('-', '_')}"
    print(f"{k}_s={n.get('seconds', 0):.1f}")
    print(f"{k}_status={n.get('status')}")
    print(f"{k}_cold={int(n.get('status') == 'built')}")
PYEOF
  if [ $rc -ne 0 ]; then
    for l in "$DEEPEP_ENV_STATE"/logs/*.log; do echo "--- $l"; tail -60 "$l"; done
    cp "$DEEPEP_ENV_STATE"/logs/*.log "$OUT/" 2>/dev/null
    exit 1
  fi
}

lock() {
  # Into the project's pixi.lock (every other environment kept as it was), then pixi.toml in step:
  # what `pixi run` and `deepep-env task` read.
  step lock
  $DE lock "$ENV_NAME" || exit 1
  $DE pixi sync || exit 1
  cp pixi.lock "$OUT/$ENV_NAME.pixi.lock"
}

install_env() {
  step install
  local t=$(now)
  $DE install "$ENV_NAME" || exit 1   # from pixi.lock into pixi's prefix, .pixi/envs/ENV
  fig "install_${ENV_NAME//-/_}_s" "$(since "$t")"
}

doctor() {
  step doctor
  $DE doctor "$ENV_NAME" --verbose | tee "$OUT/doctor.txt"; local rc=${PIPESTATUS[0]}
  fig doctor_exit "$rc"
  fig doctor_pr466_confirmed "$(grep -c '^ok    deepep.pr-466: present' "$OUT/doctor.txt")"
}

run_test() {  # name file args…
  # The pixi.toml task, as `pixi run -e ENV` runs it: in the environment's own prefix, with the host
  # overlay from its activation (the deepep-env package's activate.d), no `deepep-env run` wrapper.
  local name=$1 file=$2; shift 2
  local task="deepep-test-${file#test_}"; task=${task%.py}; task=${task//_/-}
  step "DeepEP $file $* (task $task)"
  local t=$(now)
  $DE task "$task" -e "$ENV_NAME" -- "$@" 2>&1 | tee "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  fig "${name}_exit" "$rc"
  fig "${name}_s" "$(since "$t")"
  $PY benchmarks/gpu/parse_deepep.py "$OUT/$name.log" "${name}_" | figs
}

noop() {
  step "no-op rebuild"
  local t=$(now)
  $DE build "$ENV_NAME" --offline --json > "$OUT/build-noop.json" 2>/dev/null
  fig noop_build_s "$(since "$t")"
}

verified() {
  step "time to a verified DeepEP: empty prefix -> install + doctor + intranode test"
  local prefix=".pixi/envs/$ENV_NAME"
  rm -rf "$prefix"
  local t=$(now)
  $DE install "$ENV_NAME" >/dev/null || exit 1
  $DE doctor "$ENV_NAME" >/dev/null
  $DE task deepep-test-intranode -e "$ENV_NAME" -- $INTRANODE_ARGS > "$OUT/verified.log" 2>&1
  fig verified_exit $?
  fig time_to_verified_s "$(since "$t")"
}

ptx() {
  # Issue 9.5: the spec knows it builds for sm_90 only, so DeepEP's aggressive PTX path is allowed.
  # Same NVSHMEM (cached by id), only deep-ep rebuilds; then the same intranode test.
  local save=$ENV_NAME
  ENV_NAME=$PTX_ENV
  build
  lock
  install_env
  run_test ptx_intranode test_intranode.py $INTRANODE_ARGS
  ENV_NAME=$save
}

handbuild() {
  # Issue 9.4's yardstick in this run on this machine: NVSHMEM configured, compiled and installed by
  # hand — the recipe's own build.sh with the same flags, run directly (no rattler-build, no store).
  step "NVSHMEM by hand (cmake + ninja, same flags, no rattler-build)"
  rm -rf /tmp/hand-nvshmem-src /tmp/hand-nvshmem && mkdir -p /tmp/hand-nvshmem-src
  tar -xzf "$GPU_DIR"/sources/nvshmem-*.tar.gz -C /tmp/hand-nvshmem-src --strip-components=1
  local t=$(now) repo=$PWD
  ( cd /tmp/hand-nvshmem-src && PREFIX=/tmp/hand-nvshmem CPU_COUNT=$(nproc) NVSHMEM_ARCHS=90 \
      NVSHMEM_WANT_IBGDA=true NVSHMEM_WANT_GDRCOPY=false DEEPEP_CUDA_PREFIX=/usr/local/cuda \
      DEEPEP_CUDA_HOST_CXX="${CUDAHOSTCXX:-}" DEEPEP_RDMA_CORE_PREFIX=/tmp/deepep-rdma/usr \
      bash "$repo/recipes/nvshmem/build.sh" ) > "$OUT/hand-nvshmem.log" 2>&1
  fig hand_build_nvshmem_exit $?
  fig hand_build_nvshmem_s "$(since "$t")"
}

ab() {
  # Upstream default (the main env) and aggressive PTX (the ptx env), alternating, so drift on the
  # machine lands on both. compare.py prints ptx_<figure>_vs_default from the means.
  local save=$ENV_NAME i
  for i in $(seq 1 "${AB_ROUNDS:-2}"); do
    ENV_NAME=$save; run_test "ab${i}_default_intranode" test_intranode.py $INTRANODE_ARGS
    ENV_NAME=$PTX_ENV; run_test "ab${i}_ptx_intranode" test_intranode.py $INTRANODE_ARGS
    if [ -z "${AB_NO_LL:-}" ]; then
      ENV_NAME=$save; run_test "ab${i}_default_lowlatency" test_low_latency.py $LL_ARGS
      ENV_NAME=$PTX_ENV; run_test "ab${i}_ptx_lowlatency" test_low_latency.py $LL_ARGS
    fi
  done
  ENV_NAME=$save
}

repro() {
  # Issue 14 on GPUs: the sha256 of every package this run built, beside the committed lock's, as
  # name=value lines; `build --lock` prints `identical` or the first differing members. The packages
  # themselves go to $RESULTS (split under the 16 MB return limit) so two machines can be diffed.
  step "reproducible bytes: this run's packages against $MAIN_ENV in the committed pixi.lock"
  [ -f "$OUT/$ENV_NAME.pixi.lock" ] || $DE lock "$ENV_NAME" -o "$OUT/$ENV_NAME.pixi.lock" >/dev/null
  $PY - "$OUT/$ENV_NAME.pixi.lock" "$ENV_NAME" "$OUT/committed.pixi.lock" "$MAIN_ENV" <<'PYEOF' | figs
import sys
from deepep_env.formats.lockfile import read_lock
def shas(p, env):
    e = read_lock(p).env(env)
    return {q.name: (q.build, q.sha256) for ps in (e.packages.values() if e else []) for q in ps}
new, old = shas(sys.argv[1], sys.argv[2]), shas(sys.argv[3], sys.argv[4])
for name, (build, sha) in sorted(new.items()):
    k = name.replace("-", "_")
    print(f"repro_{k}_build={build}")
    print(f"repro_{k}_sha256={sha}")
    if name in old:
        print(f"repro_{k}_same_id_as_committed={int(old[name][0] == build)}")
        print(f"repro_{k}_same_sha256_as_committed={int(old[name][1] == sha)}")
PYEOF
  $DE build "$ENV_NAME" --offline --lock "$OUT/committed.pixi.lock" 2>/dev/null | tee "$OUT/build-vs-committed-lock.txt"
  local f
  [ -z "${REPRO_NO_PACKAGES:-}" ] || return 0   # figures only (the returned files are limited to 8)
  for f in "$DEEPEP_ENV_STATE"/channel/linux-64/*.conda; do
    split -b 15M -d "$f" "$RESULTS/$(basename "$f")." 2>/dev/null
  done
}

conda_env() {
  # Issue 13: Python, PyTorch and the CUDA toolkit as conda packages too. The machine's own binaries
  # are repacked into a channel shaped like conda-forge's; NVSHMEM and DeepEP are built by
  # rattler-build in isolated build/host envs from it; the lock holds every package; an empty prefix
  # is installed from it and DeepEP's low-latency test runs with the prefix's own python.
  local save=$ENV_NAME chan=/tmp/deepep-repack t
  ENV_NAME=${CONDA_ENV:-h200-nvlink-conda}
  step "conda: repack the machine's python, pytorch and CUDA as a conda-forge-shaped channel"
  t=$(now)
  $PY benchmarks/gpu/repack_conda.py "$chan" --wheels "$GPU_DIR/wheels" --rdma /tmp/deepep-rdma/usr \
      > "$OUT/repack.log" 2>&1 || { tail -30 "$OUT/repack.log"; exit 1; }
  grep -E '^repack_[a-z_]+=' "$OUT/repack.log" | figs
  export DEEPEP_ENV_MIRRORS="https://conda.deepep-env.example/repack=$chan"
  $DE fetch "$ENV_NAME" --from "$GPU_DIR/sources" || exit 1
  build
  lock
  local prefix=".pixi/envs/$ENV_NAME"
  rm -rf "$prefix"
  install_env
  fig conda_lock_packages "$($PY -c 'import sys; from deepep_env.lock import read_lock; e = read_lock("pixi.lock").env(sys.argv[1]); print(sum(len(v) for v in e.packages.values()))' "$ENV_NAME")"
  fig conda_prefix_mb "$(du -sm "$prefix" | cut -f1)"
  doctor
  # Where everything came from, as the prefix's own python sees it after DeepEP initialised NVSHMEM,
  # in the environment rattler's activation (pixi's) makes: its activate.d gives the host overlay.
  $PY benchmarks/gpu/rattler_activate.py "$prefix" > "$OUT/activate-$ENV_NAME.sh" || exit 1
  bash -c '. "$1"; shift; env | grep -E "^(NVSHMEM_|DEEP_EP_|NCCL_|_DEEPEP_ENV_UNDO|LD_PRELOAD)" | sort | sed "s/^/conda_activated_/"; exec "$@"' \
      act "$OUT/activate-$ENV_NAME.sh" python3 -c '
import sys, torch, deep_ep, os
import deep_ep_cpp
maps = [l.split()[-1] for l in open("/proc/self/maps") if "libnvshmem_host" in l]
print("conda_sys_executable=" + sys.executable)
print("conda_torch_file=" + torch.__file__)
print("conda_deep_ep_cpp=" + deep_ep_cpp.__file__)
print("conda_libnvshmem_host=" + (maps[0] if maps else "not-loaded"))
print("conda_all_in_prefix=" + str(int(all(p.startswith(os.environ["CONDA_PREFIX"]) for p in [sys.executable, torch.__file__, deep_ep_cpp.__file__] + maps[:1]) and bool(maps))))
' 2>&1 | tee "$OUT/conda-provenance.txt" | grep '^conda_' | figs
  run_test conda_lowlatency test_low_latency.py $LL_ARGS
  ENV_NAME=$save
}

baseline() {
  # The hand build field notes §3 compares against, repeated in this run on this machine: DeepEP from
  # the same tarball, `pip install` by hand against pip's NVSHMEM (no NVSHMEM_DIR), tests from source.
  if [ "$SECONDS" -gt "${BASELINE_DEADLINE_S:-420}" ]; then echo "baseline skipped: ${SECONDS}s elapsed"; return; fi
  step "hand-built baseline (pip NVSHMEM, pip install of DeepEP, no deepep-env)"
  rm -rf /tmp/hand /tmp/hand-site && mkdir -p /tmp/hand /tmp/hand-site
  tar -xzf "$GPU_DIR"/sources/deepep-*.tar.gz -C /tmp/hand --strip-components=1
  local t=$(now)
  ( cd /tmp/hand && GIT_DIR=/nonexistent TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=$(nproc) \
      CPATH=/tmp/deepep-rdma/usr/include:/usr/local/cuda/targets/x86_64-linux/include/cccl \
      $PY -m pip install . --no-deps --no-build-isolation --no-index --target /tmp/hand-site > "$OUT/hand-build.log" 2>&1 )
  fig hand_build_deepep_s "$(since "$t")"
  ( cd /tmp/hand/tests && PYTHONPATH=/tmp/hand-site $PY test_intranode.py $INTRANODE_ARGS ) > "$OUT/hand_intranode.log" 2>&1
  fig hand_intranode_exit $?
  $PY benchmarks/gpu/parse_deepep.py "$OUT/hand_intranode.log" "hand_intranode_" | figs
}

has setup && setup
has build && build
has lock && lock
has install && install_env
has doctor && doctor
has intranode && run_test intranode test_intranode.py $INTRANODE_ARGS
has lowlatency && run_test lowlatency test_low_latency.py $LL_ARGS
has noop && noop
has verified && verified
has repro && repro
has conda && conda_env
has handbuild && handbuild
has baseline && baseline
has ptx && ptx
has ab && ab
# Same-run comparisons from everything measured in this work folder (earlier commands included).
$PY benchmarks/gpu/compare.py "$OUT/figures-all.txt" | tee -a "$FIG"
echo
echo "===== figures"
cat "$FIG"
