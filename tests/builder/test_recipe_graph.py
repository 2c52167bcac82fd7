"""The recipes define the build graph (deepep_env/builder/recipegraph.py, consumed by buildplan.plan for env
specs and by builder.graph.nodes_from_recipe_dirs for ``--recipes DIR``).

- every env spec: each package comes after its dependencies, and its ``deps`` are exactly the
  spec's packages that its recipe names in build/host requirements or pins exactly (read here from
  the YAML, independently of recipegraph); run-only names are ``run_deps``;
- a run-only version-range requirement (DeepEP's ``deepep-env >=0.2,<1``) is no input of the
  dependent's build id, a build edge is;
- a folder of recipes: a requirement naming another recipe's *output* is an edge; a cycle is one
  clear line (library and CLI), refused before anything is built.

No builds: ids exist before anything is built."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from build_fixtures import REPO, add_recipe
from cli_runner import cli_in_process
from deepep_env.builder import plan as buildplan
from deepep_env.builder.graph import nodes_from_recipe_dirs, recipe_dirs_under
from deepep_env.base.errors import UserError
from deepep_env.base.project import Project
from deepep_env.builder.recipegraph import Edges, build_order, ident, read_recipe, recipe_edges
from deepep_env.envspec import load_resolved

SPECS = sorted(p.stem for p in (REPO / "env_specs").glob("*.toml"))


def _plan(spec: str, project: Project | None = None):
    project = project or Project(REPO)
    return buildplan.plan(load_resolved(spec, project), project)


def _ids(spec: str, project: Project) -> dict[str, str | None]:
    return {n.package: n.id for n in _plan(spec, project).nodes}


# --------------------------------------------------------------------------------------------- the recipes, read plainly

_VAR = re.compile(r"\$\{\{\s*([A-Za-z_]\w*)\s*\}\}")
_LEADING_NAME = re.compile(r"^\s*([A-Za-z0-9_][A-Za-z0-9_.\-]*)")
_PIN = re.compile(r"pin_(?:subpackage|compatible)\(\s*['\"]([^'\"]+)['\"]")
_EXACT = re.compile(r"\$\{\{\s*dep_(\w+)\s*\}\}")   # docs/build-id.md §6: dep_<pkg> = "==<version> <build string>"


def _flat(value):
    """A requirements list with both branches of every if/then/else."""
    if isinstance(value, list):
        for v in value:
            yield from _flat(v)
    elif isinstance(value, dict) and "if" in value:
        yield from _flat(value.get("then"))
        yield from _flat(value.get("else"))
    elif isinstance(value, str):
        yield value


def _recipe_view(recipe_dir: Path) -> tuple[set[str], dict[str, list[str]]]:
    """(package names the recipe produces, {build|host|run: requirement strings}), from the YAML."""
    doc = yaml.safe_load((recipe_dir / "recipe.yaml").read_text())
    ctx = {k: str(v) for k, v in (doc.get("context") or {}).items()}

    def sub(s: str) -> str:
        return _VAR.sub(lambda m: ctx.get(m[1], m[0]), s)

    outs = [o for o in doc.get("outputs") or [] if isinstance(o, dict)]
    produced = {sub(o["package"]["name"]) for o in outs if "package" in o} or {sub(doc["package"]["name"])}
    reqs: dict[str, list[str]] = {"build": [], "host": [], "run": []}
    for part in (doc, *outs):
        for section in reqs:
            reqs[section] += [sub(s) for s in _flat((part.get("requirements") or {}).get(section))]
    return produced, reqs


def _names(reqs: list[str]) -> set[str]:
    return {m[1] for s in reqs if not s.lstrip().startswith("${{") for m in [_LEADING_NAME.match(s)] if m}


def _expected_edges(p) -> dict[str, tuple[set[str], set[str]]]:
    """node → (build deps, run-only deps), among the plan's own nodes."""
    nodes = {n.package: n for n in p.nodes}
    produced = {name: _recipe_view(n.recipe_dir)[0] | {name} for name, n in nodes.items()}
    out = {}
    for name, n in nodes.items():
        _, reqs = _recipe_view(n.recipe_dir)
        every = reqs["build"] + reqs["host"] + reqs["run"]
        against = _names(reqs["build"] + reqs["host"]) | {m for s in every for m in _PIN.findall(s)}
        exact = {m for s in every for m in _EXACT.findall(s)}
        build = {o for o in nodes if o != name and (produced[o] & against or ident(o) in exact)}
        for comp in ("cuda", "pytorch"):   # the edges the spec adds, not a recipe (plan._with_wheel_edges)
            if n.externals.get(comp, {}).get("provider") == "wheel":
                build.add(comp)
        run = {o for o in nodes if o != name and produced[o] & _names(reqs["run"])} - build
        out[name] = (build, run)
    return out


