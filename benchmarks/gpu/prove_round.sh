#!/usr/bin/env bash
# A GPU round with the product alone: `deepep-env prove --reinstall` of every GPU env from a carry made on a
# CPU machine (`deepep-env carry`, README "On GPUs"), its records signed. What is here beyond those two
# commands is the GPU machines' scaffolding, and only that:
#   - start / wait / collect: a call is at most 10 minutes and lays the checkout down again, so the round
#     runs from a copy in /tmp, in its own session, and later calls wait for it and pack its results;
#   - the tool's python site comes as one xz'd folder (gpu_site.sh), not as the carry's wheels (64 MiB);
#   - NVIDIA's NVSHMEM wheel is rebuilt from its skeleton and fetched into the source cache
#     (the carry left it to the machine: --source-here);
#   - the machine's own channel for h200-nvlink-conda: `deepep-env repack` (the carry: --made-here);
#   - h20-roce's interpreter /opt/deepep-cu130 is the image's torch 2.11.0+cu130 venv (a link; its spec's
#     prepare would pip-install the same release, and there is no network);
#   - rdma-core's headers at /tmp/deepep-rdma/usr, the path the lock's packages were built with (it is
#     in their rendered recipe), from the carry's debs.
# Usage (repo root on the GPU machine; .gpu/ made by gpu_site.sh and `deepep-env carry ... --to .gpu/envs.carry.tgz`):
#   bash benchmarks/gpu/prove_round.sh start ENV...  |  wait [S]  |  collect
set -u
E=/tmp/round; SRC=/tmp/src
case ${1:-} in
  start) shift; rm -rf $E $SRC; mkdir -p $E; cp -a "$PWD" $SRC
         (cd $SRC && setsid nohup bash benchmarks/gpu/prove_round.sh run "$@" > $E/log 2>&1 < /dev/null &); echo started; exit 0 ;;
  wait)  timeout "${2:-540}" bash -c "until [ -f $E/done ]; do sleep 5; done"; tail -40 $E/log; exit 0 ;;
  collect) tar -czf "$OUT/round.tgz" -C $E --exclude='build-pkgs' . && ls -la "$OUT"; exit 0 ;;
  run) shift ;;
  *) echo "usage: prove_round.sh start ENV... | wait [S] | collect" >&2; exit 2 ;;
esac
trap 'date +%s > $E/done' EXIT
t0=$(date +%s); step() { echo "== $(( $(date +%s) - t0 )) s: $*"; }
export PYTHONUNBUFFERED=1 DEEPEP_ENV_STATE=$SRC/.deepep-env
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1   # shared GPUs: no multicast
mkdir -p /tmp/deepep-site && tar -xJf .gpu/pysite/*.tar.xz -C /tmp/deepep-site
export PYTHONPATH=/tmp/deepep-site:$SRC
DE="python3 -m deepep_env.cli.main"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; echo "cores=$(nproc) $($DE --version | head -1)"
step "carry --check"; $DE carry --check .gpu/envs.carry.tgz || exit 1
step "carry --unpack"; $DE carry --unpack .gpu/envs.carry.tgz --json > $E/unpack.json || exit 1
mkdir -p /tmp/deepep-rdma && for d in "$DEEPEP_ENV_STATE"/carry/*/host/debs/*.deb; do dpkg -x "$d" /tmp/deepep-rdma; done
export DEEPEP_ENV_RDMA_CORE=/tmp/deepep-rdma/usr
step "NVSHMEM wheel from its skeleton"
SITE=$(/opt/torch/.venv/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p /tmp/whl && for s in .gpu/skeletons/*.skel; do
  w=$(python3 benchmarks/gpu/wheel_skeleton.py info "$s" | sed -n '1s/^wheel=\([^ ]*\).*/\1/p')
  python3 benchmarks/gpu/wheel_skeleton.py rebuild "$s" "$SITE" "/tmp/whl/$w" > /dev/null || exit 1
done
for env in "$@"; do $DE fetch "$env" --from /tmp/whl --offline > $E/fetch-$env.txt 2>&1; done
[ -e /opt/deepep-cu130 ] || ln -s /opt/torch/.venv /opt/deepep-cu130
step "repack"; $DE repack /tmp/deepep-repack --wheels .gpu/wheels --rdma /tmp/deepep-rdma/usr --gcc-bin /opt/gcc/bin \
  > $E/repack.txt 2> $E/repack.err || { tail -5 $E/repack.err; exit 1; }
(cd /tmp/deepep-repack && sha256sum */*.conda | sort -k2) > $E/repack-sha256.txt
export DEEPEP_ENV_MIRRORS="https://conda.deepep-env.example/repack=/tmp/deepep-repack"
step "prove $*"
$DE prove "$@" --reinstall --from-carry .gpu/envs.carry.tgz --jobs "$#" --ranks all --sign .gpu/round.key --json \
  > $E/prove.json 2> $E/prove.err
echo "prove_exit=$?"; tail -40 $E/prove.err
$DE verified --trust verified/keys/deepep-env-gpu-rounds.pub > $E/verified.txt 2>&1; cat $E/verified.txt | head -40
run=$(python3 -c "import json;print(json.load(open('$E/prove.json'))['run'])" 2>/dev/null) && cp -r "$run" $E/run
git -C $SRC status --short > $E/status.txt 2>&1; mkdir -p $E/verified && cp -r verified/. $E/verified/
step "done"
