"""The activation a test ran under, as data for its record (issue 50, record v2).

A record binds to the lock section's digest, which holds the environment's ``deepep-env`` package: the
activation's own code (builder/toolpkg.py). What that code computed on the host — every variable it
set, prepended or unset, with the rule behind it — is kept in the record too, so a reader sees what the
test ran under, not only which code could have made it. It is asked of the environment's own package
(``share/deepep-env/hook.py --shell json``), with the caller's environment as the activate.d script saw
it, never of this tool's copy of the rules: a newer tool does not rewrite what an older activation did.

Values name the prefix as ``$CONDA_PREFIX``, so records from two machines (two prefixes) compare; the
digest is the sha256 of the canonical JSON of the variables. No value of the caller's own environment
is kept: only what the activation itself set.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Mapping, Optional

from deepep_env.base.readfile import parse_json

HOOK_RELPATH = Path("share") / "deepep-env" / "hook.py"
PREFIX_TOKEN = "$CONDA_PREFIX"
HOOK_TIMEOUT_S = 60
MAX_HOOK_BYTES = 1 << 20
_OPS = {"set", "unset", "prepend"}


def hook_python(prefix: str, environ: Mapping[str, str]) -> Optional[str]:
    """The interpreter the package's activate.d script runs the hook with (recipes/deepep-env/activate.sh)."""
    if environ.get("DEEPEP_ENV_PYTHON"):
        return environ["DEEPEP_ENV_PYTHON"]
    for name in ("python3", "python"):
        c = os.path.join(prefix, "bin", name)
        if os.access(c, os.X_OK):
            return c
    return shutil.which("python3", path=environ.get("PATH"))


def _unprefixed(value: Optional[str], prefix: str) -> Optional[str]:
    return None if value is None else value.replace(prefix.rstrip("/"), PREFIX_TOKEN)


def variables(doc: Any, prefix: str) -> list[dict[str, Any]]:
    """The overlay document's variable changes, each ``{name, op, value, rule}`` (``value`` None for an
    unset; a prepend's value is what it prepends), the prefix written as ``$CONDA_PREFIX``."""
    out = []
    for c in (doc.get("changes") if isinstance(doc, dict) else None) or []:
        if not isinstance(c, dict) or c.get("op") not in _OPS or not isinstance(c.get("name"), str):
            continue
        value = os.pathsep.join(c.get("entries") or []) if c["op"] == "prepend" else c.get("value")
        out.append({"name": c["name"], "op": c["op"], "value": _unprefixed(value if isinstance(value, str) else None, prefix),
                    "rule": str(c.get("rule") or "")})
    return out


def digest_of(variables_: list[dict[str, Any]]) -> str:
    text = json.dumps(variables_, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def package_of(prefix: str) -> Optional[str]:
    """The ``deepep-env`` package the prefix holds (``conda-meta``'s record name), or None."""
    d = Path(prefix) / "conda-meta"
    try:
        names = sorted(p.name for p in d.iterdir() if p.name.startswith("deepep-env-") and p.suffix == ".json")
    except OSError:
        return None
    return names[0][:-len(".json")] if names else None


def activation_of(prefix: str, environ: Mapping[str, str]) -> dict[str, Any]:
    """The activation the prefix's own package computes here: ``{package, variables, digest}``, or
    ``{package, variables: None, why}`` where it cannot be asked (no hook: a prefix from before the
    activation package; the hook failed)."""
    prefix = os.path.abspath(prefix)
    pkg = package_of(prefix)
    hook = os.path.join(prefix, HOOK_RELPATH)
    py = hook_python(prefix, environ)
    if not os.path.isfile(hook) or py is None:
        why = f"no {HOOK_RELPATH} in the prefix" if not os.path.isfile(hook) else "no python3 to run the hook"
        return {"package": pkg, "variables": None, "digest": None, "why": why}
    env = {k: v for k, v in environ.items() if k != "DEEPEP_ENV_NO_OVERLAY"}
    try:
        res = subprocess.run([py, hook, "--shell", "json", "--prefix", prefix], env=env, capture_output=True,
                             timeout=HOOK_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"package": pkg, "variables": None, "digest": None, "why": f"the hook did not run: {type(exc).__name__}"}
    if res.returncode != 0 or len(res.stdout) > MAX_HOOK_BYTES or not res.stdout.strip():
        return {"package": pkg, "variables": None, "digest": None, "why": f"the hook gave no overlay (exit {res.returncode})"}
    try:
        doc = parse_json(res.stdout.decode("utf-8", "replace"), hook, accepted="the overlay as JSON")
    except Exception as exc:  # noqa: BLE001 - whatever the hook printed, the record says so in one line
        return {"package": pkg, "variables": None, "digest": None, "why": f"the hook's output is not JSON: {type(exc).__name__}"}
    got = variables(doc, prefix)
    return {"package": pkg, "platform": doc.get("platform") if isinstance(doc, dict) else None,
            "variables": got, "digest": digest_of(got)}


def activation_for(prefix: Optional[str], environ: Mapping[str, str], *, root: Optional[str] = None,
                   platform: Optional[str] = None) -> Optional[dict[str, Any]]:
    """:func:`activation_of` with the host under ``root`` and the ``platform`` a record names (as the
    hook reads them: ``DEEPEP_ENV_HOST_ROOT``, ``DEEPEP_ENV_PLATFORM``); None without an installed prefix."""
    if not prefix or not os.path.isdir(os.path.join(prefix, "conda-meta")):
        return None
    env = dict(environ)
    env["CONDA_PREFIX"] = os.path.abspath(prefix)
    if root and root != "/":
        env["DEEPEP_ENV_HOST_ROOT"] = root
    if platform:
        env["DEEPEP_ENV_PLATFORM"] = platform
    return activation_of(prefix, env)


def check_activation(v: Any) -> bool:
    """A record's ``activation`` field: None, or the object :func:`activation_of` writes."""
    if v is None:
        return True
    if not isinstance(v, dict):
        return False
    vars_ = v.get("variables")
    if vars_ is None:
        return isinstance(v.get("why"), (str, type(None)))
    return isinstance(vars_, list) and len(vars_) <= 4096 and all(
        isinstance(x, dict) and isinstance(x.get("name"), str) and x.get("op") in _OPS
        and isinstance(x.get("value"), (str, type(None))) and isinstance(x.get("rule"), str) for x in vars_
    ) and isinstance(v.get("digest"), str) and v["digest"] == digest_of(vars_)


__all__ = ["activation_for", "activation_of", "check_activation", "digest_of", "package_of", "variables"]