# --------------------------------------------------------------------------------------------- (a) every env spec


@pytest.mark.parametrize("spec", SPECS)
def test_plan_edges_are_what_the_recipes_name_and_order_follows_them(spec):
    p = _plan(spec)
    order = [n.package for n in p.nodes]
    assert len(set(order)) == len(order)
    expected = _expected_edges(p)
    for n in p.nodes:
        build, run = expected[n.package]
        assert set(n.deps) == build, (n.package, n.deps)
        assert set(n.run_deps) == run, (n.package, n.run_deps)
        for d in (*n.deps, *n.run_deps):
            assert order.index(d) < order.index(n.package), f"{n.package} comes before its dependency {d}"
        # listed in build order; a pinned node's pre-image holds exactly its build deps, by id
        assert list(n.deps) == [d for d in order if d in n.deps]
        assert list(n.run_deps) == [d for d in order if d in n.run_deps]
        if n.preimage is not None:
            ids = {m.package: m.id for m in p.nodes}
            assert n.preimage.get("dependencies", {}) == {d: ids[d] for d in n.deps}
    # what an environment asks for by name: DeepEP, and the tool (a run dependency only)
    # (and a wheel PyTorch and the tests' wheels, packages of the env no run requirement names)
    assert {r.package for r in p.roots()} == {"deep-ep", "deepep-env"} | ({"pytorch", "test-wheels"} & set(order))
    assert [o for o in order if o != "test-wheels"][-1] == "deep-ep"   # test-wheels: no edge, declared last


# What the edges are today, spelled out (the test above derives them; this says them).
GOLDEN = {
    "h200-nvlink": {"deepep-env": ((), ()), "nvshmem": ((), ()), "deep-ep": (("nvshmem",), ("deepep-env",))},
    "gke-a4-seed": {"deepep-env": ((), ()), "gdrcopy": ((), ()), "nvshmem": (("gdrcopy",), ()),
               "deep-ep": (("nvshmem",), ("deepep-env",))},
    "h200-nvlink-v2": {"deepep-env": ((), ()), "nccl": ((), ()), "deep-ep": (("nccl",), ("deepep-env",))},
    "gcp-b200-v2": {"deepep-env": ((), ()), "nvshmem": ((), ()), "nccl": ((), ()),
                    "deep-ep": (("nvshmem", "nccl"), ("deepep-env",))},
    # a wheel CUDA and a wheel PyTorch: the toolkit and deepep-pytorch, built against by DeepEP (NVSHMEM's
    # wheel repack reads neither)
    "gcp-b200": {"deepep-env": ((), ()), "cuda": ((), ()), "pytorch": ((), ()), "nvshmem": ((), ()),
                 "deep-ep": (("cuda", "pytorch", "nvshmem"), ("deepep-env",)), "test-wheels": ((), ())},
    # GKE A4 on the same stack: gcp-b200's graph (and its ids: the platform is in no pre-image)
    "gke-a4": {"deepep-env": ((), ()), "cuda": ((), ()), "pytorch": ((), ()), "nvshmem": ((), ()),
               "deep-ep": (("cuda", "pytorch", "nvshmem"), ("deepep-env",)), "test-wheels": ((), ())},
}


@pytest.mark.parametrize("spec", sorted(GOLDEN))
def test_plan_edges_golden(spec):
    p = _plan(spec)
    assert {n.package: (n.deps, n.run_deps) for n in p.nodes} == GOLDEN[spec]


# --------------------------------------------------------------------------------------------- (b) run-only edges


def _project_copy(tmp_path: Path) -> Project:
    root = tmp_path / "proj"
    shutil.copytree(REPO / "env_specs", root / "env_specs")
    shutil.copytree(REPO / "recipes", root / "recipes", ignore=shutil.ignore_patterns("__pycache__"))
    # the host facts the committed lock was built with (lockfiles/build-inputs.json): a copy plans the same ids
    shutil.copytree(REPO / "lockfiles", root / "lockfiles")
    return Project(root)


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


