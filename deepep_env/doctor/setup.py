"""Build the :class:`DoctorContext` a doctor run checks: the env (spec, prefix, install marker), its
overlay over the host, and the environment a process of the env would see.

The same pipeline as every other command (:mod:`deepep_env.host.context`: one host reading, the
marker, the overlay rules, the prefix's activation), with one difference: doctor never stops at a
broken env. A missing or unusable marker, a platform the env does not target and an overlay that
cannot be built become *setup findings* (family ``env``); the checks still run on what is known.
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence

from deepep_env.doctor.context import DoctorContext, EnvView, PathView, effective_environment, site_dirs_of_python
from deepep_env.doctor.model import Evidence, Finding, one_line
from deepep_env.host.context import HostContext, host_overlay, platform_mismatch, with_prefix_activation
from deepep_env.install.prefixes import prefix_meta
from deepep_env.base.errors import UnknownEnvError, UserError
from deepep_env.overlay.activation import run_environment
from deepep_env.overlay.changes import Overlay, Source
from deepep_env.formats.prefix import (META_RELPATH, PREFIX_ENV_VAR, PrefixMeta, check_env_name, default_prefix, has_marker,
                                       is_conda_prefix, read_prefix_meta)
from deepep_env.overlay.rules import default_site_dirs
from deepep_env.base.project import Project
from deepep_env.base.project import find_project as locate_project
from deepep_env.lock.next_step import next_step
from deepep_env.lock.workspace import Workspace, workspace

# A system interpreter's root is the host's own /usr: reading it "on this machine" under --root
# would check this machine's /usr/local/nvidia, /usr/local/gib, /usr/lib… instead of the tree's
# (false alarms and missed seed-002 conflicts when a host-python env is checked against a tree).
SYSTEM_PYTHON_ROOTS = ("/", "/usr", "/usr/local")
# The findings building the context may report (family "env"; docs/doctor.md).
SETUP_IDS = ("env.not-installed", "env.platform-mismatch", "env.overlay-error")


def setup_finding(id: str, severity: str, title: str, evidence: Sequence[Evidence], fix: str) -> Finding:
    return Finding(id=id, severity=severity, title=title, evidence=tuple(evidence), fix=fix, check="env")


def find_project(project: Any) -> Optional[Project]:
    if isinstance(project, Project):
        return project
    try:
        return locate_project(project)
    except UserError:
        if project:
            raise
        return None


def resolve_prefix(env: Optional[str], prefix: Optional[str], project: Any, environ: Mapping[str, str], cwd: str) -> Optional[str]:
    """--prefix; else $DEEPEP_ENV_PREFIX; else the project's ``.pixi/envs/ENV`` (one owner of the
    rule: :func:`deepep_env.formats.prefix.default_prefix`)."""
    if prefix:
        return os.path.abspath(os.fspath(prefix))
    if not env:
        return None
    check_env_name(env)
    if environ.get(PREFIX_ENV_VAR):
        return os.path.abspath(environ[PREFIX_ENV_VAR])
    if project is not None:
        return str(project.prefix_for(env))
    return str(default_prefix(env, cwd, environ))


def load_spec(env: Optional[str], proj: Any, prefix_given: bool, notes: list[str], ws: Optional[Workspace] = None) -> Any:
    """The resolved spec of ``env``, or None with a note. An unknown ENV with no --prefix is bad input."""
    if not env:
        return None
    if proj is None:
        notes.append("no deepep-env project found (no env_specs/ above the current directory): spec checks skipped")
        return None
    try:
        return workspace(proj, ws).resolved(env)
    except UserError as err:
        if isinstance(err, UnknownEnvError) and not prefix_given:
            raise
        notes.append(f"env spec not used: {err}")
        return None


def read_marker(env: Optional[str], pfx: str, findings: list[Finding], ws: Optional[Workspace] = None) -> Optional[PrefixMeta]:
    """The prefix's install marker, or None with an ``env.not-installed`` finding."""
    marker = os.path.join(pfx, META_RELPATH)
    if env and not has_marker(pfx) and is_conda_prefix(pfx):
        try:   # a prefix pixi installed from the lock: the spec says what our marker would
            return prefix_meta(env, pfx, ws=ws)
        except UserError as err:
            findings.append(setup_finding("env.not-installed", "error", f"the prefix has no deepep-env marker and "
                                          f"the spec cannot stand in for it: {one_line(err.message)}",
                                          [Evidence(value="absent", file=marker)], f"`deepep-env install {env}`"))
            return None
    if not has_marker(pfx):
        findings.append(setup_finding(
            "env.not-installed", "error", f"env {env or '?'} is not installed at {pfx} (no {META_RELPATH})",
            [Evidence(value="absent", file=marker)], _install_fix(env, ws)))
        return None
    try:
        return read_prefix_meta(pfx, env)
    except UserError as err:
        findings.append(setup_finding(
            "env.not-installed", "error", f"the install marker is not usable: {err}",
            [Evidence(value=one_line(err.message), file=marker)], f"reinstall: `deepep-env install {env or 'ENV'}`"))
        return None


