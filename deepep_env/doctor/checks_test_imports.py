"""Family ``deepep``: every test task's script can import what it imports, in the env's interpreter.

Issue 51: after `install gcp-b200`, DeepEP's ``tests/utils.py`` stopped at ``import numpy``
(pip's closure of torch has no numpy, nor has the bare host venv) while doctor reported 0 errors.
The scripts the test tasks run (lock/pixi.py ``TEST_TASKS`` plus the engine's own, under
``<prefix>/share/deep-ep/tests``) are parsed with :mod:`ast`; the sibling modules they import
(``utils``, ``test_low_latency``) are followed, and every other top-level module is looked up with
``importlib.util.find_spec`` by the env's own interpreter, started with the effective environment
(the overlay's PYTHONPATH included). ``find_spec`` only locates: nothing is imported, so this runs on
a machine without a GPU. An import under ``try: … except ImportError`` is optional and not asked for.
"""
from __future__ import annotations

import ast
import json
import os
from typing import Optional

from deepep_env.base.run import run_child
from deepep_env.doctor.check import Emitter, check
from deepep_env.doctor.checks_deepep import engine_of, package_dir
from deepep_env.doctor.context import DoctorContext
from deepep_env.doctor.model import Evidence
from deepep_env.lock.pixi import TEST_TASKS

TESTS_SUBDIR = os.path.join("share", "deep-ep", "tests")
_TIMEOUT_S = 60
_PROBE = (
    "import importlib.util, json, sys\n"
    "out = {}\n"
    "for m in sys.argv[1:]:\n"
    "    try:\n"
    "        out[m] = importlib.util.find_spec(m) is not None\n"
    "    except Exception as e:\n"
    "        out[m] = False\n"
    "print(json.dumps(out))\n"
)


def _optional(handlers: list[ast.ExceptHandler]) -> bool:
    names = {n.id for h in handlers if h.type is not None for n in ast.walk(h.type) if isinstance(n, ast.Name)}
    return bool(names & {"ImportError", "ModuleNotFoundError", "Exception"}) or any(h.type is None for h in handlers)


def imported_modules(source: str) -> set[str]:
    """Top-level names of the absolute imports in ``source`` that are not optional (see module doc)."""
    tree = ast.parse(source)
    optional: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and _optional(node.handlers):
            optional |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in optional:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def task_scripts(ctx: DoctorContext) -> list[str]:
    """The scripts (relative to the tests folder) the env's test tasks run."""
    scripts = [s for s, _ in TEST_TASKS.values()]
    pkg = package_dir(ctx)
    if pkg is not None:
        scripts += [s for s, _ in engine_of(ctx, pkg).test_tasks.values()]
    return list(dict.fromkeys(scripts))


def script_imports(tests_dir: str, scripts: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """(top-level module → the scripts importing it, scripts unreadable), following sibling modules."""
    needed: dict[str, list[str]] = {}
    bad: list[str] = []
    todo, seen = list(scripts), set()
    while todo:
        rel = todo.pop(0)
        if rel in seen:
            continue
        seen.add(rel)
        path = os.path.join(tests_dir, rel)
        try:
            with open(path, encoding="utf-8") as f:
                mods = imported_modules(f.read())
        except (OSError, SyntaxError, ValueError):
            bad.append(rel)
            continue
        here = os.path.dirname(rel)
        for m in sorted(mods):
            sibling = os.path.join(here, m + ".py")
            if os.path.isfile(os.path.join(tests_dir, sibling)):
                todo.append(sibling)
            else:
                needed.setdefault(m, []).append(rel)
    return needed, bad


def env_interpreter(ctx: DoctorContext) -> Optional[str]:
    meta = ctx.meta
    if meta is None:
        return None
    exe = meta.python_executable if meta.python_provider != "conda" else None
    exe = exe or os.path.join(meta.prefix, "bin", "python")
    return exe if os.path.isfile(exe) and os.access(exe, os.X_OK) else None


def find_specs(exe: str, modules: list[str], env: dict[str, str]) -> Optional[dict[str, bool]]:
    r = run_child([exe, "-c", _PROBE, *modules], timeout=_TIMEOUT_S, env=env)
    try:
        out = json.loads(r.stdout.strip().splitlines()[-1]) if r.ok and r.stdout.strip() else None
    except ValueError:
        return None
    return out if isinstance(out, dict) else None


@check("deepep", "deepep.test-import-missing", "deepep.test-import-unchecked")
def test_imports_resolve(ctx: DoctorContext, emit: Emitter) -> None:
    """Every module the env's test tasks import (numpy, torch, deep_ep, …) is found by the env's interpreter."""
    exe = env_interpreter(ctx)
    tests_dir = os.path.join(ctx.meta.prefix, TESTS_SUBDIR) if ctx.meta is not None else ""
    if exe is None or not os.path.isdir(tests_dir):
        return
    needed, bad = script_imports(tests_dir, task_scripts(ctx))
    found = find_specs(exe, sorted(needed), dict(ctx.env.values)) if needed else {}
    if found is None or bad:
        emit("deepep.test-import-unchecked", "warning",
             f"could not check the test scripts' imports with {exe}",
             [Evidence(value="unreadable: " + ", ".join(bad) if bad else "the interpreter's find_spec run failed", file=tests_dir)],
             f"run `{exe} -c 'import numpy, torch'` in `deepep-env run {ctx.env_name or 'ENV'}` and read its error")
    missing = sorted(m for m, ok in (found or {}).items() if not ok)
    if missing:
        emit("deepep.test-import-missing", "error",
             f"the env's interpreter cannot import {', '.join(missing)}: its test tasks stop with ModuleNotFoundError",
             [Evidence(value=f"{m}: imported by {', '.join(needed[m])}; find_spec → None", file=tests_dir) for m in missing]
             + [Evidence(value=exe, file="the env's interpreter"), ctx.env.evidence("PYTHONPATH")],
             f"add {', '.join(missing)} to the env's packages (its spec's dependencies) and reinstall it "
             f"(`deepep-env install {ctx.env_name or 'ENV'}`)")
