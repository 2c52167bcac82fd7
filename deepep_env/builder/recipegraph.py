"""The build graph as the recipes define it: one owner of its edges and of the build order.

``read_recipe(dir)`` reads a ``recipe.yaml`` *without building* (nor rendering) into a
:class:`RecipeInfo`: package and output names, version, and the names in
``requirements.build/host/run`` of the recipe and of every output, both branches of
``if/then/else``. It is the one reader of recipes in the package, and it reads them as rattler-build
does: :func:`parse_recipe` is rattler-build's own parser (py-rattler-build's typed stage-0 recipe,
``Stage0Recipe``: YAML, the v1 recipe schema, outputs and staging outputs, conditionals), which the
builder renders too (:func:`deepep_env.builder.driver.render`); the ``${{ … }}`` templates the
stage-0 recipe keeps as written are read with Jinja's parser (an expression tree: the variables a
template reads, the ``pin_subpackage``/``pin_compatible`` it calls), and a requirement's package
name is the match spec's leading name. No regular expression reads a recipe: a flow-style list, a
quoted key, a comment or a block scalar reads as it does in rattler-build, and a recipe
rattler-build refuses is one error line naming the file.

A requirement naming another node's output, or an exact pin ``${{ dep_<node> }}``, is an edge
(:func:`recipe_edges`). Two kinds:

- **build edges**: a ``build``/``host`` requirement, a ``${{ dep_<x> }}`` pin anywhere, or a
  ``pin_subpackage``/``pin_compatible`` anywhere: the dependent's bytes depend on that build, so
  its id enters the dependent's pre-image (docs/build-id.md §2, ``dependencies``);
- **run edges**: a ``run`` requirement naming the output only by name or version range (DeepEP's
  ``deepep-env >=0.2,<1``): needed in the channel of the dependent's recipe test, not an input of
  its bytes.

Who consumes what: :func:`deepep_env.builder.plan.plan` (an env spec: the project's own recipes, which
pin what they build against) puts build edges into ``BuildNode.deps`` and run edges into
``BuildNode.run_deps``; :func:`deepep_env.builder.graph.nodes_from_recipe_dirs` (any recipe folder,
written by someone else) takes both into ``deps`` — a run requirement there may pin a build in a
way not parsed here, and an extra input costs a rebuild where a missing one would keep a stale
package. :func:`build_order` sorts either topologically, ties in the order given; a cycle is one
clear error naming it.
"""
from __future__ import annotations

import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Optional, Sequence, Union

from deepep_env.base.errors import UserError
from deepep_env.base.rattler_errors import rattler_errors
from deepep_env.base.readfile import MAX_CONFIG_BYTES, read_text

if TYPE_CHECKING:  # annotations only: both are imported when a recipe is read
    from jinja2 import Environment, nodes
    from rattler_build import Stage0Recipe

ACCEPTED = "a rattler-build v1 recipe.yaml"
_IDENT = frozenset(string.ascii_letters + string.digits + "_")
_NAME_CHARS = _IDENT | {".", "-"}                   # what a conda package name is made of
_PINS = ("pin_subpackage", "pin_compatible")
_DEP_SUFFIXES = ("_version", "_build_string")       # dep_<x>_version, dep_<x>_build_string (docs/build-id.md §6)
_SECTIONS = ("build", "host", "run")

# A template: literal text and Jinja expression trees, in order.
Part = Union[str, "nodes.Node"]


def ident(name: str) -> str:
    """A package name as a recipe variable suffix: ``dep_<ident>`` (docs/build-id.md §6)."""
    return "".join(c if c in _IDENT else "_" for c in name)


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
    context: frozenset[str] = frozenset()                 # the names the recipe's context: defines
    reads: frozenset[str] = frozenset()                   # every variable its templates and if: read


# --------------------------------------------------------------------------------------------- the parser


def parse_recipe(path: Path, *, package: Optional[str] = None) -> "Stage0Recipe":
    """``path`` as rattler-build parses it (py-rattler-build's typed stage-0 recipe), or one error
    line naming the file. The builder renders what this returns (:func:`deepep_env.builder.driver.render`)."""
    from rattler_build import Stage0Recipe

    # bounded, and "missing recipe" / not a file / not UTF-8 as every config file says it
    read_text(path, what="recipe", accepted=ACCEPTED, missing="missing recipe", limit=MAX_CONFIG_BYTES)
    who = f"package {package}: " if package else ""
    with rattler_errors(who + "recipe does not parse: {error}", file=path, accepted=ACCEPTED, first_line=True,
                        limit=400):
        recipe = Stage0Recipe.from_file(path)
    return recipe


_JINJA: "Optional[Environment]" = None


