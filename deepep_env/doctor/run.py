"""``run_doctor``: detect the host, find the env, build the effective environment, run every check.

Nothing here raises for a broken host or env — a missing prefix, an unreadable file, a check that
trips on something unexpected all become findings or notes. Only bad *input* (a root that is not a
host tree, an unknown ENV name with no --prefix, an unknown --platform) is a UserError.
"""
from __future__ import annotations

import os
import re
from typing import Any, Mapping, Optional, Sequence

from deepep_env.doctor.context import DoctorContext, EnvView, PathView, effective_environment
from deepep_env.doctor.model import SEVERITIES, DoctorReport, Evidence, Finding, one_line
from deepep_env.doctor.registry import Emitter, all_checks
from deepep_env.errors import UnknownEnvError, UserError
from deepep_env.overlay.prefix import META_RELPATH

# Variables shown in the report's context (with where each came from). Never a token: names only
# from the stack's own namespaces and the loader's.
CONTEXT_VARS = re.compile(
    r"^(NVSHMEM_|NCCL_|DEEP_EP_|EP_|RDMAV_|IBV_|MLX5_|TORCH_NCCL_|CUDA_)|^(LD_PRELOAD|LD_LIBRARY_PATH|PYTHONPATH|CONDA_PREFIX)$"
    r"|_HOME$"
)
FAMILY_ORDER = ("env", "deepep", "deepep-v2", "nvshmem", "nic-handler", "host", "rdma-config", "libraries", "nccl", "traffic", "doctor")


def _setup(id: str, severity: str, title: str, evidence: Sequence[Evidence], fix: str) -> Finding:
    return Finding(id=id, severity=severity, title=title, evidence=tuple(evidence), fix=fix, check="env")


def _find_project(project: Any):
    from deepep_env.project import Project, find_project

    if isinstance(project, Project):
        return project
    try:
        return find_project(project)
    except UserError:
        if project:
            raise
        return None


def resolve_prefix(env: Optional[str], prefix: Optional[str], project: Any, environ: Mapping[str, str], cwd: str) -> Optional[str]:
    """--prefix; else $DEEPEP_ENV_PREFIX; else the project's ``.pixi/envs/ENV`` (one owner of the
    rule: :func:`deepep_env.overlay.prefix.default_prefix`)."""
    if prefix:
        return os.path.abspath(os.fspath(prefix))
    if not env:
        return None
    from deepep_env.overlay.prefix import PREFIX_ENV_VAR, check_env_name, default_prefix

    check_env_name(env)
    if environ.get(PREFIX_ENV_VAR):
        return os.path.abspath(environ[PREFIX_ENV_VAR])
    if project is not None:
        return str(project.prefix_for(env))
    return str(default_prefix(env, cwd, environ))


