#!/usr/bin/env bash
# A GPU round with the product alone: `deepep-env prove --reinstall` of every GPU env from a carry made on a
# CPU machine (`deepep-env carry`, README "On GPUs"), its records signed. Beyond those two commands, only the
# GPU machines' scaffolding: machine.sh (the tool's site, rdma-core's path, the NVSHMEM wheel from its skeleton),
# `deepep-env repack` for h200-nvlink-conda's channel (the carry: --made-here), and start / wait / collect:
# a call is at most 10 minutes and lays the checkout down again, so the round runs from a copy in /tmp, in its
# own session, and later calls wait for it and pack its results.
#   bash benchmarks/gpu/prove_round.sh start ENV...  |  wait [S]  |  collect
set -u
E=/tmp/round; SRC=/tmp/src
case ${1:-} in
  start) shift; rm -rf $E $SRC; mkdir -p $E; cp -a "$PWD" $SRC
         (cd $SRC && setsid nohup bash benchmarks/gpu/prove_round.sh run "$@" > $E/log 2>&1 < /dev/null &); echo started; exit 0 ;;
  wait)  timeout "${2:-540}" bash -c "until [ -f $E/done ]; do sleep 5; done"; tail -40 $E/log; tail -30 $E/prove.err; exit 0 ;;
  collect) tar -czf "$OUT/round.tgz" -C $E . && ls -la "$OUT"; exit 0 ;;
  run) shift ;;
  *) echo "usage: prove_round.sh start ENV... | wait [S] | collect" >&2; exit 2 ;;
esac
trap 'date +%s > $E/done' EXIT
t0=$(date +%s); step() { echo "== $(( $(date +%s) - t0 )) s: $*"; }
export DEEPEP_ENV_STATE=$SRC/.deepep-env
. benchmarks/gpu/machine.sh
for env in "$@"; do $DE fetch "$env" --from /tmp/whl --offline > $E/fetch-$env.txt 2>&1; done   # the wheel it left
case " $* " in *" h200-nvlink-conda "*)
  step "repack"; $DE repack /tmp/deepep-repack --wheels .gpu/wheels --rdma /tmp/deepep-rdma/usr --gcc-bin /opt/gcc/bin \
    > $E/repack.txt 2> $E/repack.err || { tail -5 $E/repack.err; exit 1; }
  export DEEPEP_ENV_MIRRORS="https://conda.deepep-env.example/repack=/tmp/deepep-repack" ;;
esac
step "prove $*"
$DE prove "$@" --reinstall --from-carry .gpu/envs.carry.tgz --jobs "$#" --ranks all ${SIGN:+--sign "$SIGN"} --json \
  > $E/prove.json 2> $E/prove.err
echo "prove_exit=$?"
run=$(python3 -c "import json;print(json.load(open('$E/prove.json'))['run'])" 2>/dev/null) && cp -r "$run" $E/run
mkdir -p $E/verified && cp -r verified/. $E/verified/
step "done"
