"""The builder on a recipe graph it was not written for (issue 4: "a hidden recipe graph").

Fixture tests/fixtures/recipes/hidden (host tools only, no sources to fetch):
    dir-a (package dia-a: folder name differs, version computed in context:, no source, run_exports)
    dia-b (path: source inside the recipe folder + a local patch)   -> dia-a
    dia-c (noarch: generic, pin_compatible)                          -> dia-a
    dia-d                                                            -> dia-b, dia-c   (diamond)
    act-only (noarch, activation scripts only)                       -> dia-d
    multi (staging output + libmulti + multi-tool via pin_subpackage)
    uses-multi -> multi-tool (an output name) ; chain-3 -> uses-multi ; chain-4 -> chain-3   (4 levels)
    nosrc-path (package outside-path: relative path: source outside its folder, ../shared-src/lib)
"""
from __future__ import annotations

import asyncio
import json
import shutil
import textwrap
from pathlib import Path

import pytest

from build_fixtures import FIXTURES, add_recipe, read_in_package
from cli_runner import cli_subprocess
from deepep_env.builder.build import build_recipes
from deepep_env.builder.graph import nodes_from_recipe_dirs, recipe_dirs_under
from deepep_env.base.errors import UserError

HIDDEN = FIXTURES / "hidden"
DEPS = {
    "dia-a": set(), "dia-b": {"dia-a"}, "dia-c": {"dia-a"}, "dia-d": {"dia-b", "dia-c"}, "act-only": {"dia-d"},
    "multi": set(), "uses-multi": {"multi"}, "chain-3": {"uses-multi"}, "chain-4": {"chain-3"},
    "outside-path": set(),
}


def _copy(tmp_path: Path, name: str = "hidden") -> Path:
    dst = tmp_path / name
    shutil.copytree(HIDDEN, dst)
    return dst


def _build(recipes: Path, state: Path, **kw):
    return build_recipes(recipes, store=state / "store", channel=state / "channel", source_cache=state / "sources",
                         offline=True, jobs=1, **kw)


def _statuses(report) -> dict[str, str]:
    return {n.package: n.status for n in report.nodes}


def _ids(recipes: Path) -> dict[str, str]:
    return {n.package: n.id for n in nodes_from_recipe_dirs(recipe_dirs_under(recipes))}


def _store_is_clean(store: Path) -> None:
    for p in (store.iterdir() if store.is_dir() else ()):
        assert not p.name.startswith("."), f"partial entry left in the store: {p.name}"
        assert (p / "entry.json").is_file()


def test_graph_shape_and_ids_do_not_depend_on_the_path(tmp_path):
    a, b = _copy(tmp_path, "one"), _copy(tmp_path / "deeper" / "elsewhere", "two")
    nodes = nodes_from_recipe_dirs(recipe_dirs_under(a))
    assert {n.package: set(n.deps) for n in nodes} == DEPS
    order = [n.package for n in nodes]
    for n in nodes:
        assert all(order.index(d) < order.index(n.package) for d in n.deps)
    assert _ids(a) == _ids(b)
    # the outside path: source enters by content under the path as written, never the absolute one
    out = next(n for n in nodes if n.package == "outside-path")
    assert list(out.sources) == ["path:../shared-src/lib"]
    assert nodes_from_recipe_dirs(recipe_dirs_under(a))[0].version == "2.3"  # computed in context:


def test_cold_build_json_channel_and_noop(tmp_path):
    recipes = _copy(tmp_path)
    state = tmp_path / "state"
    rc, out, err = cli_subprocess("build", "--recipes", str(recipes), "--store", str(state / "store"), "--channel",
                                  str(state / "channel"), "--source-cache", str(state / "sources"), "--offline", "--json",
                                  cwd=tmp_path)
    assert rc == 0, err
    rep = json.loads(out)
    order = [n["package"] for n in rep["nodes"]]
    assert set(order) == set(DEPS)
    for n in rep["nodes"]:
        assert {"package", "id", "status", "seconds", "outputs"} <= set(n)
        assert n["status"] == "built" and n["id"].startswith("sha256:")
        assert all(order.index(d) < order.index(n["package"]) for d in DEPS[n["package"]])
        assert all(f"h{n['id'][7:17]}_0" in o for o in n["outputs"])
    by = {n["package"]: n for n in rep["nodes"]}
    assert by["dia-a"]["version"] == "2.3"
    assert sorted(Path(o).name.split("-3.1-")[0] for o in by["multi"]["outputs"]) == ["libmulti", "multi-tool"]
    assert by["dia-c"]["outputs"][0].startswith("noarch/") and by["act-only"]["outputs"][0].startswith("noarch/")
    chan = state / "channel"
    # what was built is what the recipes asked for (the local patch, the pins, the activation script)
    assert read_in_package(chan / by["dia-d"]["outputs"][0], "share/dia-d/b.txt") == b"dia-b patched\n"
    tool = next(o for o in by["multi"]["outputs"] if "multi-tool" in o)
    assert json.loads(read_in_package(chan / tool, "info/index.json"))["depends"] == \
        [f"libmulti ==3.1 h{by['multi']['id'][7:17]}_0"]
    assert json.loads(read_in_package(chan / by["dia-c"]["outputs"][0], "info/index.json"))["depends"] == \
        ["dia-a >=2.3,<3.0a0"]
    assert b"ACT_ONLY_ON" in read_in_package(chan / by["act-only"]["outputs"][0], "etc/conda/activate.d/act-only.sh")
    _store_is_clean(state / "store")

    # the channel is indexed and solvable by rattler
    import rattler

    recs = asyncio.run(rattler.solve([chan.resolve().as_uri()], ["act-only", "chain-4", "outside-path"],
                                     platforms=["linux-64", "noarch"]))
    got = {r.name.normalized: str(r.build) for r in recs}
    assert set(got) == set(DEPS) - {"multi"} | {"libmulti", "multi-tool"}
    assert got["dia-d"] == f"h{by['dia-d']['id'][7:17]}_0"

    # no-op, then the same graph copied to another path: all cached, same ids
    r2 = _build(recipes, state)
    assert set(_statuses(r2).values()) == {"cached"}
    moved = _copy(tmp_path / "moved", "other-name")
    r3 = _build(moved, state)
    assert set(_statuses(r3).values()) == {"cached"}
    assert {n.package: n.id for n in r3.nodes} == {n["package"]: n["id"] for n in rep["nodes"]}


def test_one_change_rebuilds_exactly_it_and_its_dependents(tmp_path):
    recipes = _copy(tmp_path)
    state = tmp_path / "state"
    _build(recipes, state)

    def rebuilt() -> set[str]:
        r = _build(recipes, state)
        _store_is_clean(state / "store")
        return {p for p, s in _statuses(r).items() if s == "built"}

    with open(recipes / "dia-b" / "src" / "b.c", "a") as fh:  # B's path: source (inside its folder)
        fh.write("/* changed */\n")
    assert rebuilt() == {"dia-b", "dia-d", "act-only"}
    (recipes / "dia-c" / "recipe.yaml").write_text((recipes / "dia-c" / "recipe.yaml").read_text() + "# c\n")
    assert rebuilt() == {"dia-c", "dia-d", "act-only"}
    (recipes / "chain-4" / "recipe.yaml").write_text((recipes / "chain-4" / "recipe.yaml").read_text() + "# 4\n")
    assert rebuilt() == {"chain-4"}
    (recipes / "multi" / "recipe.yaml").write_text((recipes / "multi" / "recipe.yaml").read_text() + "# m\n")
    assert rebuilt() == {"multi", "uses-multi", "chain-3", "chain-4"}
    with open(recipes / "shared-src" / "lib" / "s.c", "a") as fh:  # outside path: source, by content
        fh.write("/* changed */\n")
    assert rebuilt() == {"outside-path"}
    assert rebuilt() == set()