def run_doctor(
    env: Optional[str] = None,
    *,
    root: str | os.PathLike[str] = "/",
    prefix: Optional[str | os.PathLike[str]] = None,
    platform: Optional[str] = None,
    environ: Optional[Mapping[str, str]] = None,
    project: Any = None,
    cwd: Optional[str] = None,
    traffic: Optional[Sequence[str]] = None,
    traffic_timeout: Optional[float] = None,
    families: Optional[Sequence[str]] = None,
    spec: Any = None,
) -> DoctorReport:
    """Check the host under ``root``, the env ``env`` (or the prefix ``prefix``) and its overlay.

    ``environ`` is the current environment (default: this process's); the checked environment is
    it plus the env's overlay. ``traffic``: a command to run between two reads of every NIC's
    ``port_xmit_data``. ``spec``: an already resolved spec for ``env`` (else loaded from the project).
    """
    from deepep_env.overlay.changes import Overlay, Source
    from deepep_env.overlay.rules import build_overlay
    from deepep_env.platform import detect
    from deepep_env.platform.probes import check_root

    environ = dict(os.environ if environ is None else environ)
    cwd = os.path.abspath(cwd or os.getcwd())
    fs = check_root(root)
    live = fs.root == "/"
    try:
        det = detect(root, platform, environ=environ if live else {})
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - a hostile tree must not traceback the CLI
        raise UserError(f"cannot read the host: {type(exc).__name__}: {one_line(exc, 300)}", file=fs.root, field="--root") from None
    notes: list[str] = []
    setup: list[Finding] = []

    # -- the env: spec, prefix, install marker ------------------------------------------------------
    proj = _find_project(project) if (env or project) else None
    if spec is not None:
        pass
    elif env and proj is not None:
        from deepep_env.spec.resolve import load_resolved

        try:
            spec = load_resolved(env, proj)
        except UserError as err:
            if isinstance(err, UnknownEnvError) and prefix is None:
                raise
            notes.append(f"env spec not used: {err}")
    elif env and spec is None:
        notes.append("no deepep-env project found (no env_specs/ above the current directory): spec checks skipped")
    pfx = resolve_prefix(env, os.fspath(prefix) if prefix is not None else None, proj, environ, cwd)
    meta = None
    if pfx is not None:
        from deepep_env.overlay.prefix import read_prefix_meta

        marker = os.path.join(pfx, META_RELPATH)
        if not os.path.exists(marker):
            setup.append(_setup(
                "env.not-installed", "error",
                f"env {env or '?'} is not installed at {pfx} (no {META_RELPATH})",
                [Evidence(value="absent", file=marker)],
                f"`deepep-env install {env or 'ENV'}`, or pass --prefix where it is installed",
            ))
        else:
            try:
                meta = read_prefix_meta(pfx, env)
            except UserError as err:
                setup.append(_setup("env.not-installed", "error", f"the install marker is not usable: {err}",
                                    [Evidence(value=one_line(err.message), file=marker)],
                                    f"reinstall: `deepep-env install {env or 'ENV'}`"))
    env_name = env or (meta.env if meta else None)
    targets = list(getattr(spec, "platforms", []) or (meta.platforms if meta else []))
    if targets and det.platform.name not in targets:
        how = "given" if det.platform.source == "override" else "detected"
        setup.append(_setup(
            "env.platform-mismatch", "warning",
            f"{how} platform {det.platform.name!r} is not one env {env_name} targets ({', '.join(targets)})",
            [Evidence(value="; ".join(det.platform.evidence), file="platform"),
             Evidence(value=f"platforms = {targets}", file=f"env_specs/{env_name}.toml" if spec else os.path.join(pfx or "", META_RELPATH))],
            "use the env built for this platform, or pass --platform if detection is wrong",
        ))

    # -- the overlay ------------------------------------------------------------------------------------
    overlay = None
    applied = False
    try:
        if meta is not None:
            from deepep_env.overlay.activation import prefix_changes

            pch, pnotes = prefix_changes(meta, shell_scripts=True)
            ov = build_overlay(det.facts, det.platform, prefix=meta.prefix, spec_env=meta.spec_env,
                               python_executable=meta.python_executable, environ=environ,
                               site_dirs=_overlay_site_dirs(fs, live, meta, environ, cwd))
            overlay = Overlay(ov.platform, tuple(pch) + ov.changes, tuple(pnotes) + ov.notes)
            applied = True
        elif env:
            overlay = build_overlay(det.facts, det.platform, spec_env=dict(getattr(spec, "env", {}) or {}), environ=environ)
            applied = True
        else:
            overlay = build_overlay(det.facts, det.platform, environ=environ)
    except Exception as err:  # noqa: BLE001 - UserError from the rules, or anything unexpected
        setup.append(_setup("env.overlay-error", "error", f"the overlay cannot be built: {one_line(err, 400)}",
                            [Evidence(value=one_line(getattr(err, "message", err)), file=getattr(err, "file", None) or "overlay")],
                            "fix the env spec's [env] (or the platform profile) as the message says"))
        overlay, applied = None, False
    for n in (overlay.warnings() if overlay else []):
        notes.append(f"overlay ({n.rule}): {n.message}")

    effective = effective_environment(environ, overlay if applied else None)
    if applied and overlay is not None and any(isinstance(c, Source) for c in overlay.changes):
        # The prefix's activate.d scripts run in `deepep-env run` too: run them (bash, no GPU) so
        # what they export is checked, and say that is where those values came from.
        from deepep_env.overlay.activation import run_environment

        try:
            scripted = run_environment(overlay, environ)
        except UserError as err:
            notes.append(f"activation scripts not applied: {err}")
        else:
            origins = dict(effective.origins)
            for k in set(scripted) | set(effective.values):
                if scripted.get(k) != effective.values.get(k):
                    origins[k] = f"an activation script in {meta.prefix}/etc/conda/activate.d" if k in scripted else "unset by an activation script"
            effective = EnvView(scripted, origins, "effective")
    current = effective_environment(environ, None)
    local_roots = [pfx] if pfx else []
    py_root = _local_python_root(getattr(meta, "python_executable", None))
    if py_root:
        local_roots.append(py_root)
    paths = PathView(fs, live, local_roots, cwd)
    if not paths.captures_software:
        notes.append(f"{fs.root} holds no installed software (no /usr, /opt, /home): paths the environment names are not checked")
    ctx = DoctorContext(
        facts=det.facts, platform=det.platform, fs=fs, live=live, env=effective, current=current,
        overlay=overlay, overlay_applied=applied, paths=paths, cwd=cwd, env_name=env_name, spec=spec,
        meta=meta, prefix=pfx, setup_findings=setup, notes=notes,
    )

    # -- the checks ------------------------------------------------------------------------------------
    checks = [c for c in all_checks() if families is None or c.name in families]
    findings: list[Finding] = []
    for c in checks:
        findings.extend(_run_one(c, ctx))
    if applied:
        # What the current environment alone would hit but the overlay fixes: a finding whose
        # evidence names a variable the overlay changed, absent from the effective run.
        seen_ids = {f.id for f in findings}
        changed = {k for k in set(effective.values) | set(current.values) if effective.get(k) != current.get(k)}
        for c in checks:
            if not c.current_env_too:
                continue
            for f in _run_one(c, ctx.with_env(current)):
                if f.id in seen_ids or f.id.startswith("doctor.") or not any(e.var in changed for e in f.evidence):
                    continue
                seen_ids.add(f.id)
                findings.append(Finding(
                    id=f.id, severity="info",
                    title=f"outside deepep-env only: {f.title}",
                    evidence=f.evidence,
                    fix=f"`deepep-env run {env_name or 'ENV'}`/`activate` already fixes this; processes started without it "
                        f"(a hand-written launcher, a spawned job) still need: {f.fix}",
                    check=f.check,
                ))
    notes.extend(f"host facts: {w}" for w in det.facts.warnings)

    traffic_result = None
    if traffic:
        from deepep_env.doctor.traffic import run_traffic

        run_env = dict(effective.values) if applied else dict(environ)
        traffic_result, tf = run_traffic(root, traffic, env=run_env, timeout=traffic_timeout)
        findings.extend(tf)

    rank = {s: i for i, s in enumerate(SEVERITIES)}
    fam = {n: i for i, n in enumerate(FAMILY_ORDER)}
    findings = sorted(findings, key=lambda f: (rank[f.severity], fam.get(f.check, len(fam))))
    context: dict[str, Any] = dict(ctx.info)
    context["environment"] = {
        k: {"value": one_line(effective.values[k], 600), "source": one_line(effective.origin(k), 300)}
        for k in sorted(effective.values) if CONTEXT_VARS.search(k)
    }
    return DoctorReport(
        root=fs.root,
        platform=det.platform.name,
        platform_source=det.platform.source,
        env=env_name,
        prefix=pfx,
        overlay_applied=applied,
        findings=tuple(findings),
        notes=tuple(dict.fromkeys(notes)),
        confirmed=tuple(dict.fromkeys(ctx.confirmed)),
        checks=tuple(c.name for c in checks) + (("traffic",) if traffic else ()),
        traffic=traffic_result,
        context=context,
    )


