"""Issue 25 item 6: the shell helpers the CUDA recipes share live in one include
(recipes/_include/cuda-build.sh), reached from each recipe folder through a relative symlink.

- the include is part of each recipe's id (recipe_sha256 hashes the content behind a link);
- recipe discovery does not take recipes/_include for a recipe;
- a package built from such a recipe (real rattler-build, noarch, offline) ships the include in its
  info/recipe/ as a regular file with the include's content, not as a dangling link;
- the host compilers' start files are host-fingerprint facts (deep-ep 1.2.1's evidence).
"""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from build_fixtures import REPO, add_recipe

INCLUDE = REPO / "recipes" / "_include" / "cuda-build.sh"
CUDA_RECIPES = ("nvshmem", "nccl", "deep-ep", "deep-ep-v2")


def _info_members(conda: Path) -> dict[str, tarfile.TarInfo | bytes]:
    """name → bytes (regular files) or the TarInfo (anything else) of a .conda's info tar."""
    import zstandard

    out: dict[str, tarfile.TarInfo | bytes] = {}
    with zipfile.ZipFile(conda) as z:
        name = next(n for n in z.namelist() if n.startswith("info-"))
        data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(z.read(name))).read()
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        for m in tf.getmembers():
            f = tf.extractfile(m) if m.isreg() else None
            out[m.name] = f.read() if f is not None else m
    return out


