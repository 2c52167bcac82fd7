"""``deepep-env doctor --traffic -- CMD``: which NICs carried traffic while CMD ran.

Seed 000 §4 problem 1's check, automated: read every NIC's
``/sys/class/infiniband/<hca>/ports/<p>/counters/port_xmit_data`` before and after CMD; a NIC that
did not move while others did is the symptom of a missing GPU→NIC mapping (every GPU on mlx5_0).
The counter counts 4-octet words (IB spec PortXmitData), so bytes = delta × 4.
"""
from __future__ import annotations

import os
import time
from typing import Iterable, Mapping, Optional, Sequence

from deepep_env.base.run import run_child
from deepep_env.doctor.model import Evidence, Finding, NicTraffic, TrafficResult
from deepep_env.platform.rootfs import RootFS

TRAFFIC_IDS = ("traffic.idle-nic", "traffic.no-traffic", "traffic.no-nics", "traffic.command-failed", "traffic.counter-unreadable")
COUNTER = "port_xmit_data"


def snapshot(root: str | os.PathLike[str]) -> dict[tuple[str, int], tuple[Optional[int], bool]]:
    """{(hca, port): (port_xmit_data or None, port ACTIVE)} for every NIC port under ``root``."""
    fs = RootFS(root)  # a fresh view: no cached directory state from before the command
    out: dict[tuple[str, int], tuple[Optional[int], bool]] = {}
    for hca in fs.listdir("sys/class/infiniband"):
        base = f"sys/class/infiniband/{hca}/ports"
        for port in fs.listdir(base):
            try:
                num = int(port)
            except ValueError:
                continue
            raw = fs.read_attr(f"{base}/{port}/counters/{COUNTER}")
            try:
                value: Optional[int] = int(raw, 0) if raw is not None else None
            except ValueError:
                value = None
            state = (fs.read_attr(f"{base}/{port}/state") or "").split(":", 1)[-1].strip().upper()
            out[(hca, num)] = (value, state == "ACTIVE")
    return out


def _f(id: str, severity: str, title: str, evidence: Iterable[Evidence], fix: str) -> Finding:
    return Finding(id=id, severity=severity, title=title, evidence=tuple(evidence), fix=fix, check="traffic")


def run_traffic(
    root: str | os.PathLike[str],
    cmd: Sequence[str],
    env: Optional[Mapping[str, str]] = None,
    timeout: Optional[float] = None,
) -> tuple[TrafficResult, list[Finding]]:
    """Run ``cmd`` between two counter snapshots; findings for NICs that stayed idle."""
    before = snapshot(root)
    t0 = time.monotonic()
    rc, err = _run_command(cmd, env, timeout)
    secs = time.monotonic() - t0
    after = snapshot(root)
    ports = []
    for key in sorted(set(before) | set(after)):
        b, active_b = before.get(key, (None, False))
        a, active_a = after.get(key, (None, False))
        ports.append(NicTraffic(hca=key[0], port=key[1], before=b, after=a, active=active_a or active_b))
    result = TrafficResult(command=tuple(cmd), returncode=rc, ports=tuple(ports), seconds=secs)
    return result, _findings(result, err)


def _run_command(cmd: Sequence[str], env: Optional[Mapping[str, str]], timeout: Optional[float]) -> tuple[Optional[int], Optional[str]]:
    """(exit status, None) or (None, why it could not run); its output goes to ours."""
    r = run_child(cmd, timeout=timeout, env=env, capture=False)
    return r.returncode, r.why


def _findings(result: TrafficResult, err: Optional[str]) -> list[Finding]:
    findings: list[Finding] = []
    shown = " ".join(result.command)
    if result.returncode is None or result.returncode != 0:
        findings.append(_f(
            "traffic.command-failed", "error",
            f"the command {'could not run' if result.returncode is None else f'exited with {result.returncode}'}: {err or shown}",
            [Evidence(value=shown, file="command")],
            "make the command succeed on its own first; idle NICs after a failed run say little",
        ))
    if not result.ports:
        findings.append(_f(
            "traffic.no-nics", "warning", "no RDMA NIC port under /sys/class/infiniband: no traffic to measure",
            [Evidence(value="absent or empty", file="/sys/class/infiniband")],
            "run --traffic on a node with RDMA NICs, with an internode command",
        ))
        return findings
    unreadable = [p for p in result.ports if p.delta is None]
    if unreadable:
        findings.append(_f(
            "traffic.counter-unreadable", "warning",
            "port_xmit_data unreadable on " + ", ".join(f"{p.hca}:{p.port}" for p in unreadable[:8]),
            [Evidence(value="unreadable", file=f"/sys/class/infiniband/{p.hca}/ports/{p.port}/counters/{COUNTER}") for p in unreadable[:4]],
            "run doctor with permission to read the counters",
        ))
    return findings + _nic_use(result.ports, shown)


def _nic_use(ports: Sequence[NicTraffic], shown: str) -> list[Finding]:
    """No NIC moved (an intranode run), or some moved and others stayed idle (seed 000)."""
    measured = [p for p in ports if p.delta is not None and p.active]
    by_nic: dict[str, int] = {}
    for p in measured:
        by_nic[p.hca] = by_nic.get(p.hca, 0) + max(p.delta or 0, 0)
    moved = sorted(h for h, d in by_nic.items() if d > 0)
    idle = sorted(h for h, d in by_nic.items() if d <= 0)
    ev = [Evidence(value=f"{p.before} → {p.after} (+{(p.delta or 0) * 4} bytes)",
                   file=f"/sys/class/infiniband/{p.hca}/ports/{p.port}/counters/{COUNTER}") for p in measured[:16]]
    if by_nic and not moved:
        return [_f(
            "traffic.no-traffic", "warning",
            f"no NIC carried traffic while `{shown}` ran: an intranode run, the remote transport is off, or every NIC is unused",
            ev,
            "run an internode command (e.g. DeepEP's test_internode.py across 2 nodes) to measure NIC use",
        )]
    if idle:
        return [_f(
            "traffic.idle-nic", "error",
            f"{len(idle)} of {len(by_nic)} NICs carried no traffic ({', '.join(idle)}) while {', '.join(moved)} did: "
            "the GPU→NIC mapping is missing or ignored (seed 000: every GPU on mlx5_0, RDMA ~6.5 GB/s)",
            ev,
            "check `deepep-env doctor ENV` for deepep.pr466-missing / deepep.shadowed and that "
            "DEEP_EP_DEVICE_TO_HCA_MAPPING is set (`deepep-env run` sets it from topology)",
        )]
    return []