# A system interpreter's root is the host's own /usr: reading it "on this machine" under --root
# would check this machine's /usr/local/nvidia, /usr/local/gib, /usr/lib… instead of the tree's
# (false alarms and missed seed-002 conflicts when a host-python env is checked against a tree).
SYSTEM_PYTHON_ROOTS = ("/", "/usr", "/usr/local")


def _local_python_root(exe: Optional[str]) -> Optional[str]:
    """The env's own Python install (a venv), read on this machine; None for a system python."""
    if not exe or not os.path.isabs(exe) or not os.path.exists(exe):
        return None
    base = os.path.normpath(os.path.dirname(os.path.dirname(exe)))
    return None if base in SYSTEM_PYTHON_ROOTS else base


def _overlay_site_dirs(fs, live: bool, meta, environ: Mapping[str, str], cwd: str) -> list[str]:
    """The site dirs the overlay's nvshmem-preload rule searches, as `deepep-env run` would on the
    machine that holds the prefix. Under --root the overlay alone looks only inside the tree, but
    doctor reads the env's Python (a pip-torch venv) on this machine: without it here, pip's
    nvidia-nvshmem would be seen by the nvshmem check and not by the overlay, and doctor would
    call an error what `deepep-env run` already fixes with LD_PRELOAD (field notes §3)."""
    from deepep_env.overlay.rules import default_site_dirs

    dirs = default_site_dirs(fs.root, meta.prefix, meta.python_executable, environ)
    py_root = _local_python_root(meta.python_executable)
    if not live and py_root:
        from deepep_env.doctor.context import site_dirs_of_python

        view = PathView(fs, live, [py_root], cwd)
        for sp in site_dirs_of_python(view, meta.python_executable):
            local = view.open_local(sp)
            if local and os.path.isdir(local) and local not in dirs:
                dirs.append(local)
    return dirs


def _run_one(c, ctx: DoctorContext) -> list[Finding]:
    emit = Emitter(c.name, c.ids)
    try:
        c.fn(ctx, emit)
    except Exception as exc:  # noqa: BLE001 - a check must never take the whole doctor down
        emit.findings.append(Finding(
            id="doctor.check-failed", severity="warning",
            title=f"check {c.name} could not finish: {type(exc).__name__}: {one_line(exc, 300)}",
            evidence=(Evidence(value=type(exc).__name__, file=f"deepep_env/doctor ({c.name})"),),
            fix="report this with `deepep-env doctor --json` output; the other checks ran",
            check="doctor",
        ))
    return emit.findings