def _install_fix(env: Optional[str], ws: Optional[Workspace]) -> str:
    """How to get ``env`` installed from this checkout: install when it is locked, else the step before
    (lock.next_step), so doctor never suggests an install the lock would refuse."""
    where = ", or pass --prefix where it is installed"
    if not env or ws is None:
        return f"`deepep-env install {env or 'ENV'}`{where}"
    step = next_step(ws.project, env, ws)
    if step.state == "locked":   # install, after the spec's [host] prepare where the host externals are missing
        return f"`{step.command}`{where}"
    return f"{env} is {step.why}: `{step.command}`{step.note()}, {step.then_install(env)}{where}"


def mismatch_finding(host: HostContext, env_name: Optional[str], spec: Any, meta: Optional[PrefixMeta],
                     pfx: Optional[str]) -> Optional[Finding]:
    targets = list(getattr(spec, "platforms", []) or (meta.platforms if meta else []))
    title = platform_mismatch(host.platform, targets, str(env_name))
    if title is None:
        return None
    where = f"env_specs/{env_name}.toml" if spec else os.path.join(pfx or "", META_RELPATH)
    return setup_finding(
        "env.platform-mismatch", "warning", title,
        [Evidence(value="; ".join(host.platform.evidence), file="platform"), Evidence(value=f"platforms = {targets}", file=where)],
        "use the env built for this platform, or pass --platform if detection is wrong")


def local_python_root(exe: Optional[str]) -> Optional[str]:
    """The env's own Python install (a venv), read on this machine; None for a system python."""
    if not exe or not os.path.isabs(exe) or not os.path.exists(exe):
        return None
    base = os.path.normpath(os.path.dirname(os.path.dirname(exe)))
    return None if base in SYSTEM_PYTHON_ROOTS else base


def overlay_site_dirs(host: HostContext, meta: PrefixMeta, cwd: str) -> list[str]:
    """The site dirs the overlay's nvshmem-preload rule searches, as `deepep-env run` would on the
    machine that holds the prefix. Under --root the overlay alone looks only inside the tree, but
    doctor reads the env's Python (a pip-torch venv) on this machine: without it here, pip's
    nvidia-nvshmem would be seen by the nvshmem check and not by the overlay, and doctor would
    call an error what `deepep-env run` already fixes with LD_PRELOAD (field notes §3)."""
    dirs = default_site_dirs(host.root, meta.prefix, meta.python_executable, host.environ)
    py_root = local_python_root(meta.python_executable)
    if not host.live and py_root:
        view = PathView(host.fs, host.live, [py_root], cwd)
        for sp in site_dirs_of_python(view, meta.python_executable):
            local = view.open_local(sp)
            if local and os.path.isdir(local) and local not in dirs:
                dirs.append(local)
    return dirs


