#!/usr/bin/env bash
# One package of ENV built on this machine, in an empty store and channel, and its members listed
# (sha256 or link target per member), so two machines' builds of one id can be diffed member by member
# without carrying the packages back:  GPU_DIR=.gpuN bash benchmarks/gpu/package_members.sh ENV PKG
# (the list is also left in $WORK/members.txt)
set -uo pipefail
cd "$(dirname "$0")/../.."
ENV_NAME=${1:?env} PKG=${2:?package name in the plan, e.g. nvshmem}
GPU_DIR=${GPU_DIR:-.gpu}
PY=${PYTHON:-python3}
WORK=${WORK:-/tmp/members}
mkdir -p "$WORK"
. benchmarks/gpu/common.sh
export DEEPEP_ENV_STATE=$WORK/state
rm -rf "$DEEPEP_ENV_STATE"
if [ -x /opt/torch/.venv/bin/python3 ]; then   # the GPU image: the carried site and rdma-core, the skeletons
  setup_tools
  rebuild_skeletons || exit 1
fi
$PY -m deepep_env.cli.main fetch "$ENV_NAME" --from "$GPU_DIR/sources" > "$WORK/fetch.txt" 2>&1 || { cat "$WORK/fetch.txt"; exit 1; }
$PY -m deepep_env.cli.main build "$ENV_NAME" --offline > "$WORK/build.txt" 2>&1 &
pid=$!
while kill -0 "$pid" 2>/dev/null && ! grep -qE "^built +$PKG " "$WORK/build.txt"; do sleep 2; done
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
grep -E "^built +$PKG " "$WORK/build.txt"
$PY - "$DEEPEP_ENV_STATE/channel" "$PKG" <<'PYEOF' | tee "$WORK/members.txt"
import glob, sys
from deepep_env.base.hashing import file_sha256
from deepep_env.builder.check import member_fingerprints
for f in sorted(glob.glob(f"{sys.argv[1]}/*/*{sys.argv[2]}-*.conda")):
    print("package", f.rsplit("/", 1)[1], file_sha256(f)[7:23])
    for m, (kind, what) in sorted(member_fingerprints(f).items()):
        print(kind, str(what)[:16], m)
PYEOF