@pytest.mark.parametrize("spec", ["h200-nvlink", "h200-nvlink-v2", "gcp-b200-v2"])
def test_run_only_requirement_is_no_input_of_the_dependent_id(spec, tmp_path, monkeypatch):
    proj = _project_copy(tmp_path)
    ref = _ids(spec, proj)
    assert all(ref.values()) and ref == _ids(spec, Project(REPO))   # a copy elsewhere: the same ids
    deepep = _plan(spec, proj).node("deep-ep")
    assert deepep.run_deps == ("deepep-env",) and "deepep-env" not in deepep.deps
    assert "deepep-env" not in deepep.preimage["dependencies"]
    # the recipe says it by version range only
    assert "deepep-env >=0.2,<1" in _recipe_view(deepep.recipe_dir)[1]["run"]

    # the tool's recipe changes: a new tool id, every other id as it was
    _append(proj.recipes / "deepep-env" / "recipe.yaml", "# the tool's recipe changed\n")
    changed = _ids(spec, proj)
    assert changed["deepep-env"] != ref["deepep-env"]
    assert {k: v for k, v in changed.items() if k != "deepep-env"} == {k: v for k, v in ref.items() if k != "deepep-env"}

    # the tool's code changes (its source tree digest): the same
    monkeypatch.setattr(buildplan, "tool_source", lambda: (tmp_path, "sha256:" + "0" * 64))
    code = _ids(spec, proj)
    assert code["deepep-env"] not in (ref["deepep-env"], changed["deepep-env"])
    assert code["deep-ep"] == ref["deep-ep"]

    # ...while a build edge does move the dependent: the first package deep-ep builds against
    dep = deepep.deps[0]
    _append(_plan(spec, proj).node(dep).recipe_dir / "recipe.yaml", "# a build input changed\n")
    moved = _ids(spec, proj)
    assert moved[dep] != ref[dep] and moved["deep-ep"] != ref["deep-ep"]


def test_run_only_edge_still_orders_the_build():
    """A run dependency is needed in the channel for the dependent's recipe test: it is built first."""
    order = build_order(["deep-ep", "deepep-env"], {"deep-ep": {"deepep-env"}})
    assert order == ["deepep-env", "deep-ep"]


# --------------------------------------------------------------------------------------------- (c) a folder of recipes


def _folder(tmp_path: Path) -> Path:
    root = tmp_path / "recipes"
    # the folder's name is not the package's; two outputs, neither named like the recipe
    add_recipe(root, "base-folder", """
        recipe: {name: base, version: "1.0"}
        outputs:
          - package: {name: libbase}
          - package: {name: base-tools}
            requirements:
              run:
                - ${{ pin_subpackage('libbase', exact=True) }}
        """)
    add_recipe(root, "app", """
        package: {name: app, version: "1.0"}
        requirements:
          host:
            - libbase
        """)
    add_recipe(root, "cli", """
        package: {name: cli, version: "1.0"}
        requirements:
          run:
            - app ${{ dep_app }}
        """)
    add_recipe(root, "doc", """
        package: {name: doc, version: "1.0"}
        requirements:
          run:
            - if: with_cli
              then:
                - cli >=1,<2
        """)
    add_recipe(root, "ext", """
        package: {name: ext, version: "1.0"}
        requirements:
          build: [cmake]
          host: [zlib]
        """)
    add_recipe(root / "nested", "tools-user", """
        package: {name: tools-user, version: "1.0"}
        requirements:
          build:
            - base-tools >=1
        """)
    add_recipe(root / ".hidden", "ignored", "package: {name: ignored, version: '1'}\n")
    return root