def test_the_cuda_recipes_source_the_one_include():
    from deepep_env.builder.graph import recipe_dirs_under
    from deepep_env.base.hashing import recipe_sha256
    from deepep_env.builder.normalize import recipe_members

    dirs = {d.name for d in recipe_dirs_under(REPO / "recipes")}
    assert "_include" not in dirs and set(CUDA_RECIPES) <= dirs
    for r in CUDA_RECIPES:
        link = REPO / "recipes" / r / "cuda-build.sh"
        assert link.is_symlink() and os.readlink(link) == "../_include/cuda-build.sh"
        assert '. "${RECIPE_DIR:-$(dirname "${BASH_SOURCE[0]}")}/cuda-build.sh"' in (link.parent / "build.sh").read_text()
        assert recipe_members(link.parent, recipe_sha256(link.parent))["info/recipe/cuda-build.sh"] == INCLUDE.read_bytes()
    # sourced under set -euo pipefail, the include itself succeeds and defines the helpers
    out = subprocess.run(["bash", "-c", f'set -euo pipefail; . "{INCLUDE}"; echo "$GIT_DIR"; '
                          "type -t conda_cuda_home reproducible_nvcc reproducible_nvcc_bin cccl_include_dirs rdma_lib_dirs rdma_prefix"],
                         capture_output=True, text=True, env={**os.environ, "DEEPEP_SOURCE_DATE_EPOCH": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["/nonexistent"] + ["function"] * 6


def test_the_include_is_part_of_the_recipe_hash(tmp_path):
    from deepep_env.base.hashing import recipe_sha256

    inc = tmp_path / "recipes" / "_include" / "helper.sh"
    inc.parent.mkdir(parents=True)
    inc.write_text("helper() { echo one; }\n")
    r = add_recipe(tmp_path / "recipes", "app", "package: {name: app, version: '1'}\n", {"build.sh": ". helper.sh\n"})
    (r / "helper.sh").symlink_to("../_include/helper.sh")
    before = recipe_sha256(r)
    inc.write_text("helper() { echo two; }\n")
    after = recipe_sha256(r)
    assert before != after
    # the content counts, not the link: a regular copy of the include hashes the same
    (r / "helper.sh").unlink()
    shutil.copy(inc, r / "helper.sh")
    assert recipe_sha256(r) == after


def test_a_recipe_with_a_symlinked_include_builds_and_ships_the_include_as_a_file(tmp_path):
    from deepep_env.builder import build_recipes
    from deepep_env.builder.graph import recipe_dirs_under
    from deepep_env.base.hashing import recipe_sha256
    from deepep_env.builder.normalize import epoch_for, normalize_conda, recipe_members

    graph = tmp_path / "graph"
    inc = graph / "_include" / "greet-lib.sh"
    inc.parent.mkdir(parents=True)
    inc.write_text("# shared by the recipes of this graph\ngreet_line() { echo \"hello from the include: $1\"; }\n")
    r = add_recipe(graph, "inc-app", """
        package: {name: inc-app, version: "1.0"}
        build:
          string: ${{ build_string }}
          noarch: generic
          script:
            file: build.sh
        """, {"build.sh": """
        set -euo pipefail
        . "$RECIPE_DIR/greet-lib.sh"
        mkdir -p "$PREFIX/share/inc-app"
        greet_line inc-app > "$PREFIX/share/inc-app/greeting.txt"
        """})
    (r / "greet-lib.sh").symlink_to("../_include/greet-lib.sh")
    assert recipe_dirs_under(graph) == [r]          # the include folder holds no recipe.yaml

    state = tmp_path / "state"
    rep = build_recipes(graph, store=state / "store", channel=state / "channel", source_cache=state / "sources",
                        offline=True, jobs=1)
    node = next(n for n in rep.nodes if n.package == "inc-app")
    assert node.status == "built", node
    conda = state / "channel" / node.outputs[0]
    with zipfile.ZipFile(conda) as z:
        pkg = next(n for n in z.namelist() if n.startswith("pkg-"))
        assert pkg
    members = _info_members(conda)
    shipped = members["info/recipe/greet-lib.sh"]
    assert isinstance(shipped, bytes), f"info/recipe/greet-lib.sh is not a regular file: {shipped!r}"
    assert shipped == inc.read_bytes()
    assert members["info/recipe/build.sh"] == (r / "build.sh").read_bytes()
    # the include ran: its function wrote the payload
    from build_fixtures import read_in_package

    assert read_in_package(conda, "share/inc-app/greeting.txt") == b"hello from the include: inc-app\n"
    # normalizing again changes nothing (the member is a file now)
    assert normalize_conda(conda, epoch_for(node.id), None, None, recipe_members(r, recipe_sha256(r))) is False


def test_host_compiler_start_files_are_fingerprint_facts(tmp_path):
    from deepep_env.sources import hostprint

    cc = shutil.which("cc")
    if not cc:
        pytest.skip("no system cc")
    hostprint.clear_caches()
    found = hostprint.start_files(cc)
    assert found and all(p.is_absolute() and p.is_file() for p in found)
    assert {"crti.o", "crtbeginS.o", "crtendS.o"} <= {p.name for p in found}
    facts = hostprint.cuda_facts({"cuda_prefix": str(tmp_path / "no-cuda"), "cuda_host_cxx": cc})
    assert facts["host_compiler_start_files"] == hostprint.files_digest(list(found)) != "none"
    assert facts["system_compiler"] == hostprint.compiler_version("c++")

    # a host compiler other than the system c++: its own start files, the system's beside them
    fake = tmp_path / "bin" / "fake-g++"
    fake.parent.mkdir()
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "crtbeginS.o").write_bytes(b"one")
    fake.write_text(f"""#!/bin/sh
case "$1" in
  --version) echo "fake-g++ (Test 1.0-1) 1.0" ;;
  -print-file-name=crtbeginS.o) echo "{lib}/crtbeginS.o" ;;
  -print-file-name=*) echo "${{1#-print-file-name=}}" ;;
esac
""")
    fake.chmod(0o755)
    facts = hostprint.cuda_facts({"cuda_prefix": str(tmp_path / "no-cuda"), "cuda_host_cxx": str(fake)})
    assert facts["host_compiler"] == "fake-g++ (Test 1.0-1) 1.0"
    assert hostprint.start_files(str(fake)) == (lib / "crtbeginS.o",)     # bare names are not files
    if shutil.which("c++"):
        assert facts["system_compiler_start_files"] == hostprint.start_files_digest("c++")
    first = facts["host_compiler_start_files"]
    (lib / "crtbeginS.o").write_bytes(b"two")                            # another patch release
    hostprint.clear_caches()
    again = hostprint.cuda_facts({"cuda_prefix": str(tmp_path / "no-cuda"), "cuda_host_cxx": str(fake)})
    assert again["host_compiler_start_files"] != first
    assert hostprint.differences(facts, again) == [
        f"host_compiler_start_files: {first[:19]}… in the lock, {again['host_compiler_start_files'][:19]}… here"]
    hostprint.clear_caches()
