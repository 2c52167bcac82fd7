"""``run_doctor``: read the host once, build the context, run every check, report.

Nothing here raises for a broken host or env — a missing prefix, an unreadable file, a check that
trips on something unexpected all become findings or notes. Only bad *input* (a root that is not a
host tree, an unknown ENV name with no --prefix, an unknown --platform) is a UserError.
"""
from __future__ import annotations

import os
import re
from typing import Any, Mapping, Optional, Sequence

from deepep_env.doctor.catalog import CHECK_FAILED, all_checks
from deepep_env.doctor.check import Check, Emitter
from deepep_env.doctor.context import DoctorContext
from deepep_env.doctor.model import SEVERITIES, DoctorReport, Evidence, Finding, TrafficResult, one_line
from deepep_env.doctor.setup import build_context
from deepep_env.doctor.traffic import run_traffic
from deepep_env.lock.workspace import Workspace
from deepep_env.host.context import HostContext, read_host
from deepep_env.verify.fingerprint import host_fingerprint

# Variables shown in the report's context (with where each came from). Never a token: names only
# from the stack's own namespaces and the loader's.
CONTEXT_VARS = re.compile(
    r"^(NVSHMEM_|NCCL_|DEEP_EP_|EP_|RDMAV_|IBV_|MLX5_|TORCH_NCCL_|CUDA_)|^(LD_PRELOAD|LD_LIBRARY_PATH|PYTHONPATH|CONDA_PREFIX)$"
    r"|_HOME$"
)
FAMILY_ORDER = ("env", "deepep", "deepep-v2", "nvshmem", "nic-handler", "host", "rdma-config", "libraries", "nccl", "traffic", "doctor")


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
    host: Optional[HostContext] = None,
    ws: Optional[Workspace] = None,
) -> DoctorReport:
    """Check the host under ``root``, the env ``env`` (or the prefix ``prefix``) and its overlay.

    ``environ`` is the current environment (default: this process's); the checked environment is
    it plus the env's overlay. ``traffic``: a command to run between two reads of every NIC's
    ``port_xmit_data``. ``spec``: an already resolved spec for ``env`` (else loaded from the project).
    ``host``: the host already read by the caller (then ``root``, ``platform`` and ``environ`` are its).
    ``ws``: the caller's workspace (the spec resolved and the lock read once per command).
    """
    host = host or read_host(root, platform, dict(os.environ if environ is None else environ))
    cwd = os.path.abspath(cwd or os.getcwd())
    ctx = build_context(host, env, prefix=os.fspath(prefix) if prefix is not None else None, project=project,
                        cwd=cwd, spec=spec, ws=ws)
    checks = [c for c in all_checks() if families is None or c.family in families]
    findings = [f for c in checks for f in run_check(c, ctx)]
    if ctx.overlay_applied:
        findings += outside_only(checks, ctx, findings)
    ctx.notes.extend(f"host facts: {w}" for w in host.facts.warnings)
    traffic_result = None
    if traffic:
        run_env = dict(ctx.env.values) if ctx.overlay_applied else dict(host.environ)
        traffic_result, tf = run_traffic(host.root, traffic, env=run_env, timeout=traffic_timeout)
        findings.extend(tf)
    return _report(ctx, ctx.setup_findings + findings, checks, traffic_result, bool(traffic))


def run_check(c: Check, ctx: DoctorContext) -> list[Finding]:
    """One check's findings; a check that trips is a ``doctor.check-failed`` warning, never a traceback."""
    emit = Emitter(c.family, c.ids)
    try:
        c.fn(ctx, emit)
    except Exception as exc:  # noqa: BLE001 - a check must never take the whole doctor down
        emit.findings.append(Finding(
            id=CHECK_FAILED, severity="warning",
            title=f"check {c.family} could not finish: {type(exc).__name__}: {one_line(exc, 300)}",
            evidence=(Evidence(value=type(exc).__name__, file=f"deepep_env/doctor ({c.family}: {c.name})"),),
            fix="report this with `deepep-env doctor --json` output; the other checks ran",
            check="doctor",
        ))
    return emit.findings


def outside_only(checks: Sequence[Check], ctx: DoctorContext, findings: Sequence[Finding]) -> list[Finding]:
    """What the current environment alone would hit but the overlay fixes: a finding whose evidence
    names a variable the overlay changed, absent from the effective run — reported as info."""
    seen_ids = {f.id for f in findings}
    effective, current = ctx.env, ctx.current
    changed = {k for k in set(effective.values) | set(current.values) if effective.get(k) != current.get(k)}
    bare = ctx.with_env(current)
    out: list[Finding] = []
    for c in checks:
        if not c.current_env_too:
            continue
        for f in run_check(c, bare):
            if f.id in seen_ids or f.id.startswith("doctor.") or not any(e.var in changed for e in f.evidence):
                continue
            seen_ids.add(f.id)
            out.append(Finding(
                id=f.id, severity="info", title=f"outside deepep-env only: {f.title}", evidence=f.evidence,
                fix=f"`deepep-env run {ctx.env_name or 'ENV'}`/`activate` already fixes this; processes started without it "
                    f"(a hand-written launcher, a spawned job) still need: {f.fix}",
                check=f.check,
            ))
    return out


def _report(ctx: DoctorContext, findings: list[Finding], checks: Sequence[Check],
            traffic_result: Optional[TrafficResult], traffic: bool) -> DoctorReport:
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    fam = {n: i for i, n in enumerate(FAMILY_ORDER)}
    context: dict[str, Any] = dict(ctx.info)
    # The host facts a fleet must agree on (deepep-env fleet report compares them across nodes).
    context["host"] = host_fingerprint(ctx.host)
    context["environment"] = {
        k: {"value": one_line(ctx.env.values[k], 600), "source": one_line(ctx.env.origin(k), 300)}
        for k in sorted(ctx.env.values) if CONTEXT_VARS.search(k)
    }
    return DoctorReport(
        root=ctx.host.root,
        platform=ctx.host.platform.name,
        platform_source=ctx.host.platform.source,
        env=ctx.env_name,
        prefix=ctx.prefix,
        overlay_applied=ctx.overlay_applied,
        findings=tuple(sorted(findings, key=lambda f: (rank[f.severity], fam.get(f.check, len(fam))))),
        notes=tuple(dict.fromkeys(ctx.notes)),
        confirmed=tuple(dict.fromkeys(ctx.confirmed)),
        checks=tuple(dict.fromkeys(c.family for c in checks)) + (("traffic",) if traffic else ()),
        traffic=traffic_result,
        context=context,
    )