def test_recipe_folder_edges_come_from_output_names(tmp_path):
    root = _folder(tmp_path)
    dirs = recipe_dirs_under(root)
    assert ".hidden" not in {p.parent.name for p in dirs}
    infos = {i.package: i for i in map(read_recipe, dirs)}
    assert set(infos) == {"base", "app", "cli", "doc", "ext", "tools-user"}
    assert infos["base"].outputs == ["libbase", "base-tools"]
    edges = recipe_edges(infos)
    assert edges == {
        "base": Edges(frozenset(), frozenset()),            # its own outputs pinning each other: no self edge
        "app": Edges(frozenset({"base"}), frozenset()),     # host: libbase, an output of base
        "cli": Edges(frozenset({"app"}), frozenset()),      # run, but an exact pin ${{ dep_app }}
        "doc": Edges(frozenset(), frozenset({"cli"})),      # run by version range (under an if:)
        "ext": Edges(frozenset(), frozenset()),             # requirements nobody here produces
        "tools-user": Edges(frozenset({"base"}), frozenset()),
    }

    nodes = nodes_from_recipe_dirs(dirs)
    by = {n.package: n for n in nodes}
    order = [n.package for n in nodes]
    # a recipe folder takes every edge as an input, run edges too (recipegraph's docstring)
    assert {n.package: n.deps for n in nodes} == {
        "base": (), "app": ("base",), "cli": ("app",), "doc": ("cli",), "ext": (), "tools-user": ("base",)}
    for n in nodes:
        assert all(order.index(d) < order.index(n.package) for d in n.deps)
        assert n.preimage.get("dependencies", {}) == {d: by[d].id for d in n.deps}
    assert order == ["base", "app", "cli", "doc", "ext", "tools-user"]   # ties by name
    assert by["ext"].meta["outside_requirements"] == ["cmake", "zlib"]

    # an edge carries ids: base's recipe changes, everything downstream moves, ext does not
    ref = {n.package: n.id for n in nodes}
    _append(root / "base-folder" / "recipe.yaml", "# changed\n")
    new = {n.package: n.id for n in nodes_from_recipe_dirs(recipe_dirs_under(root))}
    assert {k for k in ref if new[k] != ref[k]} == {"base", "app", "cli", "doc", "tools-user"}


def _cycle(tmp_path: Path) -> Path:
    root = tmp_path / "cycle"
    add_recipe(root, "x", """
        package: {name: x, version: "1.0"}
        requirements:
          host: [y-lib]
        build: {script: [true]}
        """)
    add_recipe(root, "y-folder", """
        recipe: {name: y, version: "1.0"}
        outputs:
          - package: {name: y-lib}
            requirements:
              run: [x >=1]
        build: {script: [true]}
        """)
    return root


def test_cycle_between_two_recipes_is_one_clear_line(tmp_path):
    root = _cycle(tmp_path)
    with pytest.raises(UserError) as err:
        nodes_from_recipe_dirs(recipe_dirs_under(root))
    text = str(err.value)
    assert "\n" not in text and err.value.exit_code == 2
    assert text.startswith("recipe graph has a cycle: x -> y -> x")
    assert "(accepted: requirements that form a DAG" in text


def test_cycle_is_refused_by_the_cli_before_anything_is_built(tmp_path, capsys):
    root = _cycle(tmp_path)
    state = tmp_path / "state"
    for argv in (["build", "--recipes", root, "--store", state / "store", "--channel", state / "channel",
                  "--source-cache", state / "sources", "--offline"],
                 ["build", "--recipes", root, "--store", state / "store", "--channel", state / "channel",
                  "--source-cache", state / "sources", "--offline", "--json"],
                 ["fetch", "--recipes", root, "--source-cache", state / "sources", "--offline"]):
        rc, out, err = cli_in_process(capsys, *argv)
        assert rc == 2 and out == "", (argv, out, err)
        assert err.count("\n") == 1 and "Traceback" not in err
        assert err.startswith("deepep-env: error: recipe graph has a cycle: x -> y -> x")
    assert not state.exists()


def test_cycle_names_the_cycle_not_what_hangs_off_it(tmp_path):
    root = tmp_path / "three"
    for name, needs in (("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")):
        add_recipe(root, name, f"package: {{name: {name}, version: '1'}}\nrequirements:\n  host: [{needs}]\n")
    with pytest.raises(UserError, match=r"^recipe graph has a cycle: a -> b -> c -> a \(accepted"):
        nodes_from_recipe_dirs(recipe_dirs_under(root))


def test_a_package_produced_by_two_recipes_is_refused(tmp_path):
    root = tmp_path / "two"
    add_recipe(root, "one", "recipe: {name: one, version: '1'}\noutputs:\n  - package: {name: shared-lib}\n")
    add_recipe(root, "two", "package: {name: shared-lib, version: '1'}\n")
    with pytest.raises(UserError, match="package 'shared-lib' is produced by two recipes: one and shared-lib"):
        nodes_from_recipe_dirs(recipe_dirs_under(root))


def test_build_order_is_stable_and_ignores_names_outside_the_graph():
    assert build_order(["c", "a", "b"], {}) == ["c", "a", "b"]
    assert build_order(["c", "a", "b"], {"c": ["b"]}) == ["a", "b", "c"]
    assert build_order(["c", "a", "b"], {"a": ["zlib", "python"]}) == ["c", "a", "b"]
    with pytest.raises(UserError, match=r"cycle: a -> a"):
        build_order(["a"], {"a": ["a"]})
