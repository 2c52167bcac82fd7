"""The layers of deepep_env hold (issue 29.1, issue 41): no import from a lower layer to a higher one,
none of the imports :data:`~deepep_env.base.layers.FORBIDDEN` rules out, no import cycle between
top-level modules/packages, and every function-level import outside ``cli/`` says why it is not at
the top (a ``# lazy: REASON`` comment, :data:`~deepep_env.base.layers.LAZY_REASON`).

The layers and the rules are written once, in :mod:`deepep_env.base.layers`. The graph is read from
the source with ``ast``: every ``import``/``from … import`` anywhere in a module (top level, inside
functions, under ``TYPE_CHECKING``), relative imports resolved. An edge is named by module:
``deepep_env.builder.realise -> deepep_env.formats.lockfile``. The checks are functions of a module
set (:func:`modules` of a folder), so the tests below also run them over planted fake trees and show
each check failing.
"""
from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

from deepep_env.base.layers import FORBIDDEN, LAYERS, LAZY_EXEMPT, LAZY_REASON, layer_of

PKG = Path(__file__).resolve().parents[2] / "deepep_env"

# No upward import is allowed, and there is no list of exceptions: the last ones (channel URLs, the
# lock file formats, the prefix marker, the activation hook) were fixed by moving the code
# (issue 29.5). A new one is fixed the same way, never by hiding the import inside a function.

Modules = dict[str, tuple[Path, bool]]
_REASON = re.compile(re.escape(LAZY_REASON) + r" *\S")


class Edge(NamedTuple):
    src: str          # importing module, dotted
    dst: str          # imported module, dotted
    file: str         # relative to the folder above the package
    line: int
    in_function: bool  # inside a def/lambda (not module level, not a class body at module level)
    reason: bool       # a ``# lazy: …`` comment on one of the statement's lines