def _jinja() -> "Environment":
    global _JINJA
    if _JINJA is None:
        from jinja2 import Environment

        # rattler-build's expression syntax: ${{ … }}; the text around it kept byte for byte
        _JINJA = Environment(variable_start_string="${{", variable_end_string="}}", keep_trailing_newline=True)
    return _JINJA


def _parts(text: str) -> tuple[Part, ...]:
    """A ``${{ … }}`` template as Jinja parses it: literal text and expression trees, in order.
    Text Jinja cannot parse is opaque from its first ``${{`` on (rattler-build refuses it when it
    renders)."""
    from jinja2 import TemplateSyntaxError, nodes

    try:
        tree = _jinja().parse(text)
    except TemplateSyntaxError:
        head, sep, _ = text.partition("${{")
        return (head, nodes.Const(text)) if sep else (text,)
    out: list[Part] = []
    for stmt in tree.body:
        if isinstance(stmt, nodes.Output):
            out += [n.data if isinstance(n, nodes.TemplateData) else n for n in stmt.nodes]
        else:
            out.append(stmt)   # a {% … %} block: opaque
    return tuple(out)


def _walk(node: "nodes.Node") -> Iterator["nodes.Node"]:
    yield node
    for child in node.iter_child_nodes():
        yield from _walk(child)


def _read_names(parts: Iterable[Part]) -> Iterator[str]:
    """The variables an expression reads (a function's own name is no variable: ``compiler('c')``)."""
    from jinja2 import nodes

    callees: set[int] = set()
    for p in parts:
        if isinstance(p, str):
            continue
        for n in _walk(p):
            if isinstance(n, nodes.Call):
                callees.add(id(n.node))
            elif isinstance(n, nodes.Name) and n.ctx == "load" and id(n) not in callees:
                yield n.name


def _pinned(parts: Iterable[Part]) -> Optional[str]:
    """The package of the first ``pin_subpackage('x', …)`` / ``pin_compatible('x', …)`` called."""
    from jinja2 import nodes

    for p in parts:
        if isinstance(p, str):
            continue
        for n in _walk(p):
            if isinstance(n, nodes.Call) and isinstance(n.node, nodes.Name) and n.node.name in _PINS:
                args = [*n.args[:1], *(k.value for k in n.kwargs if k.key == "name")]
                if args and isinstance(args[0], nodes.Const) and isinstance(args[0].value, str):
                    return args[0].value
    return None


def _dep_ident(var: str) -> Optional[str]:
    """``dep_<x>``, ``dep_<x>_version``, ``dep_<x>_build_string`` → ``<x>``."""
    if not var.startswith("dep_"):
        return None
    rest = var[len("dep_"):]
    for suffix in _DEP_SUFFIXES:
        if rest.endswith(suffix) and len(rest) > len(suffix):
            return rest[: -len(suffix)]
    return rest or None


Context = Mapping[str, tuple[Part, ...]]


def _subst(parts: Sequence[Part], ctx: Context, depth: int = 5) -> list[Part]:
    """``${{ name }}`` replaced by the recipe's context value ``name`` (itself substituted, ``depth``
    levels deep); every other expression stays."""
    from jinja2 import nodes

    out: list[Part] = []
    for p in parts:
        if isinstance(p, nodes.Name) and p.name in ctx and depth > 0:
            out += _subst(ctx[p.name], ctx, depth - 1)
        else:
            out.append(p)
    return out


def _resolved(value: Any, ctx: Context) -> Optional[str]:
    """The text of a template whose every expression is a context value; None otherwise."""
    if value is None:
        return None
    if not isinstance(value, str):
        return str(value)
    parts = _subst(_parts(value), ctx)
    return "".join(p for p in parts if isinstance(p, str)) if all(isinstance(p, str) for p in parts) else None


def _leading_name(parts: Sequence[Part]) -> Optional[str]:
    """The package name a match spec starts with (``nccl ${{ dep_nccl }}`` → ``nccl``); None when
    it starts with an expression (``${{ compiler('c') }}``)."""
    head = ""
    for p in parts:
        if not isinstance(p, str):
            break
        head += p
    head = head.lstrip()
    if not head or head[0] not in _IDENT:
        return None
    end = next((k for k, c in enumerate(head) if c not in _NAME_CHARS), len(head))
    return head[:end]


# --------------------------------------------------------------------------------------------- the recipe's data


