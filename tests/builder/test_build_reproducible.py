"""Issue 14: same inputs, same bytes; a store, cache and channel that are trusted only after a check.

Every test builds real packages with rattler-build (host gcc, offline) from the fixture graph
(tests/fixtures/recipes/graph: libgreet ← greet-app, greet-activate).
"""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path


from build_fixtures import add_recipe, read_in_package, sandbox
from cli_runner import cli_subprocess
from deepep_env.base.hashing import file_sha256


def _shas(report, channel: Path) -> dict[str, str]:
    return {o: file_sha256(channel / o) for n in report.nodes for o in n.outputs}


def test_two_checkouts_a_second_apart_build_the_same_bytes(tmp_path):
    """Same inputs → same bytes: another checkout path, another time, even a compiled ELF."""
    shas = []
    for where in ("first/checkout", "second/elsewhere/clone"):
        sb = sandbox(tmp_path / where)
        sb.fill_cache()
        shas.append(_shas(sb.build(), sb.channel))
        time.sleep(1.1)
    assert shas[0] == shas[1]
    assert any(k.startswith("linux-64/libgreet") for k in shas[0])  # a package with compiled C code


def _empty_channel(d):
    for sub in ("linux-64", "noarch"):
        (d / sub).mkdir(parents=True)
        (d / sub / "repodata.json").write_text('{"info": {"subdir": "%s"}, "packages": {}, "packages.conda": {}}' % sub)
    return d


def test_a_mirror_folder_does_not_reach_the_bytes(tmp_path, monkeypatch):
    """Found on a GPU: rattler-build records the channels it read (info/about.json, the rendered
    recipe). A channel read from a mirror folder ($DEEPEP_ENV_MIRRORS) is recorded as the channel's
    own URL — the one the id names — so two machines with the mirror at two paths build the same bytes."""
    from deepep_env.base.channels.urls import file_url

    shas = []
    for where in ("a", "b/deeper"):
        mirror = _empty_channel(tmp_path / where / "mirror")
        monkeypatch.setenv("DEEPEP_ENV_MIRRORS", f"https://conda.example.invalid/team={mirror}")
        sb = sandbox(tmp_path / where / "p")
        sb.fill_cache()
        shas.append(_shas(sb.build(extra_channels=[file_url(mirror)]), sb.channel))
    assert shas[0] == shas[1]


def test_build_check_is_identical_by_whole_archive(tmp_path):
    sb = sandbox(tmp_path / "p")
    sb.fill_cache()
    sb.build()
    time.sleep(1.1)
    r = sb.build(check=True)
    assert r.reproducible and all(c.differences == [] for c in r.checks)
    code, out, _ = cli_subprocess("build", "--recipes", str(sb.graph), "--store", str(sb.store), "--channel", str(sb.channel),
                                  "--source-cache", str(sb.cache), "--offline", "--check-package", "libgreet")
    assert code == 0 and "check libgreet: identical" in out


def test_package_timestamps_come_from_the_build_id_not_the_clock(tmp_path):
    from deepep_env.builder.normalize import epoch_for

    sb = sandbox(tmp_path / "p")
    sb.fill_cache()
    r = sb.build()
    node = next(n for n in r.nodes if n.package == "libgreet")
    idx = json.loads(read_in_package(sb.channel / node.outputs[0], "info/index.json"))
    assert idx["timestamp"] == epoch_for(node.id) * 1000


