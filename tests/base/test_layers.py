"""The layers of deepep_env hold (issue 29.1): no import from a lower layer to a higher one, and no
import cycle between top-level modules/packages.

The layers are written once, in :mod:`deepep_env.base.layers`. The graph is read from the source with
``ast``: every ``import``/``from … import`` anywhere in a module (top level, inside functions,
under ``TYPE_CHECKING``), relative imports resolved. An edge is named by module:
``deepep_env.builder.realise -> deepep_env.formats.lockfile``.
"""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from deepep_env.base.layers import LAYERS, layer_of

PKG = Path(__file__).resolve().parents[2] / "deepep_env"

# No upward import is allowed, and there is no list of exceptions: the last ones (channel URLs, the
# lock file formats, the prefix marker, the activation hook) were fixed by moving the code
# (issue 29.5). A new one is fixed the same way, never by hiding the import inside a function.


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (p, is_pkg)
    return out


def _edges(mods: dict[str, tuple[Path, bool]]) -> list[tuple[str, str, str, int]]:
    """(importer, imported, file, line) for every import of a deepep_env module."""
    edges = []
    for mod, (path, is_pkg) in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    here = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    here = here[:len(here) - (node.level - 1)]
                    base = ".".join(here + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                # `from pkg import submodule` imports the submodule; `from mod import name`, the module
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            for t in targets:
                if t == "deepep_env" or t.startswith("deepep_env."):
                    edges.append((mod, t, str(path.relative_to(PKG.parent)), node.lineno))
    return edges


def _top(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else ""


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_module_is_in_a_layer():
    missing = sorted({_top(m) for m in _modules() if layer_of(_top(m)) is None})
    assert not missing, (f"top-level modules in no layer: {missing}; add each to deepep_env/base/layers.py "
                         f"(layers, lowest first: {[name for name, _, _ in LAYERS]})")


def test_no_module_is_in_two_layers():
    seen: dict[str, str] = {}
    twice = []
    for name, mods, _ in LAYERS:
        for m in mods:
            if m in seen:
                twice.append(f"{m!r} in {seen[m]} and {name}")
            seen[m] = name
    assert not twice, twice


def test_no_upward_import():
    mods = _modules()
    bad = []
    for src, dst, file, line in _edges(mods):
        ls, ld = layer_of(_top(src)), layer_of(_top(dst))
        if ls is None or ld is None or ld[0] <= ls[0]:
            continue
        bad.append(f"{src} -> {dst} (layer {ls[1]} imports layer {ld[1]}; {file}:{line})")
    assert not bad, "upward imports:\n  " + "\n  ".join(sorted(set(bad)))


def test_no_cycle_between_top_level_modules():
    mods = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    how: dict[tuple[str, str], set[str]] = defaultdict(set)
    for src, dst, _, _ in _edges(mods):
        a, b = _top(src), _top(dst)
        if a != b:
            graph[a].add(b)
            how[(a, b)].add(f"{src} -> {dst}")
    lines = []
    for comp in _cycles(graph):
        for a in comp:
            for b in sorted(graph[a] & set(comp)):
                la, lb = layer_of(a), layer_of(b)
                for e in sorted(how[(a, b)]):
                    lines.append(f"{e} (layer {la[1] if la else '?'} imports layer {lb[1] if lb else '?'})")
    assert not lines, "import cycles between top-level modules:\n  " + "\n  ".join(lines)


def test_the_reader_sees_function_level_and_relative_imports():
    """The graph is the whole graph: a function-level import counts (lock/request.py plans inside a
    function), and so does an import inside a package's ``__init__``."""
    edges = {(s, d) for s, d, _, _ in _edges(_modules())}
    assert ("deepep_env.lock.request", "deepep_env.builder.plan") in edges
    assert ("deepep_env.host.context", "deepep_env.install.installer") in edges
    assert ("deepep_env.lock", "deepep_env.lock.solve") in edges


def test_the_checks_catch_an_upward_import_and_a_cycle():
    """The checks themselves: an invented upward edge and an invented loop are found."""
    assert layer_of("base") < layer_of("cli")  # type: ignore[operator]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_architecture_page_shows_these_layers():
    """docs/architecture.md's table of layers is deepep_env/base/layers.py's, in order."""
    import re

    doc = (PKG.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| (\w+) \| (.*?) \| .* \|$", doc, re.M)
    want = [(name, sorted(m for m in mods if m)) for name, mods, _ in LAYERS]
    got = [(name, sorted(x.rstrip("/") for x in re.findall(r"`([\w/]+)`", cell))) for _, name, cell in rows]
    assert got == want
