"""A build graph from any set of recipe folders (not only deepep-env's own three).

``nodes_from_recipe_dirs(dirs, variant=…)`` reads each ``<dir>/recipe.yaml`` *without building*:
package and output names, version, and the names in ``requirements.build/host/run`` (of the recipe
and of every output, both branches of ``if/then/else``). A requirement naming another recipe's
output is a graph edge. Nodes come back topologically sorted (ties by name, so the order is
stable); a cycle is one clear error naming it. Ids are computed exactly as for env builds
(:mod:`deepep_env.buildplan`, docs/build-id.md §2).

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

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

import yaml

from deepep_env.buildplan import BuildNode, build_virtual_packages, finish_node  # one place computes ids
from deepep_env.errors import UserError
from deepep_env.hashing import file_sha256, tree_sha256
from deepep_env.spec.catalog import SourcePin, load_catalog
from deepep_env.spec.resolved import RPatch
from deepep_env.builder.driver import ident

_VAR = re.compile(r"\$\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_PIN = re.compile(r"""pin_(?:subpackage|compatible)\(\s*['"]([^'"]+)['"]""")
_NAME = re.compile(r"^\s*([A-Za-z0-9_][A-Za-z0-9_.\-]*)")


@dataclass
class RecipeInfo:
    dir: Path
    package: str                       # node name
    version: Optional[str]
    outputs: list[str]                 # conda package names it produces
    requirements: set[str] = field(default_factory=set)   # raw names, resolved where possible
    unconditional: set[str] = field(default_factory=set)  # those not under an if: (always needed)
    dep_refs: set[str] = field(default_factory=set)       # idents used as ${{ dep_<x> }}
    path_sources: list[str] = field(default_factory=list)  # own path: sources as written


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


def _req_sections(doc: Mapping[str, Any]) -> Iterable[tuple[Any, bool]]:
    reqs = doc.get("requirements") or {}
    if isinstance(reqs, dict):
        for key in ("build", "host", "run"):
            yield from _items(reqs.get(key), with_cond=True)


def _sources(doc: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    for s in _items(doc.get("source")):
        if isinstance(s, dict):
            yield s


def read_recipe(recipe_dir: Path) -> RecipeInfo:
    path = recipe_dir / "recipe.yaml"
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError("missing recipe", file=path, accepted="a rattler-build v1 recipe.yaml") from None
    except yaml.YAMLError as exc:
        raise UserError(f"recipe is not valid YAML: {str(exc).splitlines()[0]}", file=path) from None
    if not isinstance(doc, dict):
        raise UserError("recipe is not a YAML mapping", file=path)
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
        for req, cond in _req_sections(d):
            if not isinstance(req, str):
                continue
            for m in re.finditer(r"\bdep_([A-Za-z0-9_]+?)(?:_version|_build_string)?\s*\}\}", req):
                info.dep_refs.add(m.group(1))
            pin = _PIN.search(req)
            s = _subst(req, ctx)
            m = None if pin or s.lstrip().startswith("${{") else _NAME.match(s)
            name = pin.group(1) if pin else (m.group(1) if m else None)
            if name:
                info.requirements.add(name)
                if not cond:
                    info.unconditional.add(name)
        for s in _sources(d):
            p = s.get("path")
            if isinstance(p, str) and "${{" not in _subst(p, ctx):
                info.path_sources.append(_subst(p, ctx))
    return info


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


def _catalog_source(info: RecipeInfo):
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


def toposort(nodes: Sequence[BuildNode]) -> list[BuildNode]:
    by = {n.package: n for n in nodes}
    indeg = {n.package: 0 for n in nodes}
    users: dict[str, list[str]] = {n.package: [] for n in nodes}
    for n in nodes:
        for d in n.deps:
            indeg[n.package] += 1
            users[d].append(n.package)
    ready = sorted(p for p, k in indeg.items() if k == 0)
    out: list[BuildNode] = []
    while ready:
        p = ready.pop(0)
        out.append(by[p])
        for u in sorted(users[p]):
            indeg[u] -= 1
            if indeg[u] == 0:
                ready.append(u)
        ready.sort()
    if len(out) != len(nodes):
        left = {p for p, k in indeg.items() if k > 0}
        # walk one cycle to name it
        # every node left has a dep left (indegree > 0), so this walk always closes a cycle
        start = sorted(left)[0]
        path, cur = [start], start
        while True:
            cur = sorted(d for d in by[cur].deps if d in left)[0]
            if cur in path:
                cyc = path[path.index(cur):] + [cur]
                break
            path.append(cur)
        raise UserError("recipe graph has a cycle: " + " -> ".join(cyc),
                        accepted="requirements that form a DAG (a package cannot need itself, even indirectly)")
    return out


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
    owner: dict[str, str] = {}
    for i in infos:
        for o in {*i.outputs, i.package}:
            if o in owner and owner[o] != i.package:
                raise UserError(f"package {o!r} is produced by two recipes: {owner[o]} and {i.package}",
                                file=i.dir / "recipe.yaml")
            owner[o] = i.package
    by_ident = {ident(i.package): i.package for i in infos}
    nodes = []
    for i in infos:
        deps = {owner[r] for r in i.requirements if r in owner} | {by_ident[r] for r in i.dep_refs if r in by_ident}
        deps.discard(i.package)
        # Requirements no recipe of the graph produces: they must come from the channels the build
        # is given (build_recipes(extra_channels=…), `--extra-channel`); named when they cannot.
        outside = sorted(r for r in i.unconditional if r not in owner and not r.startswith("__"))
        pin, patches, version = _catalog_source(i)
        sources = {}
        own = _own_path_sources(i)
        for k, digest in own.items():
            sources[k] = SourcePin(tree_sha256=digest)
        if pin is not None:
            sources[i.package] = pin
        nodes.append(BuildNode(
            # "" when the version is a Jinja expression we do not evaluate (``${{ a ~ "." ~ b }}``):
            # the builder then takes it from the built package (it is not part of the id).
            package=i.package, recipe_dir=i.dir, version=version or "", variant=dict(variant or {}),
            sources=sources, patches=patches, externals={}, deps=tuple(sorted(deps)),
            meta={"own_sources": sorted(own), "outside_requirements": outside},
            virtual_packages=build_virtual_packages(),
        ))
    done = []
    ids: dict[str, Optional[str]] = {}
    for n in toposort(nodes):
        fin = finish_node(n, ids)
        ids[n.package] = fin.id
        done.append(fin)
    return done