def build_env_overlay(host: HostContext, env: Optional[str], spec: Any, meta: Optional[PrefixMeta], cwd: str,
                      findings: list[Finding], notes: list[str]) -> tuple[Optional[Overlay], bool]:
    """(overlay, applied): the env's activation overlay when installed, the spec's host overlay
    when only ENV is known (both *applied*: the checked environment includes them), else the
    host's alone (not applied: kept to say in fixes what activation would set)."""
    try:
        if meta is not None:
            ov = with_prefix_activation(meta, host_overlay(host, meta=meta, site_dirs=overlay_site_dirs(host, meta, cwd)))
        elif env:
            ov = host_overlay(host, spec_env=dict(getattr(spec, "env", {}) or {}))
        else:
            ov = host_overlay(host)
    except Exception as err:  # noqa: BLE001 - UserError from the rules, or anything unexpected
        findings.append(setup_finding(
            "env.overlay-error", "error", f"the overlay cannot be built: {one_line(err, 400)}",
            [Evidence(value=one_line(getattr(err, "message", err)), file=getattr(err, "file", None) or "overlay")],
            "fix the env spec's [env] (or the platform profile) as the message says"))
        return None, False
    notes.extend(f"overlay ({n.rule}): {n.message}" for n in ov.warnings())
    return ov, bool(meta is not None or env)


def effective_env(environ: Mapping[str, str], overlay: Optional[Overlay], meta: Optional[PrefixMeta],
                  notes: list[str]) -> EnvView:
    """The environment a process of the env sees: ``environ`` with the overlay applied and — as
    `deepep-env run` does — the prefix's activate.d scripts run (bash, no GPU), with provenance."""
    effective = effective_environment(environ, overlay)
    if overlay is None or meta is None or not any(isinstance(c, Source) for c in overlay.changes):
        return effective
    try:
        scripted = run_environment(overlay, environ)
    except UserError as err:
        notes.append(f"activation scripts not applied: {err}")
        return effective
    origins = dict(effective.origins)
    for k in set(scripted) | set(effective.values):
        if scripted.get(k) != effective.values.get(k):
            origins[k] = f"an activation script in {meta.prefix}/etc/conda/activate.d" if k in scripted else "unset by an activation script"
    return EnvView(scripted, origins, "effective")


def path_view(host: HostContext, pfx: Optional[str], meta: Optional[PrefixMeta], cwd: str, notes: list[str]) -> PathView:
    """Host paths under --root; the prefix and the env's own Python read on this machine."""
    local_roots = [pfx] if pfx else []
    py_root = local_python_root(getattr(meta, "python_executable", None))
    if py_root:
        local_roots.append(py_root)
    paths = PathView(host.fs, host.live, local_roots, cwd)
    if not paths.captures_software:
        notes.append(f"{host.root} holds no installed software (no /usr, /opt, /home): paths the environment names are not checked")
    return paths


def build_context(host: HostContext, env: Optional[str], *, prefix: Optional[str], project: Any, cwd: str,
                  spec: Any = None, ws: Optional[Workspace] = None) -> DoctorContext:
    """Everything the checks read, for ``env`` (or ``prefix``) on ``host``. ``ws``: the command's
    workspace (the spec resolved once, for the checks and for a marker the spec stands in for)."""
    notes: list[str] = []
    findings: list[Finding] = []
    proj = find_project(project) if (env or project) else None
    ws = workspace(proj, ws) if proj is not None else ws
    if spec is None:
        spec = load_spec(env, proj, prefix is not None, notes, ws)
    pfx = resolve_prefix(env, prefix, proj, host.environ, cwd)
    meta = read_marker(env, pfx, findings, ws) if pfx is not None else None
    env_name = env or (meta.env if meta else None)
    mismatch = mismatch_finding(host, env_name, spec, meta, pfx)
    findings.extend([mismatch] if mismatch else [])
    overlay, applied = build_env_overlay(host, env, spec, meta, cwd, findings, notes)
    return DoctorContext(
        host=host, env=effective_env(host.environ, overlay if applied else None, meta, notes),
        current=effective_environment(host.environ, None), overlay=overlay, overlay_applied=applied,
        paths=path_view(host, pfx, meta, cwd, notes), cwd=cwd, env_name=env_name, spec=spec, meta=meta,
        prefix=pfx, setup_findings=findings, notes=notes,
    )
