"""The host overlay as conda activation: what the ``deepep-env`` package's
``etc/conda/activate.d/deepep-env-overlay.{sh,fish}`` evaluate (``deepep-env hook``).

conda, pixi (``pixi run``/``pixi shell``), rattler's activation and ``deepep-env activate`` all
source a prefix's ``activate.d`` scripts after setting ``CONDA_PREFIX``; the script runs this
hook, which computes the same overlay as ``deepep-env overlay --prefix $CONDA_PREFIX`` (the same
function: :func:`deepep_env.host.context.overlay_context`) and prints it for the shell, each change
with its rule and host fact as a comment. It also stores, in ``_DEEPEP_ENV_UNDO``, the code that
puts every variable it changed back as it was; ``deactivate.d`` evaluates it.

What the prefix itself says: a ``deepep-env install`` marker (``conda-meta/deepep-env``)
gives the spec's ``[env]`` and Python; a prefix pixi installed has none, so a prefix whose Python
is the host's (no ``bin/python``, a ``lib/python3.X/site-packages``) is recognised from its files.
Such a prefix gets ``DEEPEP_ENV_PYTHON``, the interpreter pixi.toml's tasks run (the marker's, else
``python3``): the committed manifest names no host path.

Never fails an activation: on a host with no GPU the overlay is empty (silent); any error is one
line on stderr and no change. Stdlib-only, like everything on the activate path.
"""
from __future__ import annotations

import glob
import os
from typing import Mapping, Optional

from deepep_env.host.context import overlay_context, read_host
from deepep_env.base.errors import UserError
from deepep_env.overlay.activation import PYTHON_VAR, spec_python
from deepep_env.overlay.changes import Change, Overlay, PrependPath, Set
from deepep_env.formats.prefix import PrefixMeta
from deepep_env.overlay.render import fish_quote, sh_quote

UNDO_VAR = "_DEEPEP_ENV_UNDO"
SHELLS = ("sh", "bash", "zsh", "fish", "json")   # json: the overlay as data (what a test record keeps)
# Test and operator overrides: read the host under another root (a captured tree), force a
# platform profile, or skip the overlay altogether.
ROOT_VAR = "DEEPEP_ENV_HOST_ROOT"
PLATFORM_VAR = "DEEPEP_ENV_PLATFORM"
OFF_VAR = "DEEPEP_ENV_NO_OVERLAY"


def host_python_site(prefix: str) -> Optional[str]:
    """The prefix's site-packages when its Python is the host's (no interpreter in the prefix)."""
    if any(os.path.exists(os.path.join(prefix, "bin", n)) for n in ("python", "python3")):
        return None
    sites = sorted(glob.glob(os.path.join(prefix, "lib", "python3.*", "site-packages")))
    return sites[-1] if sites else None


def _host_python(prefix: str, meta: Optional[PrefixMeta], ov: Overlay) -> tuple[Change, ...]:
    """What a prefix whose Python is the host's needs: ``DEEPEP_ENV_PYTHON`` (the marker's
    interpreter; a prefix pixi installed has no marker: ``python3`` from PATH, as the tool's own
    launcher falls back) and its site-packages on ``PYTHONPATH``."""
    site = host_python_site(prefix)
    py = spec_python(meta)
    if py is None and site is not None:
        py = Set(PYTHON_VAR, "python3", "host-python",
                 f"{prefix} has no python and no deepep-env marker naming the spec's: python3 from PATH")
    out: list[Change] = [py] if py is not None else []
    if site is not None and not any(getattr(c, "name", "") == "PYTHONPATH" for c in ov.changes):
        out.append(PrependPath("PYTHONPATH", (site,), "host-python",
                               f"{prefix} has no python of its own: the host interpreter does not search its site-packages"))
    return tuple(out)


def hook_overlay(prefix: str, environ: Mapping[str, str]) -> Overlay:
    """The overlay activation applies to ``prefix`` on this host (or under ``$DEEPEP_ENV_HOST_ROOT``)."""
    host = read_host(environ.get(ROOT_VAR) or "/", environ.get(PLATFORM_VAR) or None, environ)
    ctx = overlay_context(host, prefix)
    ov = ctx.overlay
    return Overlay(ov.platform, _host_python(prefix, ctx.meta, ov) + ov.changes, ov.notes)


def _sh(name: str, value: Optional[str]) -> str:
    return f"unset {name}" if value is None else f"export {name}={sh_quote(value)}"


def _fish(name: str, value: Optional[str]) -> str:
    return f"set -e {name}" if value is None else f"set -gx {name} {fish_quote(value)}"


def hook_script(ov: Overlay, shell: str, environ: Mapping[str, str]) -> str:
    """Shell code that applies ``ov`` to ``environ`` and records how to undo it in ``_DEEPEP_ENV_UNDO``;
    for ``json``, the overlay's changes as data (``deepep-env task``/``record`` keep them in the record)."""
    if shell == "json":
        import json

        return json.dumps(ov.to_dict(), sort_keys=True) + "\n"
    put = _fish if shell == "fish" else _sh
    after = ov.apply(environ)
    names = [c.name for c in ov.changes if hasattr(c, "name")]
    changed = [n for n in dict.fromkeys(names) if after.get(n) != environ.get(n)]
    if not changed:
        return ""   # a host with nothing to set (no GPU): activation stays silent
    lines = [f"# deepep-env overlay for platform {ov.platform} ({len(changed)} variables)"]
    for c in ov.changes:
        if getattr(c, "name", None) in changed:
            lines.append(" ".join(f"# {c.name}: {c.rule}: {c.fact}".split()))
    for n in ov.notes:
        lines.append(" ".join(f"# note [{n.level}] {n.rule}: {n.message}".split()))
    lines += [put(n, after.get(n)) for n in changed]
    undo = "; ".join(put(n, environ.get(n)) for n in changed)
    if undo:
        lines.append(put(UNDO_VAR, undo + "; " + put(UNDO_VAR, None)))
    return "\n".join(lines) + "\n"


def run_hook(shell: str, prefix: Optional[str], environ: Mapping[str, str]) -> tuple[str, list[str]]:
    """(script, warnings) for ``deepep-env hook``: an error becomes the one warning and an empty
    script. The overlay's warning notes are the warnings (as ``deepep-env activate`` prints them); its
    other notes stay comments in the script: an activation prints nothing on a healthy host."""
    if shell not in SHELLS:
        raise UserError(f"unknown shell {shell!r}", field="--shell", accepted=", ".join(SHELLS))
    prefix = prefix or environ.get("CONDA_PREFIX")
    if environ.get(OFF_VAR) or not prefix:
        return "", []
    try:
        ov = hook_overlay(os.path.abspath(prefix), environ)
        script = hook_script(ov, shell, environ)
        # what the overlay could not do right is said at activation, as `activate` says it (issue 39.11: an
        # RDMA device that cannot be named was only a comment in the script); a host with nothing to set, silent
        return script, [n.message for n in ov.warnings()] if script else []
    except UserError as err:
        return "", [f"host overlay not applied: {err}"]
    except OSError as err:
        return "", [f"host overlay not applied: {err}"]


__all__ = ["UNDO_VAR", "hook_overlay", "hook_script", "run_hook"]