def test_relative_paths_on_the_command_line(tmp_path):
    # --store/--channel/--source-cache relative to the cwd: staged paths handed to rattler-build
    # must not be resolved against the recipe folder (a patched catalogue source once failed so)
    shutil.copytree(FIXTURES, tmp_path / "fx")
    rc, _, err = cli_subprocess("fetch", "--recipes", "fx/graph", "--source-cache", "st/src", "--from", "fx/upstream",
                                "--offline", cwd=tmp_path)
    assert rc == 0, err
    args = ("build", "--recipes", "fx/graph", "--store", "st/store", "--channel", "st/chan",
            "--source-cache", "st/src", "--offline", "--json")
    rc, out, err = cli_subprocess(*args, cwd=tmp_path)
    assert rc == 0, err
    assert {n["status"] for n in json.loads(out)["nodes"]} == {"built"}
    rc, out, err = cli_subprocess(*args, cwd=tmp_path)
    assert rc == 0 and {n["status"] for n in json.loads(out)["nodes"]} == {"cached"}


VERSION_EXPR = """
context:
  major: 4
  minor: 1
  full: ${{ major ~ "." ~ minor }}
package:
  name: vexpr
  version: ${{ full }}
build:
  string: ${{ build_string }}
  script:
    - mkdir -p $PREFIX/share && echo v > $PREFIX/share/vexpr.txt
"""

VERSION_USER = """
package:
  name: vuser
  version: "1"
build:
  string: ${{ build_string }}
  script:
    - test -f $PREFIX/share/vexpr.txt
requirements:
  host:
    - vexpr ${{ dep_vexpr }}
  run:
    - vexpr ==${{ vexpr_version }}
"""


def test_version_computed_by_an_expression_is_taken_from_the_build(tmp_path):
    add_recipe(tmp_path / "g", "vexpr", VERSION_EXPR)
    add_recipe(tmp_path / "g", "vuser", VERSION_USER)
    r = _build(tmp_path / "g", tmp_path / "st")
    by = {n.package: n for n in r.nodes}
    assert by["vexpr"].version == "4.1" and by["vexpr"].outputs[0].startswith("linux-64/vexpr-4.1-")
    dep = json.loads(read_in_package(tmp_path / "st" / "channel" / by["vuser"].outputs[0], "info/index.json"))
    assert dep["depends"] == ["vexpr ==4.1"]
    r2 = _build(tmp_path / "g", tmp_path / "st")  # cached: the version still comes from the store entry
    assert {n.package: (n.status, n.version) for n in r2.nodes} == {"vexpr": ("cached", "4.1"),
                                                                    "vuser": ("cached", "1")}


def _tiny(name: str, reqs: str = "") -> str:
    return textwrap.dedent(f"""
        package: {{name: {name}, version: "1"}}
        build:
          string: ${{{{ build_string }}}}
          script: [echo {name}]
        """) + reqs


def test_two_recipes_with_one_package_name(tmp_path):
    add_recipe(tmp_path / "g", "one", _tiny("same"))
    add_recipe(tmp_path / "g", "two", _tiny("same"))
    with pytest.raises(UserError, match=r"package 'same' is defined by two recipe folders: .*one and .*two"):
        nodes_from_recipe_dirs(recipe_dirs_under(tmp_path / "g"))
    rc, out, err = cli_subprocess("build", "--recipes", str(tmp_path / "g"), "--store", str(tmp_path / "s"), cwd=tmp_path)
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_cycle_through_three_recipes(tmp_path):
    add_recipe(tmp_path / "g", "p", _tiny("p", "requirements: {host: [q]}\n"))
    add_recipe(tmp_path / "g", "q", _tiny("q", "requirements: {run: [r >=1]}\n"))
    add_recipe(tmp_path / "g", "r", _tiny("r", "requirements: {build: ['${{ pin_compatible(\"p\") }}']}\n"))
    add_recipe(tmp_path / "g", "free", _tiny("free"))
    rc, out, err = cli_subprocess("build", "--recipes", str(tmp_path / "g"), "--store", str(tmp_path / "s"), cwd=tmp_path)
    assert rc == 2 and "Traceback" not in err
    assert "recipe graph has a cycle: p -> q -> r -> p" in err
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").iterdir())  # nothing built


