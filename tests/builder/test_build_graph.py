"""The builder, for real: rattler-build, offline, host gcc, a real local channel.

Fixture graph (tests/fixtures/recipes/graph): libgreet (patched by the builder) <- greet-app
(links it) <- greet-activate (noarch, activation scripts).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from build_fixtures import REPO, add_recipe, read_in_package, sandbox
from cli_runner import cli_argv, cli_env, cli_subprocess
from deepep_env.builder.build import build_recipes
from deepep_env.builder.graph import nodes_from_recipe_dirs
from deepep_env.base.errors import UserError


@pytest.fixture()
def sb(tmp_path):
    s = sandbox(tmp_path)
    s.fill_cache()
    return s


def _channel_names(channel: Path) -> set[str]:
    names = set()
    for sub in ("linux-64", "noarch"):
        rd = json.loads((channel / sub / "repodata.json").read_text())
        names |= {f"{r['name']}-{r['version']}-{r['build']}" for r in rd.get("packages.conda", {}).values()}
    return names


def test_cold_build_cache_hits_and_partial_rebuilds(sb):
    r1 = sb.build()
    assert sb.statuses(r1) == {"libgreet": "built", "greet-app": "built", "greet-activate": "built"}
    assert [n.package for n in r1.nodes] == ["libgreet", "greet-app", "greet-activate"]  # dependency order
    nodes = sb.nodes()
    # the build string carries the id; outputs are in the store and in the indexed channel
    for n in r1.nodes:
        assert all(f"h{n.id[7:17]}_0" in o for o in n.outputs)
        entry = json.loads((sb.store / f"{n.id[7:17]}-{n.package}" / "entry.json").read_text())
        assert entry["format"] == "deepep-env/store-entry/v1" and entry["id"] == n.id
        assert entry["preimage"] == nodes[n.package].preimage
        assert all((sb.channel / o).is_file() for o in n.outputs)
    assert _channel_names(sb.channel) == {
        f"libgreet-1.0-h{nodes['libgreet'].id[7:17]}_0", f"greet-app-1.0-h{nodes['greet-app'].id[7:17]}_0",
        f"greet-activate-1.0-h{nodes['greet-activate'].id[7:17]}_0"}
    # the patch went into what was built and packaged (seed 000 §4.1), and the app links it
    lib = sb.channel / r1.nodes[0].outputs[0]
    assert b"HELLO from patched libgreet" in read_in_package(lib, "lib/libgreet.so.1")
    act = sb.channel / r1.nodes[2].outputs[0]
    assert b"GREET_GREETING=loud" in read_in_package(act, "etc/conda/activate.d/greet-activate.sh")
    assert r1.nodes[2].outputs[0].startswith("noarch/")
    app_index = json.loads(read_in_package(sb.channel / r1.nodes[1].outputs[0], "info/index.json"))
    assert app_index["depends"] == [f"libgreet ==1.0 h{nodes['libgreet'].id[7:17]}_0"]

    # no-op: everything cached; even a wiped channel is refilled from the store without building
    r2 = sb.build()
    assert set(sb.statuses(r2).values()) == {"cached"}
    for sub in ("linux-64", "noarch"):
        for f in (sb.channel / sub).glob("*.conda"):
            f.unlink()
    r2b = sb.build()
    assert set(sb.statuses(r2b).values()) == {"cached"}
    assert all((sb.channel / o).is_file() for n in r2b.nodes for o in n.outputs)

    # change one leaf: only it rebuilds
    act_sh = sb.graph / "greet-activate" / "activate.sh"
    act_sh.write_text(act_sh.read_text() + "export GREET_EXTRA=1\n")
    r3 = sb.build()
    assert sb.statuses(r3) == {"libgreet": "cached", "greet-app": "cached", "greet-activate": "built"}

    # change the base: it and everything depending on it rebuild
    rec = sb.graph / "libgreet" / "recipe.yaml"
    rec.write_text(rec.read_text() + "# a comment is recipe content\n")
    r4 = sb.build()
    assert sb.statuses(r4) == {"libgreet": "built", "greet-app": "built", "greet-activate": "built"}
    # the dependent was built against the new base (exact pin), not the old one still in the channel
    new_lib = sb.nodes()["libgreet"]
    app_index = json.loads(read_in_package(sb.channel / r4.nodes[1].outputs[0], "info/index.json"))
    assert app_index["depends"] == [f"libgreet ==1.0 {new_lib.build_string}"]

    # a different source-cache path and a different mirror URL change no id: all cached
    moved = sb.root / "elsewhere-cache"
    sb.cache.rename(moved)
    toml = sb.graph / "libgreet" / "sources.toml"
    toml.write_text(toml.read_text().replace("https://example.invalid/libgreet/libgreet-1.0.tar.gz",
                                             "https://mirror.example.invalid/x.tgz"))
    r5 = sb.build(source_cache=moved)
    assert set(sb.statuses(r5).values()) == {"cached"}


def test_check_reports_differences_and_accepts_reproducible(sb):
    add_recipe(sb.graph, "stamped", """
        package: {name: stamped, version: "1.0"}
        build:
          string: ${{ build_string }}
          noarch: generic
          script:
            - mkdir -p $PREFIX/share
            - date +%s%N > $PREFIX/share/stamp.txt
            - echo same > $PREFIX/share/same.txt
        """)
    r = sb.build(check=["stamped", "greet-activate"])
    by = {c.package: c for c in r.checks}
    assert by["greet-activate"].identical and by["greet-activate"].differences == []
    assert not by["stamped"].identical
    assert any(d.endswith("differs: share/stamp.txt") for d in by["stamped"].differences)
    assert not any("same.txt" in d for d in by["stamped"].differences)
    assert not r.reproducible
    # the CLI reports every difference and exits 1 (drift, not bad input)
    code, out, err = cli_subprocess("build", "--recipes", str(sb.graph), "--store", str(sb.store), "--channel", str(sb.channel),
                                    "--source-cache", str(sb.cache), "--offline", "--check-package", "stamped")
    assert code == 1 and "differs: share/stamp.txt" in out and "stamped" in err


def test_broken_recipes_fail_with_one_line_and_leave_no_entry(sb, tmp_path):
    bad = sb.root / "bad"
    add_recipe(bad, "norender", """
        package: {name: norender, version: "1.0"}
        build:
          string: ${{ build_strnig }}
          script: [echo hi]
        """)
    with pytest.raises(UserError) as err:
        build_recipes(bad, store=sb.store, channel=sb.channel, source_cache=sb.cache, offline=True)
    msg = str(err.value)
    assert "package norender: recipe does not render" in msg and "build_strnig" in msg and "\n" not in msg

    bad2 = sb.root / "bad2"
    add_recipe(bad2, "nobuild", """
        package: {name: nobuild, version: "1.0"}
        build:
          string: ${{ build_string }}
          script:
            - 'echo "make: *** [Makefile:12: all] Error 2 (fixture)"'
            - exit 3
        """)
    code, out, err = cli_subprocess("build", "--recipes", str(bad2), "--store", str(sb.store), "--channel", str(sb.channel),
                                    "--source-cache", str(sb.cache), "--offline", "--json")
    assert code == 2 and out == ""
    line = err.strip().splitlines()[-1]
    assert line.startswith("deepep-env: error: package nobuild: build failed") and "Traceback" not in err
    log = Path(line.rsplit("log: ", 1)[1])
    assert log.is_file() and "exit 3" in log.read_text()
    assert "Error 2 (fixture)" in line  # the cause from the log, not just "script failed"
    assert not sb.store.exists() or not [p for p in sb.store.iterdir() if "nobuild" in p.name]

    bad3 = sb.root / "bad3"
    add_recipe(bad3, "a", "package: {name: a, version: '1'}\nrequirements:\n  host: [b]\nbuild: {script: [true]}\n")
    add_recipe(bad3, "b", "package: {name: b, version: '1'}\nrequirements:\n  run: [a]\nbuild: {script: [true]}\n")
    with pytest.raises(UserError, match=r"cycle: a -> b -> a"):
        nodes_from_recipe_dirs([bad3 / "a", bad3 / "b"])


def test_missing_source_offline_and_unpinned_source(sb, tmp_path):
    with pytest.raises(UserError) as err:
        build_recipes(sb.graph, store=sb.store, channel=sb.channel, source_cache=tmp_path / "empty", offline=True)
    assert "package libgreet: source libgreet" in str(err.value) and "--offline" in str(err.value)
    toml = sb.graph / "libgreet" / "sources.toml"
    toml.write_text("\n".join(l for l in toml.read_text().splitlines() if not l.startswith("tree_sha256")) + "\n")
    with pytest.raises(UserError, match="package libgreet: source libgreet is not pinned by content"):
        sb.build()


def test_hash_mismatch_from_local_copy_is_refused(sb, tmp_path):
    from deepep_env.sources import fetch, wants_for_nodes

    carry = tmp_path / "carry"
    (carry / "libgreet-1.0").mkdir(parents=True)
    for f in (sb.upstream / "libgreet-1.0").iterdir():
        (carry / "libgreet-1.0" / f.name).write_bytes(f.read_bytes())
    (carry / "libgreet-1.0" / "greet.c").write_text("/* not the pinned tree */\n")
    rep = fetch(wants_for_nodes(sb.nodes().values()), tmp_path / "c2", offline=True, from_dir=carry)
    # content decides: the tampered copy matches no pin and never enters the cache
    assert "libgreet-1.0" in rep.ignored and [i.status for i in rep.items if i.want.kind == "source"] == ["missing"]


def test_generic_graph_multi_output_and_own_path_sources(sb):
    g = sb.root / "generic"
    (g / "src-b").mkdir(parents=True)
    (g / "src-b" / "data.txt").write_text("v1\n")
    add_recipe(g / "recipes", "pair", """
        recipe: {name: pair, version: "2.0"}
        build:
          script: [mkdir -p $PREFIX/share]
        outputs:
          - package: {name: pair-lib}
            build:
              noarch: generic
              script: [mkdir -p $PREFIX/share, echo lib > $PREFIX/share/pair-lib.txt]
          - package: {name: pair-tools}
            requirements:
              run:
                - ${{ pin_subpackage('pair-lib', exact=True) }}
            build:
              noarch: generic
              script: [mkdir -p $PREFIX/share, echo tools > $PREFIX/share/pair-tools.txt]
        """)
    add_recipe(g / "recipes", "user", """
        package: {name: user, version: "1.0"}
        source:
          path: ../../src-b
        build:
          noarch: generic
          script: [mkdir -p $PREFIX/share, cp data.txt $PREFIX/share/user.txt]
        requirements:
          run: [pair-tools]
        """)
    kw = dict(store=sb.store, channel=sb.channel, source_cache=sb.cache, offline=True)
    r = build_recipes(g / "recipes", **kw)
    assert [(n.package, n.status) for n in r.nodes] == [("pair", "built"), ("user", "built")]
    assert sorted(Path(o).name.split("-2.0")[0] for o in r.nodes[0].outputs) == ["pair-lib", "pair-tools"]
    # a path source outside the recipe folder is identity by content
    (g / "src-b" / "data.txt").write_text("v2\n")
    r2 = build_recipes(g / "recipes", **kw)
    assert [(n.package, n.status) for n in r2.nodes] == [("pair", "cached"), ("user", "built")]
    assert b"v2" in read_in_package(sb.channel / r2.nodes[1].outputs[0], "share/user.txt")


def test_staging_fed_to_two_outputs_is_reported_because_it_runs_twice(sb, tmp_path):
    """Why recipes/nvshmem is one output: py-rattler-build names each output's build folder after the
    output and hashes that prefix into the staging-cache key, so a staging output feeding two outputs
    runs twice (NVSHMEM compiled twice on the GPU machine). The builder says so in the report. If the
    count below becomes 1, upstream shares staging again: drop driver.staging_rebuild_notes."""
    marks = tmp_path / "runs.txt"
    add_recipe(sb.root / "staged", "split", f"""
        schema_version: 1
        recipe: {{name: split, version: "1.0"}}
        outputs:
          - staging: {{name: split-build}}
            build:
              script:
                - echo run >> {marks}
                - mkdir -p $PREFIX/lib $PREFIX/include
                - echo lib > $PREFIX/lib/libsplit.txt
                - echo hdr > $PREFIX/include/split.h
          - package: {{name: split-lib}}
            inherit: split-build
            build: {{noarch: generic, files: [lib/]}}
          - package: {{name: split-dev}}
            inherit: split-build
            build: {{noarch: generic, files: [include/]}}
        """)
    r = build_recipes(sb.root / "staged", store=sb.store, channel=sb.channel, source_cache=sb.cache, offline=True)
    (node,) = r.nodes
    assert sorted(Path(o).name.split("-1.0")[0] for o in node.outputs) == ["split-dev", "split-lib"]
    assert marks.read_text().count("run") == 2, "staging ran once: py-rattler-build shares it now"
    assert len(node.notes) == 1 and "'split-build' feeds 2 outputs" in node.notes[0]
    assert node.to_json()["notes"] == node.notes
    assert "deepep-env note: package split: staging output" in Path(node.log).read_text()


def test_real_nvshmem_recipe_compiles_once():
    """One output, no staging: the NVSHMEM compile runs once per build (see the test above)."""
    import yaml

    doc = yaml.safe_load((REPO / "recipes" / "nvshmem" / "recipe.yaml").read_text())
    assert "outputs" not in doc and doc["build"]["script"]["file"] == "build.sh"


SLEEPER = """
package: {name: sleeper, version: "1.0"}
build:
  string: ${{ build_string }}
  noarch: generic
  script:
    - mkdir -p $PREFIX/share
    - touch MARK/started
    - if [ ! -f MARK/fast ]; then sleep 60; fi
    - echo done > $PREFIX/share/sleeper.txt