def test_a_flipped_byte_in_the_store_is_rebuilt_not_called_cached_nor_published(tmp_path):
    sb = sandbox(tmp_path / "p")
    sb.fill_cache()
    r1 = sb.build()
    lib = next(n for n in r1.nodes if n.package == "libgreet")
    good = file_sha256(sb.channel / lib.outputs[0])
    stored = sb.store / f"{lib.id[7:17]}-libgreet" / lib.outputs[0]
    data = bytearray(stored.read_bytes())
    data[len(data) // 2] ^= 0xFF
    stored.write_bytes(bytes(data))
    # the channel copy is its own file: the damage did not spread to it
    assert file_sha256(sb.channel / lib.outputs[0]) == good
    r2 = sb.build()
    assert sb.statuses(r2)["libgreet"] == "built"
    assert file_sha256(stored) == good                      # rebuilt, and reproducibly so
    assert list((sb.store / ".corrupt").iterdir())          # the corrupt entry is kept aside, not used


def test_a_lost_store_entry_is_rebuilt_to_the_bytes_the_channel_and_lock_hold(tmp_path):
    sb = sandbox(tmp_path / "p")
    sb.fill_cache()
    r1 = sb.build()
    before = _shas(r1, sb.channel)
    lib = next(n for n in r1.nodes if n.package == "libgreet")
    shutil.rmtree(sb.store / f"{lib.id[7:17]}-libgreet")
    r2 = sb.build()
    assert sb.statuses(r2)["libgreet"] == "built"
    assert _shas(r2, sb.channel) == before


def test_a_build_script_writing_into_a_dependency_cannot_reach_later_builds(tmp_path):
    """rattler-build links host dependencies from a package cache; a script that writes into a file
    a dependency ships must not change what the next build (or install) of that dependency sees."""
    sb = sandbox(tmp_path / "p")
    sb.fill_cache()
    add_recipe(sb.graph, "greet-vandal", """
        package: {name: greet-vandal, version: "1.0"}
        build:
          string: ${{ build_string }}
          script:
            - echo "// vandalised" >> $PREFIX/include/greet.h
            - mkdir -p $PREFIX/share && echo ok > $PREFIX/share/vandal.txt
        requirements:
          host:
            - libgreet ${{ dep_libgreet }}
        """)
    add_recipe(sb.graph, "greet-reader", """
        package: {name: greet-reader, version: "1.0"}
        build:
          string: ${{ build_string }}
          script:
            - mkdir -p $PREFIX/share
            - cp $PREFIX/include/greet.h $PREFIX/share/greet-seen.h
        requirements:
          host:
            - libgreet ${{ dep_libgreet }}
            - greet-vandal ${{ dep_greet_vandal }}
        """)
    r = sb.build()
    reader = next(n for n in r.nodes if n.package == "greet-reader")
    lib = next(n for n in r.nodes if n.package == "libgreet")
    seen = read_in_package(sb.channel / reader.outputs[0], "share/greet-seen.h")
    assert b"vandalised" not in seen
    assert seen == read_in_package(sb.channel / lib.outputs[0], "include/greet.h")


def test_build_against_a_lock_says_identical_or_names_the_package(tmp_path):
    """`build --lock FILE`: the packages a rebuild gives are the lock's, by sha256."""
    sb = sandbox(tmp_path / "p")
    sb.fill_cache()
    r = sb.build()
    lock = tmp_path / "x.pixi.lock"
    lines = ["version: 7", "platforms:", "- name: linux-64", "environments:", "  e:", "    channels:",
             "    - url: https://example.invalid/c/", "    packages:", "      linux-64:"]
    pkgs = []
    for n in r.nodes:
        for o in n.outputs:
            url = f"https://example.invalid/c/{o}"
            lines.append(f"      - conda: {url}")
            pkgs += [f"- conda: {url}", f"  sha256: {file_sha256(sb.channel / o).split(':')[1]}"]
    lock.write_text("\n".join(lines + ["packages:"] + pkgs) + "\n")
    args = ["build", "--recipes", str(sb.graph), "--store", str(sb.store), "--channel", str(sb.channel),
            "--source-cache", str(sb.cache), "--offline", "--lock", str(lock)]
    code, out, err = cli_subprocess(*args)
    assert code == 0, err
    assert "check libgreet: identical" in out
    lib = next(n for n in r.nodes if n.package == "libgreet").outputs[0].rsplit("/", 1)[-1]
    lock.write_text(lock.read_text().replace(file_sha256(sb.channel / f"linux-64/{lib}").split(":")[1], "ab" * 32))
    code, out, err = cli_subprocess(*args)
    assert code == 1 and f"{lib}: archive sha256" in out and "lock's abababababababab" in out


def test_arguments_are_checked_before_any_build(tmp_path):
    """Issue 15 (two findings of the audit): a misspelt --check-package and -j 0 / -j -4 are refused
    before anything is built."""
    sb = sandbox(tmp_path / "p")
    sb.fill_cache()
    base = ["build", "--recipes", str(sb.graph), "--store", str(sb.store), "--channel", str(sb.channel),
            "--source-cache", str(sb.cache), "--offline"]
    code, out, err = cli_subprocess(*base, "--check-package", "nosuchpkg")
    assert code == 2 and "nosuchpkg" in err and "libgreet" in err
    assert not sb.store.exists() or not any(p for p in sb.store.iterdir() if not p.name.startswith("."))
    for bad in ("0", "-4"):
        code, _, err = cli_subprocess(*base, "-j", bad)
        assert code == 2 and "jobs" in err.lower()


def test_without_a_terminal_build_prints_timestamped_progress(tmp_path):
    """Issue 15: in CI or a log file, build printed nothing until a package finished."""
    import re

    sb = sandbox(tmp_path / "p")
    sb.fill_cache()
    code, out, err = cli_subprocess("build", "--recipes", str(sb.graph), "--store", str(sb.store), "--channel", str(sb.channel),
                                    "--source-cache", str(sb.cache), "--offline")
    assert code == 0, err
    assert re.search(r"^\d\d:\d\d:\d\d start  libgreet h[0-9a-f]{10}_0$", err, re.M), err


def test_a_killed_builds_partial_store_entry_is_cleaned_by_the_next_build_of_that_id(tmp_path):
    sb = sandbox(tmp_path / "p")
    sb.fill_cache()
    r = sb.build()
    lib = next(n for n in r.nodes if n.package == "libgreet")
    shutil.rmtree(sb.store / f"{lib.id[7:17]}-libgreet")
    left = sb.store / f".{lib.id[7:17]}-libgreet.abc123.partial"   # what a kill -9 inside Store.add leaves
    left.mkdir()
    (left / "half.conda").write_bytes(b"half")
    sb.build()
    assert not left.exists()


def _info_recipe(conda: Path) -> dict[str, tuple[int, bytes]]:
    """info/recipe/ of a .conda: member name → (mode, content)."""
    import io
    import tarfile
    import zipfile

    import zstandard

    with zipfile.ZipFile(conda) as z:
        info = next(n for n in z.namelist() if n.startswith("info-"))
        raw = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(z.read(info))).read()
    with tarfile.open(fileobj=io.BytesIO(raw)) as t:
        return {m.name: (m.mode, t.extractfile(m).read()) for m in t.getmembers()
                if m.name.startswith("info/recipe/") and m.isreg()}


