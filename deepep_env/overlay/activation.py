"""Activating a prefix: its conda-style changes, its activate.d scripts, and exec'ing a command.

`activate`/`run` build their context (host, marker, combined overlay) in
:func:`deepep_env.host.context.activation_context`; this module is the mechanics it uses.

Activation = conda-style prefix activation (CONDA_PREFIX, PATH, the prefix's
``etc/conda/activate.d`` scripts; PYTHONPATH when the env uses the host's Python, whose
interpreter does not know the prefix) followed by the host overlay (platform rules and the env
spec's ``[env]``). It runs on every new shell, so this module and everything it imports is
stdlib-only (the activation benchmark, docs/benchmarks.md).
"""
from __future__ import annotations

import os
from typing import Mapping, Optional, Sequence

from deepep_env.base.errors import UserError
from deepep_env.overlay.changes import Change, Note, Overlay, PrependPath, Set, Source
from deepep_env.formats.prefix import META_RELPATH, PrefixMeta


PYTHON_VAR = "DEEPEP_ENV_PYTHON"


def spec_python(meta: Optional[PrefixMeta]) -> Optional[Set]:
    """``DEEPEP_ENV_PYTHON``: the spec's interpreter when it is the host's, as the prefix's marker
    records it. pixi.toml's tasks run ``"$DEEPEP_ENV_PYTHON"`` for such environments, so the
    committed manifest names no path of one machine; the activation resolves it here."""
    if meta is None or meta.python_provider != "host" or not meta.python_executable:
        return None
    fact = f"{os.path.join(meta.prefix, META_RELPATH)}: python.executable"
    return Set(PYTHON_VAR, meta.python_executable, "host-python", fact)


def prefix_changes(meta: PrefixMeta, shell_scripts: bool = True) -> tuple[list[Change], list[Note]]:
    """CONDA_PREFIX, PATH, DEEPEP_ENV_PYTHON and PYTHONPATH (host python) and the activate.d scripts
    of ``meta.prefix``."""
    p = meta.prefix
    fact = f"{os.path.join(p, META_RELPATH)}: env {meta.env}"
    changes: list[Change] = [
        Set("CONDA_PREFIX", p, "prefix", fact),
        Set("CONDA_DEFAULT_ENV", meta.env, "prefix", fact),
        PrependPath("PATH", (os.path.join(p, "bin"),), "prefix", fact),
    ]
    notes: list[Note] = []
    py = spec_python(meta)
    if py is not None:
        changes.append(py)
    if meta.python_provider == "host":
        sp = meta.site_packages()
        if sp and os.path.isdir(sp):
            changes.append(
                PrependPath("PYTHONPATH", (sp,), "host-python", f"python.provider = host ({meta.python_version}): the host interpreter does not search the prefix")
            )
        else:
            notes.append(Note("host-python", fact, f"host python but no {sp or 'lib/python3.X/site-packages (python.version unknown)'}: PYTHONPATH not set", "warning"))
    if shell_scripts:
        d = os.path.join(p, "etc", "conda", "activate.d")
        try:
            names = sorted(os.listdir(d))
        except OSError:
            names = []
        for name in names:
            path = os.path.join(d, name)
            if name.endswith(".sh"):
                changes.append(Source(path, "sh", "conda-activate.d", "conda activation script of a package in the prefix"))
            elif name.endswith(".fish"):
                changes.append(Source(path, "fish", "conda-activate.d", "conda activation script of a package in the prefix"))
    return changes, notes


def _source_scripts(scripts: Sequence[str], env: dict[str, str]) -> dict[str, str]:
    """Source sh scripts in bash with ``env`` and return the environment they leave behind."""
    import subprocess  # only `run` with activation scripts needs it; keep it off activate's path

    prog = 'for f in "$@"; do . "$f" >&2 || exit $?; done; exec env -0'
    try:
        res = subprocess.run(["bash", "-c", prog, "deepep-env-activate", *scripts], env=env, capture_output=True, check=False)
    except OSError as exc:
        raise UserError(f"cannot run bash to source the prefix's activation scripts: {exc}", field="activate.d") from None
    if res.returncode != 0:
        err = res.stderr.decode(errors="replace").strip().splitlines()
        raise UserError(
            f"an activation script failed (exit {res.returncode}): {err[-1] if err else ''}",
            file=os.path.dirname(scripts[0]),
        )
    out: dict[str, str] = {}
    for item in res.stdout.split(b"\0"):
        if b"=" in item:
            k, _, v = item.partition(b"=")
            out[k.decode(errors="surrogateescape")] = v.decode(errors="surrogateescape")
    return out


def source_activation_scripts(prefix: str, environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` after the prefix's ``etc/conda/activate.d/*.sh`` scripts ran (in bash, in name
    order, as conda and pixi run them); unchanged when there are none."""
    d = os.path.join(prefix, "etc", "conda", "activate.d")
    try:
        scripts = [os.path.join(d, n) for n in sorted(os.listdir(d)) if n.endswith(".sh")]
    except OSError:
        scripts = []
    return _source_scripts(scripts, dict(environ)) if scripts else dict(environ)


def run_environment(overlay: Overlay, environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with the overlay applied, activate.d ``*.sh`` scripts sourced (in bash) in order."""
    env = dict(environ)
    pending: list[str] = []
    for c in overlay.changes:
        if isinstance(c, Source):
            if c.shell == "sh":
                pending.append(c.path)
            continue
        if pending:
            env = _source_scripts(pending, env)
            pending = []
        c.apply(env)
    if pending:
        env = _source_scripts(pending, env)
    return env


def exec_in_env(cmd: Sequence[str], env: Mapping[str, str]) -> None:
    """Replace this process with ``cmd`` (PATH looked up in ``env``). Does not return."""
    if not cmd:
        raise UserError("no command given", field="CMD", accepted="deepep-env run ENV -- CMD [ARGS…]")
    try:
        os.execvpe(cmd[0], list(cmd), dict(env))
    except FileNotFoundError:
        raise UserError(f"command not found: {cmd[0]}", field="CMD", exit_code=127) from None
    except PermissionError:
        raise UserError(f"command not executable: {cmd[0]}", field="CMD", exit_code=126) from None