def test_requirement_outside_the_graph(tmp_path):
    add_recipe(tmp_path / "g", "needs", _tiny("needs", "requirements:\n  host:\n    - ext-lib >=2\n"
                                                       "  run:\n    - if: osx\n      then: [only-on-mac]\n"))
    # no channel to solve it from: refused before anything is built, one line naming both
    rc, out, err = cli_subprocess("build", "--recipes", str(tmp_path / "g"), "--store", str(tmp_path / "s" / "store"),
                                  "--channel", str(tmp_path / "s" / "chan"), "--offline", cwd=tmp_path)
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "package needs: requires ext-lib, which no recipe under" in err  # the osx-only one is not blamed
    # a channel that has it: solved from there
    add_recipe(tmp_path / "other", "ext-lib", _tiny("ext-lib").replace('"1"', '"2.5"'))
    ext = _build(tmp_path / "other", tmp_path / "ext")
    chan = (tmp_path / "ext" / "channel").as_uri()
    r = _build(tmp_path / "g", tmp_path / "s", extra_channels=[chan])
    assert _statuses(r) == {"needs": "built"}
    _store_is_clean(tmp_path / "s" / "store")
    # a channel that lacks it (an empty one): the solver's failure names the requirement
    empty = tmp_path / "empty"
    (empty / "noarch").mkdir(parents=True)
    (empty / "noarch" / "repodata.json").write_text('{"info": {"subdir": "noarch"}, "packages": {}}')
    add_recipe(tmp_path / "g2", "needs2", _tiny("needs2", "requirements:\n  host:\n    - ext-lib >=2\n"))
    with pytest.raises(UserError, match=r"package needs2: build failed: .*not found in the given channels: ext-lib"):
        _build(tmp_path / "g2", tmp_path / "s2", extra_channels=[empty.as_uri()])
    _store_is_clean(tmp_path / "s2" / "store")
    assert ext.nodes[0].version == "2.5"


def test_two_channels_that_solve_differently_give_two_ids(tmp_path):
    """Issue 25: the id covers the exact packages the build/host environments resolved to outside the
    graph (by sha256), not just the request: the same recipe against a channel whose ext-lib 2.5 has
    other bytes is another id, recorded in the store entry, the package's info/ and the manifest."""
    import json

    from build_fixtures import read_in_package
    from deepep_env.builder.normalize import BUILD_INPUTS_MEMBER
    from deepep_env.builder.resolution import from_rendered, rendered_recipe

    add_recipe(tmp_path / "g", "needs", _tiny("needs", "requirements:\n  host:\n    - ext-lib >=2\n"))
    chans = []
    for i in range(2):   # the same name and version, other bytes
        d = tmp_path / f"other{i}"
        add_recipe(d, "ext-lib", _tiny("ext-lib").replace('"1"', '"2.5"').replace("[echo ext-lib]",
                   f"[mkdir -p $PREFIX/share, echo {i} > $PREFIX/share/ext-lib-{i}]"))
        _build(d, tmp_path / f"ext{i}")
        chans.append((tmp_path / f"ext{i}" / "channel").as_uri())
    a = _build(tmp_path / "g", tmp_path / "sa", extra_channels=[chans[0]])
    b = _build(tmp_path / "g", tmp_path / "sb", extra_channels=[chans[1]])
    assert a.nodes[0].id != b.nodes[0].id            # two solutions, two ids
    again = _build(tmp_path / "g", tmp_path / "sa", extra_channels=[chans[0]])
    assert _statuses(again) == {"needs": "cached"} and again.nodes[0].id == a.nodes[0].id
    pkg = tmp_path / "sa" / "channel" / a.nodes[0].outputs[0]
    inputs = json.loads(read_in_package(pkg, BUILD_INPUTS_MEMBER))
    (entry,) = inputs["preimage"]["resolved"]["host"]
    assert entry.startswith("ext-lib 2.5 ") and " sha256:" in entry
    assert from_rendered(rendered_recipe(pkg), ["needs"]) == inputs["preimage"]["resolved"]
    store_entry = next((tmp_path / "sa" / "store").glob("*-needs/entry.json"))
    assert json.loads(store_entry.read_text())["preimage"]["resolved"] == inputs["preimage"]["resolved"]
