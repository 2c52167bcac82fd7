#!/usr/bin/env bash
# Research on a GPU machine, beside what `deepep-env prove` proves: deepep-env against the same packages built
# by hand, and DeepEP's aggressive-PTX build against upstream's default, each as same-run ratios (compare.py).
#   bash benchmarks/gpu/research.sh [phase...]     default: env hand-nvshmem hand-deepep ptx-ab
#   env          `deepep-env build h200-nvlink` (cold: its per-package seconds) then `deepep-env prove h200-nvlink`
#                (bytes against the lock, every test on every GPU, records): the env side of every ratio
#   hand-nvshmem NVSHMEM configured and compiled by the recipe's own build.sh, run directly (no rattler-build)
#   hand-deepep  DeepEP `pip install`ed by hand against the image's pip NVSHMEM, its intranode test from the
#                source tree on every GPU (field notes §3's yardstick)
#   ptx-ab       h200-nvlink-ptx relocked and proved here, then both envs' tests alternating (AB_ROUNDS, default 2)
# Figures as name=value lines in $WORK/figures-all.txt (cumulative over calls on one warm machine) and on stdout;
# the last line is the headline. Setup: machine.sh (the carry, the tool's site, rdma-core). Long phases outlast a
# 10-minute call: run one or two phases per call.
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
PHASES=${*:-env hand-nvshmem hand-deepep ptx-ab}
ENV_NAME=${ENV_NAME:-h200-nvlink}; PTX_ENV=${PTX_ENV:-h200-nvlink-ptx}
WORK=${WORK:-/tmp/deepep-research}; mkdir -p "$WORK"; FIG=$WORK/figures-all.txt
. benchmarks/gpu/machine.sh
NGPU=$(nvidia-smi -L | grep -c '^GPU')
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{$(now) - $1:.1f}')"; }
fig() { echo "$1=$2" | tee -a "$FIG"; }
figs() { tee -a "$FIG"; }
has() { case " $PHASES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
src_tree() {  # src_tree ENV PACKAGE: the source cache's tree that PACKAGE of ENV builds from (the carry put it there)
  python3 - "$1" "$2" <<'PYEOF'
import sys
from pathlib import Path
from deepep_env.base.project import find_project
from deepep_env.builder.plan import plan
from deepep_env.envspec import load_resolved
from deepep_env.sources import SourceCache, wants_for_nodes
p = find_project(Path.cwd())
nodes = [n for n in plan(load_resolved(sys.argv[1], p), p).nodes if n.package == sys.argv[2]]
w = next(w for w in wants_for_nodes(nodes) if w.kind == "source")
print(SourceCache(Path(p.source_cache).resolve()).tree(w.digest))
PYEOF
}
prove_figs() {  # prove_figs JSON PREFIX: each test's figures as PREFIX<test>_<figure>=value
  python3 - "$1" "$2" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
for e in d["envs"]:
    print(f"{sys.argv[2]}bytes_same={int(e['bytes'].startswith('same'))}")
    for t in e["tests"]:
        for k, v in t["figures"].items():
            print(f"{sys.argv[2]}{t['test'].replace('-', '')}_{k}={v}")
PYEOF
}

if has env; then
  t=$(now); $DE build "$ENV_NAME" --offline --json > "$WORK/build.json" 2> "$WORK/build.err" || { tail -5 "$WORK/build.err"; exit 1; }
  fig build_s "$(since "$t")"
  python3 -c "import json,sys
for n in json.load(open(sys.argv[1]))['nodes']:
    k = 'build_' + n['package'].replace('-', '_'); print(f\"{k}_s={n.get('seconds', 0):.1f}\"); print(f\"{k}_cold={int(n.get('status') == 'built')}\")" \
    "$WORK/build.json" | figs
  $DE prove "$ENV_NAME" --ranks all --json > "$WORK/prove-env.json" 2> "$WORK/prove-env.err"; fig env_prove_exit $?
  prove_figs "$WORK/prove-env.json" "" | figs
fi
if has hand-nvshmem; then
  rm -rf /tmp/hand-nvshmem-src /tmp/hand-nvshmem && cp -r "$(src_tree "$ENV_NAME" nvshmem)" /tmp/hand-nvshmem-src
  t=$(now)
  ( cd /tmp/hand-nvshmem-src && PREFIX=/tmp/hand-nvshmem CPU_COUNT=$(nproc) NVSHMEM_ARCHS=90 NVSHMEM_WANT_IBGDA=true \
      NVSHMEM_WANT_GDRCOPY=false DEEPEP_CUDA_PREFIX=/usr/local/cuda DEEPEP_RDMA_CORE_PREFIX=/tmp/deepep-rdma/usr \
      bash "$REPO/recipes/nvshmem/build.sh" ) > "$WORK/hand-nvshmem.log" 2>&1
  fig hand_build_nvshmem_exit $?; fig hand_build_nvshmem_s "$(since "$t")"
fi
if has hand-deepep; then
  rm -rf /tmp/hand /tmp/hand-site && cp -r "$(src_tree "$ENV_NAME" deep-ep)" /tmp/hand && mkdir -p /tmp/hand-site
  t=$(now)
  ( cd /tmp/hand && GIT_DIR=/nonexistent TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=$(nproc) \
      CPATH=/tmp/deepep-rdma/usr/include:/usr/local/cuda/targets/x86_64-linux/include/cccl \
      /opt/torch/.venv/bin/python3 -m pip install . --no-deps --no-build-isolation --no-index --target /tmp/hand-site ) \
      > "$WORK/hand-build.log" 2>&1
  fig hand_build_deepep_exit $?; fig hand_build_deepep_s "$(since "$t")"
  ( cd /tmp/hand/tests && PYTHONPATH=/tmp/hand-site /opt/torch/.venv/bin/python3 test_intranode.py --num-processes "$NGPU" ) \
      > "$WORK/hand_intranode.log" 2>&1
  fig hand_intranode_exit $?
  python3 benchmarks/gpu/parse_deepep.py "$WORK/hand_intranode.log" hand_intranode_ | figs
fi
if has ptx-ab; then
  $DE prove "$PTX_ENV" --relock --offline --ranks all --test intranode --json > "$WORK/prove-ptx.json" 2> "$WORK/prove-ptx.err"
  fig ptx_prove_exit $?
  $DE pixi sync > /dev/null   # the ptx env's tasks, for `task -e`
  for i in $(seq 1 "${AB_ROUNDS:-2}"); do
    for side in default ptx; do
      env=$ENV_NAME; [ $side = ptx ] && env=$PTX_ENV
      for test in intranode low-latency; do
        $DE task "deepep-test-$test" -e "$env" -- --num-processes "$NGPU" > "$WORK/ab$i-$side-$test.log" 2>&1
        python3 benchmarks/gpu/parse_deepep.py "$WORK/ab$i-$side-$test.log" "ab${i}_${side}_${test//-/}_" | figs
      done
    done
  done
fi
python3 benchmarks/gpu/compare.py "$FIG" | figs
fig headline_research_done 1