def test_recipe_folder_files_outside_the_id_never_reach_the_bytes(tmp_path):
    """Issue 37: NVSHMEM 3.4.5 kept its id and got new bytes when pins for *other* versions were added to
    recipes/nvshmem/sources.toml (rattler-build copies the recipe folder into info/recipe/). Everything
    of that kind — a file the recipe hash leaves out, a file's mode — now changes no byte; a file the
    hash covers moves the id."""
    from deepep_env.base.hashing import recipe_files

    sb = sandbox(tmp_path / "p")
    sb.fill_cache()
    first = sb.build()
    libgreet = next(n for n in first.nodes if n.package == "libgreet")
    pkg = sb.channel / libgreet.outputs[0]
    before = file_sha256(pkg)
    recipe = sb.graph / "libgreet"
    shipped = _info_recipe(pkg)
    assert set(shipped) == {f"info/recipe/{rel}" for rel, _ in recipe_files(recipe)} | {
        "info/recipe/rendered_recipe.yaml", "info/recipe/variant_config.yaml"}
    assert "info/recipe/sources.toml" not in shipped and all(mode == 0o644 for mode, _ in shipped.values())

    # what issue 37's commit did: another version's pin, a comment; and what a hand does: a mode, a pyc
    toml = recipe / "sources.toml"
    toml.write_text(toml.read_text().replace("why = ", "# a note, pinned later\nwhy = ")
                    .replace('urls = ["', 'urls = ["https://mirror.example.invalid/libgreet-1.0.tar.gz", "'))
    (recipe / "recipe.yaml").chmod(0o755)
    (recipe / "__pycache__").mkdir()
    (recipe / "__pycache__" / "x.cpython-312.pyc").write_bytes(b"\0" * 20)
    shutil.rmtree(sb.state)
    sb.fill_cache()
    again = sb.build()
    node = next(n for n in again.nodes if n.package == "libgreet")
    assert (node.id, node.outputs) == (libgreet.id, libgreet.outputs)
    assert file_sha256(sb.channel / node.outputs[0]) == before, "same id, same bytes"

    # a file the recipe hash covers is an input: a new id (and so never the old id's bytes)
    (recipe / "notes.txt").write_text("a file of the recipe folder\n")
    moved = next(n for n in sb.nodes().values() if n.package == "libgreet")
    assert moved.id != libgreet.id