def _items(value: Any, _cond: bool = False, *, with_cond: bool = False) -> Iterable[Any]:
    """Flatten a list of the stage-0 recipe, taking both branches of rattler's ``if/then/else``
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


def _strings(value: Any) -> Iterator[tuple[str, bool]]:
    """Every string of a stage-0 recipe (as ``to_dict`` gives it) with whether it is a bare
    expression (an ``if:`` condition, a ``build.skip`` entry) rather than a ``${{ … }}`` template."""
    if isinstance(value, str):
        yield value, False
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            if k == "if" and isinstance(v, str):
                yield v, True
            elif k == "skip" and isinstance(v, list):
                yield from ((x, True) for x in v if isinstance(x, str))
            else:
                yield from _strings(v)


def _add_requirements(info: RecipeInfo, reqs: Mapping[str, Any], ctx: Context) -> None:
    for section in _SECTIONS:
        for req, cond in _items(reqs.get(section), with_cond=True):
            if not isinstance(req, str):
                continue
            parts = _parts(req)
            info.dep_refs.update(d for d in map(_dep_ident, _read_names(parts)) if d)
            pin = _pinned(parts)
            name = pin or _leading_name(_subst(parts, ctx))
            if name:
                info.requirements.add(name)
                if not cond:
                    info.unconditional.add(name)
                if section != "run" or pin:
                    info.built_against.add(name)


def _add_sources(info: RecipeInfo, sources: Any, ctx: Context) -> None:
    for s in _items(sources):
        if isinstance(s, dict) and isinstance(s.get("path"), str):
            p = _resolved(s["path"], ctx)
            if p is not None:
                info.path_sources.append(p)


def check_recipe_links(recipe_dir: Path) -> None:
    """Every symlink in a recipe folder names a regular file inside the recipes folder it sits in (the
    shared ``recipes/_include/``). What a link names goes into the build id and, as a file, into the
    package's ``info/recipe/`` (:func:`deepep_env.builder.normalize.recipe_members`): a link out of
    the project would publish whatever it points at (a key, a password file), and a dangling one would
    ship dangling. One line, before anything is hashed or built."""
    import os

    base = Path(recipe_dir)
    root = base.resolve().parent
    for p in sorted(base.rglob("*")):
        if not p.is_symlink():
            continue
        target = p.resolve()
        if not target.is_file():
            raise UserError(f"a symlink to {os.readlink(p)!r}, which names no regular file", file=p,
                            accepted="a link to a file under the recipes folder (e.g. ../_include/cuda-build.sh), "
                                     "or the file itself")
        if not target.is_relative_to(root):
            raise UserError(f"a symlink out of the recipes folder ({os.readlink(p)!r} is {target})", file=p,
                            accepted=f"a link to a file under {root} (what it names goes into the build id and "
                                     "into the package's info/recipe/)")


def read_recipe(recipe_dir: Path, *, file: Optional[Path] = None) -> RecipeInfo:
    """``<recipe_dir>/recipe.yaml`` (or ``file``) as rattler-build parses it (:func:`parse_recipe`),
    unrendered: the one reader of recipes every caller uses."""
    from rattler_build.stage0 import MultiOutputRecipe, PackageOutput, SingleOutputRecipe

    path = file if file is not None else recipe_dir / "recipe.yaml"
    recipe = parse_recipe(path)
    raw = recipe.to_dict()   # the same typed recipe, as plain data (sources, outputs' sections)
    ctx: dict[str, tuple[Part, ...]] = {}
    for k, v in (recipe.context or {}).items():
        ctx[str(k)] = _parts(v) if isinstance(v, str) else (str(v),)

    parts_of: list[tuple[Mapping[str, Any], Any]] = []   # (requirements, source) of the recipe and each output
    if isinstance(recipe, MultiOutputRecipe):
        meta = recipe.recipe.to_dict()
        name = _resolved(meta.get("name"), ctx) or recipe_dir.name
        version = _resolved(meta.get("version"), ctx)
        outputs = []
        parts_of.append((raw.get("requirements") or {}, raw.get("source")))
        for o in recipe.outputs:
            d = o.to_dict()
            if isinstance(o, PackageOutput):
                on = _resolved(o.package.name, ctx)
                if on:
                    outputs.append(on)
                version = version or _resolved(o.package.version, ctx)
            parts_of.append((d.get("requirements") or {}, d.get("source")))
    else:
        assert isinstance(recipe, SingleOutputRecipe)
        name = _resolved(recipe.package.name, ctx) or recipe_dir.name
        version = _resolved(recipe.package.version, ctx)
        outputs = [name]
        r = recipe.requirements
        parts_of.append(({"build": r.build, "host": r.host, "run": r.run}, raw.get("source")))

    reads: set[str] = set()
    for text, is_condition in _strings(raw):
        reads.update(_read_names(_parts("${{ " + text + " }}" if is_condition else text)))
    info = RecipeInfo(recipe_dir, name, version, outputs, context=frozenset(ctx), reads=frozenset(reads))
    for reqs, sources in parts_of:
        _add_requirements(info, reqs, ctx)
        _add_sources(info, sources, ctx)
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