def modules(pkg: Path = PKG) -> Modules:
    """Every module of the package rooted at ``pkg`` (a folder named ``deepep_env``): dotted name →
    (file, is a package ``__init__``)."""
    out = {}
    for p in sorted(pkg.rglob("*.py")):
        parts = list(p.relative_to(pkg.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (p, is_pkg)
    return out


def _imports(tree: ast.AST) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement of ``tree`` and whether it is inside a function."""
    out: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def visit(node: ast.AST, in_fn: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                out.append((child, in_fn))
            visit(child, in_fn or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return out


def edges(mods: Modules) -> list[Edge]:
    """Every import of a deepep_env module in ``mods``."""
    out = []
    for mod, (path, is_pkg) in mods.items():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node, in_fn in _imports(ast.parse(text, str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    here = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    here = here[:len(here) - (node.level - 1)]
                    base = ".".join(here + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                # `from pkg import submodule` imports the submodule; `from mod import name`, the module
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            reason = any(_REASON.search(x) for x in lines[node.lineno - 1:(node.end_lineno or node.lineno)])
            rel = str(path.relative_to(path.parents[len(mod.split(".")) - (0 if is_pkg else 1)]))
            for t in targets:
                if t == "deepep_env" or t.startswith("deepep_env."):
                    out.append(Edge(mod, t, rel, node.lineno, in_fn, reason))
    return out


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


def upward(mods: Modules) -> list[str]:
    """An import of a higher layer, one line each."""
    bad = []
    for e in edges(mods):
        ls, ld = layer_of(_top(e.src)), layer_of(_top(e.dst))
        if ls is None or ld is None or ld[0] <= ls[0]:
            continue
        bad.append(f"{e.src} -> {e.dst} (layer {ls[1]} imports layer {ld[1]}; {e.file}:{e.line})")
    return sorted(set(bad))


def forbidden(mods: Modules) -> list[str]:
    """An import :data:`FORBIDDEN` rules out, one line each."""
    bad = []
    for e in edges(mods):
        a, b = _top(e.src), _top(e.dst)
        if b in FORBIDDEN.get(a, ()):
            bad.append(f"{e.src} -> {e.dst} ({a} never imports {b}: base/layers.py FORBIDDEN; {e.file}:{e.line})")
    return sorted(set(bad))


def unexplained(mods: Modules) -> list[str]:
    """A function-level import outside :data:`LAZY_EXEMPT` with no ``# lazy: REASON``, one line each."""
    bad = []
    for e in edges(mods):
        if e.in_function and not e.reason and _top(e.src) not in LAZY_EXEMPT:
            bad.append(f"{e.src} -> {e.dst} ({e.file}:{e.line}: inside a function with no "
                       f"'{LAZY_REASON} REASON' comment; move it to the top or say why)")
    return sorted(set(bad))


def cycles(mods: Modules) -> list[str]:
    """The edges of every import cycle between top-level modules/packages, one line each."""
    graph: dict[str, set[str]] = defaultdict(set)
    how: dict[tuple[str, str], set[str]] = defaultdict(set)
    for e in edges(mods):
        a, b = _top(e.src), _top(e.dst)
        if a != b:
            graph[a].add(b)
            how[(a, b)].add(f"{e.src} -> {e.dst}")
    lines = []
    for comp in _cycles(graph):
        for a in comp:
            for b in sorted(graph[a] & set(comp)):
                la, lb = layer_of(a), layer_of(b)
                for x in sorted(how[(a, b)]):
                    lines.append(f"{x} (layer {la[1] if la else '?'} imports layer {lb[1] if lb else '?'})")
    return lines


def test_every_module_is_in_a_layer():
    missing = sorted({_top(m) for m in modules() if layer_of(_top(m)) is None})
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
    bad = upward(modules())
    assert not bad, "upward imports:\n  " + "\n  ".join(bad)


def test_no_forbidden_import():
    bad = forbidden(modules())
    assert not bad, "forbidden imports:\n  " + "\n  ".join(bad)


def test_every_function_level_import_says_why():
    bad = unexplained(modules())
    assert not bad, "function-level imports with no reason:\n  " + "\n  ".join(bad)


def test_no_cycle_between_top_level_modules():
    lines = cycles(modules())
    assert not lines, "import cycles between top-level modules:\n  " + "\n  ".join(lines)


def test_the_forbidden_sets_name_real_packages():
    """A typo in FORBIDDEN would rule out nothing: every name in it is a top-level package of a layer."""
    names = {m for _, mods, _ in LAYERS for m in mods}
    assert set(FORBIDDEN) <= names and set().union(*FORBIDDEN.values()) <= names
    assert {"builder", "sources", "lock", "install", "envspec"} <= FORBIDDEN["overlay"] == FORBIDDEN["platform"]
    assert {"builder", "sources"} <= FORBIDDEN["host"]


def test_the_reader_sees_function_level_and_relative_imports():
    """The graph is the whole graph: a function-level import counts (cli/fast_activate.py loads the host
    context inside a function), and so does an import inside a package's ``__init__``."""
    found = {(e.src, e.dst): e for e in edges(modules())}
    assert found[("deepep_env.cli.fast_activate", "deepep_env.host.context")].in_function
    assert found[("deepep_env.launch", "deepep_env.launch.k8s")].in_function
    assert not found[("deepep_env.lock", "deepep_env.lock.solve")].in_function


def test_the_checks_catch_an_upward_import_and_a_cycle():
    """The checks themselves: an invented upward edge and an invented loop are found."""
    assert layer_of("base") < layer_of("cli")  # type: ignore[operator]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def _plant(tmp_path: Path, files: dict[str, str]) -> Modules:
    """A fake ``deepep_env`` tree under ``tmp_path`` holding ``files`` (path → source)."""
    root = tmp_path / "deepep_env"
    for rel, text in {"__init__.py": "", **files}.items():
        f = root / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
        for d in f.relative_to(root).parents:
            (root / d / "__init__.py").touch()
    return modules(root)


def test_a_planted_overlay_to_builder_import_fails(tmp_path):
    """overlay is above builder, so only FORBIDDEN catches this one; at module level and in a
    function alike (a reason comment does not excuse it)."""
    mods = _plant(tmp_path, {
        "builder/plan.py": "X = 1\n",
        "overlay/rules.py": "from deepep_env.builder.plan import X\n",
        "overlay/activation.py": "def f():\n    from ..builder import plan  # lazy: slow\n    return plan\n",
        "host/context.py": "import deepep_env.sources.cache\n",
        "sources/cache.py": "",
        "platform/probes.py": "from deepep_env.base import errors\n",
        "base/errors.py": "",
    })
    assert upward(mods) == []
    assert forbidden(mods) == [
        "deepep_env.host.context -> deepep_env.sources.cache (host never imports sources: base/layers.py FORBIDDEN; "
        "deepep_env/host/context.py:1)",
        "deepep_env.overlay.activation -> deepep_env.builder.plan (overlay never imports builder: base/layers.py "
        "FORBIDDEN; deepep_env/overlay/activation.py:2)",
        "deepep_env.overlay.rules -> deepep_env.builder.plan (overlay never imports builder: base/layers.py "
        "FORBIDDEN; deepep_env/overlay/rules.py:1)",
    ]


def test_a_planted_unexplained_function_level_import_fails(tmp_path):
    mods = _plant(tmp_path, {
        "base/errors.py": "",
        "lock/solve.py": (
            "from deepep_env.base import errors\n"                              # module level: fine
            "def a():\n    from deepep_env.base import errors\n"                # no reason: fails
            "def b():\n    from deepep_env.base import errors  # lazy: a cycle with lock\n"
            "def c():\n    from deepep_env.base import (\n        errors,  # lazy: multi-line, reason inside\n    )\n"
            "def d():\n    from deepep_env.base import errors  # lazy:\n"      # a mark with no reason: fails
            "def e():\n    import json  # not ours\n"
            "def f():\n    g = lambda: __import__('x')\n    from . import solve  # local: the old form\n"),
        "cli/main.py": "def main():\n    from deepep_env.lock import solve\n",   # cli/ is exempt
    })
    assert sorted(int(line.split(" (")[1].split(":")[1]) for line in unexplained(mods)) == [3, 11, 16]
    assert all("deepep_env/lock/solve.py" in line for line in unexplained(mods))
    assert not forbidden(mods) and not upward(mods)


def test_the_architecture_page_shows_these_layers():
    """docs/architecture.md's table of layers is deepep_env/base/layers.py's, in order."""
    import re

    doc = (PKG.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| (\w+) \| (.*?) \| .* \|$", doc, re.M)
    want = [(name, sorted(m for m in mods if m)) for name, mods, _ in LAYERS]
    got = [(name, sorted(x.rstrip("/") for x in re.findall(r"`([\w/]+)`", cell))) for _, name, cell in rows]
    assert got == want
