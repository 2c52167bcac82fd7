"""The activation package holds exactly what activation runs (issue 50 item 2): the import closure of
the conda hook and of ``activate``'s fast path — module-level, function-level (lazy) and
``TYPE_CHECKING`` imports alike — is :data:`deepep_env.base.layers.ACTIVATION`, no more and no less.

A module that joins the closure (an overlay rule importing the spec, say) fails here: either it
belongs in the activation (add it to the set, and every environment's activation package, and with it
every GPU record, moves with it), or the import is moved out of the activation path (a tool-side step
raises, the CLI words it: install/prefixes.py). The checks are functions of a module set, run over
planted trees too, so each one is seen failing.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from deepep_env.base.layers import ACTIVATION, ACTIVATION_ENTRIES
from tests.base.test_layers import PKG, edges, modules


def _parents(mod: str, mods: set[str]) -> set[str]:
    """The packages importing ``mod`` runs first (their ``__init__``)."""
    parts = mod.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in mods}


def closure(pkg: Path, entries: tuple[str, ...]) -> set[str]:
    mods = modules(pkg)
    graph: dict[str, set[str]] = {}
    for e in edges(mods):
        graph.setdefault(e.src, set()).add(e.dst)
    seen: set[str] = set()
    todo = list(entries)
    while todo:
        m = todo.pop()
        if m in seen or m not in mods:
            continue
        seen.add(m)
        todo.extend(graph.get(m, ()))
        todo.extend(_parents(m, set(mods)))
    return seen


def test_the_activation_closure_is_the_declared_set():
    got = closure(PKG, ACTIVATION_ENTRIES)
    extra = sorted(got - ACTIVATION)
    unused = sorted(ACTIVATION - got)
    assert not extra, (f"the activation path imports modules outside base/layers.py ACTIVATION: {extra} "
                       "(move the import off the activation path, or add the module: it then ships in every env)")
    assert not unused, f"base/layers.py ACTIVATION lists modules the activation never imports: {unused}"


def test_a_lazy_import_of_the_lock_is_caught(tmp_path: Path):
    """A planted function-level import of ``lock`` in the hook joins the closure."""
    pkg = tmp_path / "deepep_env"
    for d in ("cli", "lock"):
        (pkg / d).mkdir(parents=True)
        (pkg / d / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "cli" / "hook.py").write_text("def f():\n    from deepep_env.lock.workspace import workspace  # lazy: x\n")
    (pkg / "lock" / "workspace.py").write_text("workspace = 1\n")
    assert "deepep_env.lock.workspace" in closure(pkg, ("deepep_env.cli.hook",))


@pytest.mark.parametrize("mod", sorted(ACTIVATION))
def test_every_activation_module_is_stdlib_only(mod: str):
    """No third-party import at the top of an activation module (it runs on every new shell, in any
    interpreter). Functions the activation never calls may import more (safetext's rich escape for the
    tool's tables, tomli on Python 3.10)."""
    import ast
    import sys

    path, _ = modules(PKG)[mod]
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        for n in names:
            top = n.split(".")[0]
            assert top in ("deepep_env", "__future__") or top in sys.stdlib_module_names, f"{mod} imports {n}"
