"""What each build will ask rattler-build for, before it runs: the recipe rendered with exactly the
context the builder would give it (sources shown as placeholders), read back as requirement lists.

``plan --json`` shows these per node (``builds[].requirements``), so a reviewer sees which
compilers, which PyTorch and which CUDA a build pulls before anything is downloaded or compiled.
``pin_compatible``/``pin_subpackage`` entries stay symbolic here (``pin_compatible pytorch exact``):
they are resolved against the host env when the build runs.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from deepep_env.builder.driver import recipe_context, render
from deepep_env.sources.stage import primary_source

if TYPE_CHECKING:  # annotations only: no import at run time
    from deepep_env.builder.plan import BuildNode, BuildPlan

SECTIONS = ("build", "host", "run", "run_constraints")


def _pin(kind: str, args: Mapping[str, Any], host: Sequence[str]) -> str:
    name = str(args.get("name", "?"))
    how = "exact" if args.get("exact") else ", ".join(f"{k}={v}" for k, v in sorted(args.items())
                                                      if k not in ("name", "exact"))
    asked = next((h for h in host if h.split(" ", 1)[0] == name), None)
    want = asked.split(" ", 1)[1] if asked and " " in asked else "*"
    # what the build will write: the host env's resolved record, within what the host asked for
    return f"{name} {want} ({kind} {how}: the host env's {name})"


def _entry(item: Any, host: Sequence[str]) -> str:
    if isinstance(item, Mapping) and len(item) == 1:
        kind, args = next(iter(item.items()))
        if isinstance(args, Mapping):
            return _pin(str(kind), args, host)
    return str(item)


def requirements_of(variants: Sequence[Any]) -> dict[str, dict[str, list[str]]]:
    """{output name: {section: [match spec, …]}} of rendered rattler-build variants."""
    out: dict[str, dict[str, list[str]]] = {}
    for v in variants:
        d = v.recipe.to_dict()
        name = str((d.get("package") or {}).get("name", "?"))
        reqs = d.get("requirements") or {}
        host = [str(x) for x in reqs.get("host") or [] if isinstance(x, str)]
        out[name] = {s: [_entry(x, host) for x in reqs.get(s) or []] for s in SECTIONS if reqs.get(s)}
    return out


def preview_node(node: BuildNode, deps: Sequence) -> dict[str, dict[str, list[str]]]:
    """Render ``node``'s recipe (a :class:`deepep_env.builder.plan.BuildNode`) as the builder would."""
    names = sorted(node.sources)
    staged = {n: Path(f"/staged/{node.package}/{n}") for n in names}  # placeholders: render reads no file
    ctx = recipe_context(node, source_dirs=staged, deps=deps, jobs=1, primary=primary_source(node.package, names))
    return requirements_of(render(node.recipe_dir / "recipe.yaml", ctx, package=node.package))


def preview_plan(plan: BuildPlan) -> dict[str, dict[str, dict[str, list[str]]]]:
    """{package: {output: {section: [spec]}}} for every node of a build plan."""
    by = {n.package: n for n in plan.nodes}
    return {n.package: preview_node(n, [by[d] for d in n.deps if d in by]) for n in plan.nodes}