"""


def test_interrupted_build_leaves_no_entry_and_next_build_is_correct(sb, tmp_path):
    mark = tmp_path / "mark"
    mark.mkdir()
    rdir = tmp_path / "sleepy"
    add_recipe(rdir, "sleeper", SLEEPER.replace("MARK", str(mark)))
    args = ["build", "--recipes", str(rdir), "--store", str(sb.store), "--channel", str(sb.channel),
            "--source-cache", str(sb.cache), "--offline"]
    proc = subprocess.Popen(cli_argv(*args), cwd=REPO, env=cli_env(),   # a real process: killed below
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (mark / "started").exists():
            assert proc.poll() is None, "build ended before it could be interrupted"
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the build and its script, as a crash or OOM kill would
        proc.wait()
    assert not sb.store.exists() or not [p for p in sb.store.iterdir() if "sleeper" in p.name]
    assert not list(sb.channel.glob("*/sleeper-*.conda"))
    (mark / "fast").touch()
    code, out, err = cli_subprocess(*args, "--json")
    assert code == 0, err
    node = json.loads(out)["nodes"][0]
    assert node["status"] == "built"
    assert read_in_package(sb.channel / node["outputs"][0], "share/sleeper.txt") == b"done\n"
    code, out, err = cli_subprocess(*args, "--json")
    assert json.loads(out)["nodes"][0]["status"] == "cached"
