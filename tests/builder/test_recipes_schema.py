"""The real recipes (recipes/*/recipe.yaml) are valid rattler-build v1 recipes (the upstream JSON
schema in ../shared/schemas/) and render, with the builder's recipe inputs, for every env spec."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from build_fixtures import FIXTURES, REPO

SCHEMA_NAME = "conda-recipe-v1-c33fce2.schema.json"
REAL_RECIPES = ("gdrcopy", "nvshmem", "deep-ep", "nccl", "deep-ep-v2")
SPECS = sorted(p.stem for p in (REPO / "env_specs").glob("*.toml"))


@pytest.fixture(scope="module")
def validator(shared_dir):
    import jsonschema

    path = shared_dir / "schemas" / SCHEMA_NAME
    if not path.is_file():
        pytest.fail(f"recipe schema not found at {path}: the shared schema folder must sit beside the project "
                    "(../shared/schemas/, or set DEEPEP_ENV_SHARED); this test does not skip")
    schema = json.loads(path.read_text())
    return jsonschema.validators.validator_for(schema)(schema)


def _errors(validator, recipe: Path) -> list[str]:
    import jsonschema

    doc = yaml.safe_load(recipe.read_text(encoding="utf-8"))
    errs = list(validator.iter_errors(doc))
    if not errs:
        return []
    best = jsonschema.exceptions.best_match(errs)
    return [f"{'/'.join(map(str, best.absolute_path)) or '<root>'}: {best.message[:300]}"] + [
        "/".join(map(str, e.absolute_path)) or "<root>" for e in errs[1:]]


@pytest.mark.parametrize("package", REAL_RECIPES)
def test_real_recipe_is_valid_against_the_schema(validator, package):
    recipe = REPO / "recipes" / package / "recipe.yaml"
    if not recipe.is_file():
        pytest.fail(f"{recipe.relative_to(REPO)} does not exist yet")
    assert _errors(validator, recipe) == []


def test_fixture_recipes_are_valid_against_the_schema(validator):
    recipes = sorted(FIXTURES.rglob("recipe.yaml"))
    assert recipes
    assert {str(r.relative_to(FIXTURES)): _errors(validator, r) for r in recipes} == {
        str(r.relative_to(FIXTURES)): [] for r in recipes}


@pytest.mark.parametrize("spec", SPECS)
def test_real_recipes_render_for_every_spec(spec, tmp_path):
    """Render every node of the spec's build graph with exactly the context the builder passes
    (deepep_env.builder.driver.recipe_context), sources staged at placeholder paths."""
    from deepep_env.builder.driver import _check_staged_sources, recipe_context, render
    from deepep_env.builder.plan import plan
    from deepep_env.base.project import Project
    from deepep_env.sources import primary_source
    from deepep_env.base.errors import UserError
    from deepep_env.envspec import load_resolved

    project = Project(REPO)
    bp = plan(load_resolved(spec, project), project)
    by = {n.package: n for n in bp.nodes}
    for node in bp.nodes:
        staged = {name: tmp_path / node.package / name for name in node.sources}
        ctx = recipe_context(node, source_dirs=staged, deps=[by[d] for d in node.deps], jobs=4,
                             primary=primary_source(node.package, list(staged)))
        recipe = node.recipe_dir / "recipe.yaml"
        try:
            variants = render(recipe, ctx, package=node.package)
            assert variants, f"{node.package}: renders no output for {spec}"
            _check_staged_sources(variants, list(staged.values()), node.package, recipe)
        except UserError as err:
            pytest.fail(f"{spec}: {err}", pytrace=False)
        for v in variants:
            # the build string carries the id (unpinned nodes render with the placeholder)
            assert v.recipe.build.string == node.build_string, (spec, node.package, v.recipe.package.name)
