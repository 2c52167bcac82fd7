"""The build graph as the recipes define it: one owner of its edges and of the build order.

``read_recipe(dir)`` reads a ``recipe.yaml`` *without building* (nor rendering): package and output
names, version, and the names in ``requirements.build/host/run`` of the recipe and of every output,
both branches of ``if/then/else``. A requirement naming another node's output, or an exact pin
``${{ dep_<node> }}``, is an edge (:func:`recipe_edges`). Two kinds:

- **build edges**: a ``build``/``host`` requirement, a ``${{ dep_<x> }}`` pin anywhere, or a
  ``pin_subpackage``/``pin_compatible`` anywhere: the dependent's bytes depend on that build, so
  its id enters the dependent's pre-image (docs/build-id.md §2, ``dependencies``);
- **run edges**: a ``run`` requirement naming the output only by name or version range (DeepEP's
  ``deepep-env >=0.2,<1``): needed in the channel of the dependent's recipe test, not an input of
  its bytes.

Who consumes what: :func:`deepep_env.buildplan.plan` (an env spec: the project's own recipes, which
pin what they build against) puts build edges into ``BuildNode.deps`` and run edges into
``BuildNode.run_deps``; :func:`deepep_env.builder.graph.nodes_from_recipe_dirs` (any recipe folder,
written by someone else) takes both into ``deps`` — a run requirement there may pin a build in a
way not parsed here, and an extra input costs a rebuild where a missing one would keep a stale
package. :func:`build_order` sorts either topologically, ties in the order given; a cycle is one
clear error naming it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

import yaml

from deepep_env.errors import UserError
from deepep_env.readfile import MAX_CONFIG_BYTES, read_text

_VAR = re.compile(r"\$\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_PIN = re.compile(r"""pin_(?:subpackage|compatible)\(\s*['"]([^'"]+)['"]""")
_NAME = re.compile(r"^\s*([A-Za-z0-9_][A-Za-z0-9_.\-]*)")
_DEP_REF = re.compile(r"\bdep_([A-Za-z0-9_]+?)(?:_version|_build_string)?\s*\}\}")


def ident(name: str) -> str:
    """A package name as a recipe variable suffix: ``dep_<ident>`` (docs/build-id.md §6)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


@dataclass
class RecipeInfo:
    dir: Path
    package: str                       # the recipe's package name (node name of a recipe-folder graph)
    version: Optional[str]
    outputs: list[str]                 # conda package names it produces
    requirements: set[str] = field(default_factory=set)   # raw names, resolved where possible
    unconditional: set[str] = field(default_factory=set)  # those not under an if: (always needed)
    dep_refs: set[str] = field(default_factory=set)       # idents used as ${{ dep_<x> }}
    path_sources: list[str] = field(default_factory=list)  # own path: sources as written
    built_against: set[str] = field(default_factory=set)  # names in build/host, or pinned anywhere


def _subst(text: Any, ctx: Mapping[str, Any]) -> Any:
    if not isinstance(text, str):
        return text
    for _ in range(5):
        new = _VAR.sub(lambda m: str(ctx[m.group(1)]) if m.group(1) in ctx else m.group(0), text)
        if new == text:
            break
        text = new
    return text


def _items(value: Any, _cond: bool = False, *, with_cond: bool = False) -> Iterable[Any]:
    """Flatten a requirements list, taking both branches of rattler's ``if/then/else``
    (``with_cond``: yield ``(item, under_a_condition)``)."""
    if value is None:
        return
    if isinstance(value, list):
        for v in value:
            yield from _items(v, _cond, with_cond=with_cond)
    elif isinstance(value, dict) and "if" in value:
        yield from _items(value.get("then"), True, with_cond=with_cond)
        yield from _items(value.get("else"), True, with_cond=with_cond)
    else:
        yield (value, _cond) if with_cond else value


def _req_sections(doc: Mapping[str, Any]) -> Iterable[tuple[str, Any, bool]]:
    """``(section, requirement, under_a_condition)`` for build, host and run."""
    reqs = doc.get("requirements") or {}
    if isinstance(reqs, dict):
        for key in ("build", "host", "run"):
            for item, cond in _items(reqs.get(key), with_cond=True):
                yield key, item, cond


def _sources(doc: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    for s in _items(doc.get("source")):
        if isinstance(s, dict):
            yield s


def _load(path: Path) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(read_text(path, what="recipe", accepted="a rattler-build v1 recipe.yaml",
                                       missing="missing recipe", limit=MAX_CONFIG_BYTES))
    except yaml.YAMLError as exc:
        raise UserError(f"recipe is not valid YAML: {str(exc).splitlines()[0]}", file=path) from None
    if not isinstance(doc, dict):
        raise UserError("recipe is not a YAML mapping", file=path)
    return doc


def _add_requirements(info: RecipeInfo, doc: Mapping[str, Any], ctx: Mapping[str, Any]) -> None:
    for section, req, cond in _req_sections(doc):
        if not isinstance(req, str):
            continue
        for ref in _DEP_REF.finditer(req):
            info.dep_refs.add(ref.group(1))
        pin = _PIN.search(req)
        s = _subst(req, ctx)
        m = None if pin or s.lstrip().startswith("${{") else _NAME.match(s)
        name = pin.group(1) if pin else (m.group(1) if m else None)
        if name:
            info.requirements.add(name)
            if not cond:
                info.unconditional.add(name)
            if section != "run" or pin:
                info.built_against.add(name)


def read_recipe(recipe_dir: Path) -> RecipeInfo:
    path = recipe_dir / "recipe.yaml"
    doc = _load(path)
    ctx: dict[str, Any] = {}
    for k, v in (doc.get("context") or {}).items():
        ctx[k] = _subst(v, ctx)

    def resolved(v: Any) -> Optional[str]:
        s = _subst(v, ctx)
        return None if s is None or "${{" in str(s) else str(s)

    outputs_doc = [o for o in (doc.get("outputs") or []) if isinstance(o, dict)]
    if outputs_doc:
        name = resolved((doc.get("recipe") or {}).get("name")) or recipe_dir.name
        version = resolved((doc.get("recipe") or {}).get("version"))
        outputs = []
        for o in outputs_doc:
            on = resolved((o.get("package") or {}).get("name"))
            if on:
                outputs.append(on)
            version = version or resolved((o.get("package") or {}).get("version"))
        docs = [doc, *outputs_doc]
    else:
        pkg = doc.get("package") or {}
        name = resolved(pkg.get("name")) or recipe_dir.name
        version = resolved(pkg.get("version"))
        outputs = [name]
        docs = [doc]
    info = RecipeInfo(recipe_dir, name, version, outputs)
    for d in docs:
        _add_requirements(info, d, ctx)
        for s in _sources(d):
            p = s.get("path")
            if isinstance(p, str) and "${{" not in _subst(p, ctx):
                info.path_sources.append(_subst(p, ctx))
    return info


@dataclass(frozen=True)
class Edges:
    build: frozenset[str]   # nodes whose builds this one is built against (its pre-image)
    run: frozenset[str]     # nodes its run requirements name by version range only


def output_owners(infos: Mapping[str, RecipeInfo]) -> dict[str, str]:
    """Conda package name → node name (a node's own name counts as one of its outputs)."""
    owner: dict[str, str] = {}
    for node, i in infos.items():
        for o in sorted({*i.outputs, node}):
            if o in owner and owner[o] != node:
                raise UserError(f"package {o!r} is produced by two recipes: {owner[o]} and {node}",
                                file=i.dir / "recipe.yaml")
            owner[o] = node
    return owner


def recipe_edges(infos: Mapping[str, RecipeInfo]) -> dict[str, Edges]:
    """The edges between the nodes ``infos`` names (node name → its recipe), from what each recipe
    requires of the others' outputs; requirements no node produces are no edge."""
    owner = output_owners(infos)
    by_ident = {ident(node): node for node in infos}
    out = {}
    for node, i in infos.items():
        build = {owner[r] for r in i.built_against if r in owner} | {by_ident[r] for r in i.dep_refs if r in by_ident}
        run = {owner[r] for r in i.requirements if r in owner} - build
        out[node] = Edges(frozenset(build - {node}), frozenset(run - {node}))
    return out


def build_order(nodes: Sequence[str], deps: Mapping[str, Iterable[str]]) -> list[str]:
    """``nodes`` in an order where each comes after all of its ``deps``; of the nodes ready at a
    time, the first in ``nodes`` goes first (so the order is stable). A cycle is one error."""
    rank = {n: k for k, n in enumerate(nodes)}
    needs = {n: set(deps.get(n, ())) & rank.keys() for n in nodes}
    indeg = {n: len(needs[n]) for n in nodes}
    users: dict[str, list[str]] = {n: [] for n in nodes}
    for n in nodes:
        for d in needs[n]:
            users[d].append(n)
    ready = sorted((n for n in nodes if indeg[n] == 0), key=rank.__getitem__)
    out: list[str] = []
    while ready:
        n = ready.pop(0)
        out.append(n)
        for u in users[n]:
            indeg[u] -= 1
            if indeg[u] == 0:
                ready.append(u)
        ready.sort(key=rank.__getitem__)
    if len(out) != len(nodes):
        _raise_cycle({n for n in nodes if indeg[n] > 0}, needs)
    return out


def _raise_cycle(left: set[str], needs: Mapping[str, set[str]]) -> None:
    # every node left has a dep left (indegree > 0), so this walk always closes a cycle
    start = sorted(left)[0]
    path, cur = [start], start
    while True:
        cur = sorted(d for d in needs[cur] if d in left)[0]
        if cur in path:
            cyc = path[path.index(cur):] + [cur]
            break
        path.append(cur)
    raise UserError("recipe graph has a cycle: " + " -> ".join(cyc),
                    accepted="requirements that form a DAG (a package cannot need itself, even indirectly)")
