"""A build graph from any set of recipe folders (not only deepep-env's own).

``nodes_from_recipe_dirs(dirs, variant=…)`` reads each ``<dir>/recipe.yaml`` *without building*
(:func:`deepep_env.builder.recipegraph.read_recipe`). The edges are the recipes' own
(:func:`deepep_env.builder.recipegraph.recipe_edges`); here every edge, run requirements included, is an
input of the dependent's id (see that module for why a recipe folder differs from an env spec).
Nodes come back topologically sorted (ties by name, so the order is stable); a cycle is one clear
error naming it. Ids are computed exactly as for env builds (:mod:`deepep_env.builder.plan`,
docs/build-id.md §2).

Sources of such recipes:
- the recipe's own ``source:`` is used as written. A ``path:`` outside the recipe folder enters
  the id by its content (``sources["path:<as written>"] = tree_sha256``), because the recipe hash
  does not cover it; a ``url:`` or ``git:`` source is covered by the recipe text (its sha256/rev);
- or a ``sources.toml`` beside the recipe (same schema as ``recipes/<pkg>/sources.toml``): the
  entry for the recipe's version (or the only entry) is fetched, verified and staged like ours,
  with every catalogued patch whose ``applies_to`` is empty or names that version, in order.
  The recipe then uses ``${{ source_dir }}``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from deepep_env.builder.plan import BuildNode, build_virtual_packages, finish_nodes  # one place computes ids
from deepep_env.base.errors import UserError
from deepep_env.base.hashing import file_sha256, tree_sha256
from deepep_env.builder.recipegraph import RecipeInfo, build_order, read_recipe, recipe_edges
from deepep_env.envspec.catalog import SourcePin, load_catalog
from deepep_env.envspec.resolved import RPatch


def _own_path_sources(info: RecipeInfo) -> dict[str, str]:
    out = {}
    for rel in info.path_sources:
        p = (info.dir / rel).resolve()
        try:
            p.relative_to(info.dir.resolve())
            continue  # inside the recipe folder: already in the recipe hash
        except ValueError:
            pass
        if p.is_dir():
            out[f"path:{rel}"] = tree_sha256(p)
        elif p.is_file():
            out[f"path:{rel}"] = file_sha256(p)
        else:
            raise UserError(f"package {info.package}: path source {rel} does not exist", file=info.dir / "recipe.yaml")
    return out


def _catalog_source(info: RecipeInfo) -> tuple[Optional[SourcePin], tuple[RPatch, ...], Optional[str]]:
    if not (info.dir / "sources.toml").is_file():
        return None, (), info.version
    cat = load_catalog(info.dir.parent, info.dir.name, same_name=False)
    file = info.dir / "sources.toml"
    version = info.version
    pin = None
    if version and version in cat.versions:
        pin = cat.versions[version].source
    else:
        revs = [r for r in cat.revisions.values() if version is None or r.version == version]
        vers = list(cat.versions.items())
        if len(vers) == 1 and not revs and (version is None or vers[0][0] == version):
            version, pin = vers[0][0], vers[0][1].source
        elif len(revs) == 1 and not vers:
            pin = revs[0].source
    if pin is None:
        raise UserError(f"package {info.package}: no single source entry for version {version!r}", file=file,
                        accepted=", ".join([*cat.versions, *cat.revisions]) or "a [versions.\"<version>\".source] table")
    patches = tuple(RPatch(name=n, pin=p) for n, p in cat.patches.items()
                    if not p.applies_to or (version is not None and version in p.applies_to))
    return pin, patches, version


def recipe_dirs_under(root: Path) -> list[Path]:
    """Every folder under ``root`` holding a recipe.yaml (``root`` itself included)."""
    root = Path(root)
    if not root.is_dir():
        raise UserError("not a folder", file=root, field="--recipes", accepted="a folder of recipe folders")
    found = sorted({p.parent for p in root.rglob("recipe.yaml") if not any(part.startswith(".") for part in p.relative_to(root).parts)})
    if not found:
        raise UserError("no recipe.yaml under this folder", file=root, field="--recipes")
    return found


def nodes_from_recipe_dirs(dirs: Iterable[Path], variant: Optional[Mapping[str, Any]] = None) -> list[BuildNode]:
    """Build nodes (with ids) for every recipe folder in ``dirs``, in dependency order."""
    infos = [read_recipe(Path(d)) for d in dirs]
    first: dict[str, RecipeInfo] = {}
    for i in infos:
        # Nodes, store entries and channel files are keyed by package name: two folders giving the
        # same name would silently collapse into one node (and once crashed the cycle walk).
        if i.package in first:
            raise UserError(f"package {i.package!r} is defined by two recipe folders: {first[i.package].dir} "
                            f"and {i.dir}", file=i.dir / "recipe.yaml",
                            accepted="one recipe folder per package name (rename one package)")
        first[i.package] = i
    by_name = {i.package: i for i in infos}
    edges = recipe_edges(by_name)
    produced = {o for i in infos for o in (*i.outputs, i.package)}
    nodes = {}
    for i in infos:
        e = edges[i.package]
        # Requirements no recipe of the graph produces: they must come from the channels the build
        # is given (build_recipes(extra_channels=…), `--extra-channel`); named when they cannot.
        outside = sorted(r for r in i.unconditional if r not in produced and not r.startswith("__"))
        pin, patches, version = _catalog_source(i)
        sources = {}
        own = _own_path_sources(i)
        for k, digest in own.items():
            sources[k] = SourcePin(tree_sha256=digest)
        if pin is not None:
            sources[i.package] = pin
        nodes[i.package] = BuildNode(
            # "" when the version is a Jinja expression we do not evaluate (``${{ a ~ "." ~ b }}``):
            # the builder then takes it from the built package (it is not part of the id).
            package=i.package, recipe_dir=i.dir, version=version or "", variant=dict(variant or {}),
            sources=sources, patches=patches, externals={},
            deps=tuple(sorted(e.build | e.run)),   # every edge is an input here (recipegraph's docstring)
            meta={"own_sources": sorted(own), "outside_requirements": outside},
            virtual_packages=build_virtual_packages(),
        )
    order = build_order(sorted(nodes), {n: node.deps for n, node in nodes.items()})
    return finish_nodes([nodes[n] for n in order])
