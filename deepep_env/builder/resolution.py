"""The exact build and host environments of a build, resolved before it runs, as data in its id.

A recipe asks for ``pytorch ==2.11.0 cuda130*`` or ``gcc_linux-64 13.*``; which packages the solver
picks depends on the channel on the day (and on the machine that repacked it). So before a node that
reads packages from outside the graph is built, rattler-build itself resolves its build and host
environments (``render_only`` + ``with_solve``: its own solver, run exports included), and every
package it picked from outside the graph enters the pre-image as ``resolved`` — name, version, build
and sha256 (docs/build-id.md §2). Two machines that solve differently get two ids, never two byte
strings under one. After the build, the package's own record of what was installed
(``info/recipe/rendered_recipe.yaml``, ``finalized_dependencies``) must be the same resolution.

Packages of the graph itself enter by id (``dependencies``) and are left out here.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from deepep_env.base.errors import SolveError, UserError

Resolution = dict[str, list[str]]          # "build"/"host" -> ["name version build sha256:<hex>", …]


def _entry(rec: Mapping[str, Any]) -> str:
    return f"{rec.get('name')} {rec.get('version')} {rec.get('build')} sha256:{rec.get('sha256')}"


def from_rendered(rendered: Mapping[str, Any], graph_names: Iterable[str]) -> Resolution:
    """The resolution a rendered recipe (rattler-build's JSON/YAML) records, outside ``graph_names``."""
    inside = set(graph_names)
    fin = rendered.get("finalized_dependencies") or {}
    out: Resolution = {}
    for env in ("build", "host"):
        recs = ((fin.get(env) or {}).get("resolved") or []) if isinstance(fin, Mapping) else []
        picked = sorted(_entry(r) for r in recs if isinstance(r, Mapping) and r.get("name") not in inside)
        if picked:
            out[env] = picked
    return out


def rendered_recipe(conda: Path) -> dict[str, Any]:
    """``info/recipe/rendered_recipe.yaml`` of a built ``.conda`` ({} when it has none)."""
    import io
    import tarfile
    import zipfile

    import yaml
    import zstandard

    with zipfile.ZipFile(conda) as z:
        name = next((n for n in z.namelist() if n.startswith("info-") and n.endswith(".tar.zst")), None)
        if name is None:
            return {}
        data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(z.read(name))).read()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as t:
        try:
            f = t.extractfile("info/recipe/rendered_recipe.yaml")
        except KeyError:
            return {}
        doc = yaml.safe_load(f.read()) if f is not None else {}
    return doc if isinstance(doc, dict) else {}


def _captured_stdout(fn: Callable[[], object]) -> str:
    """What ``fn`` (rattler-build, in this process) writes to file descriptor 1."""
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 1)
        try:
            fn()
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
        tmp.seek(0)
        return tmp.read().decode("utf-8", "replace")


def resolve(recipe_file: Path, context: Mapping[str, Any], *, package: str, channels: Sequence[str],
            graph_names: Iterable[str], work: Path) -> Resolution:
    """rattler-build's resolution of ``recipe_file``'s build and host environments, before building.
    Call under the build's declared virtual packages and private package cache (driver.run's)."""
    from rattler_build.cli_api import build_recipes

    overrides = {k: [str(v)] for k, v in context.items() if v is not None}

    def run() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            build_recipes([str(recipe_file)], channel=list(channels), render_only=True, with_solve=True,
                          variant_overrides=overrides, output_dir=str(work), no_build_id=True)

    try:
        text = _captured_stdout(run)
    except Exception as exc:  # noqa: BLE001 - rattler-build raises one error type for everything
        first = (str(exc).splitlines() or [""])[0][:300]
        kind = SolveError if "Failed to resolve" in str(exc) else UserError
        raise kind(f"package {package}: build failed: {first}") from None
    start = text.find("[")
    try:
        rendered = json.loads(text[start:]) if start >= 0 else []
    except ValueError:
        raise UserError(f"package {package}: rattler-build's resolution could not be read", file=recipe_file) from None
    out: Resolution = {}
    for r in rendered if isinstance(rendered, list) else []:
        for env, picked in from_rendered(r, graph_names).items():
            out[env] = sorted(set(out.get(env, [])) | set(picked))
    return out


def differences(expected: Resolution, actual: Resolution) -> list[str]:
    """Human lines: what one resolution has that the other has not, by package name."""
    out = []
    for env in ("build", "host"):
        a = {e.split()[0]: e for e in expected.get(env, [])}
        b = {e.split()[0]: e for e in actual.get(env, [])}
        for name in sorted(set(a) | set(b)):
            if a.get(name) != b.get(name):
                out.append(f"{env} {name}: {_short(a.get(name))} vs {_short(b.get(name))}")
    return out


def _short(e: Optional[str]) -> str:
    if not e:
        return "(absent)"
    n, v, b, sha = e.split()
    return f"{v} {b} {sha[7:19]}…"


__all__ = ["Resolution", "resolve", "from_rendered", "differences", "rendered_recipe"]
