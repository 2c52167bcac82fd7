"""What `deepep-env doctor` returns: findings and a report, as plain data (rendering is elsewhere).

A :class:`Finding` says what is wrong (``id``, ``severity``, ``title``), what it read to know it
(``evidence``: the host file or environment variable, the value, and where an environment value
came from) and what to do (``fix``). ``DoctorReport.exit_code`` is the command's exit status:
0 nothing wrong, 1 warnings only under ``--strict``, 2 any error (issue 7).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from deepep_env.formats.stamps import DOCTOR_REPORT

SEVERITIES = ("error", "warning", "info")


def one_line(text: object, limit: int = 400) -> str:
    """Printable, single-line, bounded: a hostile file name or value cannot forge output lines."""
    s = " ".join("".join(ch if ch.isprintable() else " " for ch in str(text)).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


@dataclass(frozen=True)
class Evidence:
    """One thing the check read: a host file (``file``) or an environment variable (``var``)."""

    value: str
    file: Optional[str] = None  # the path as it is on the probed host: /sys/class/infiniband/…
    var: Optional[str] = None  # an environment variable name
    source: Optional[str] = None  # where the variable's value came from (environment, overlay rule …)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.file is not None:
            d["file"] = self.file
        if self.var is not None:
            d["var"] = self.var
        d["value"] = self.value
        if self.source is not None:
            d["source"] = self.source
        return d

    def render(self) -> str:
        if self.var is not None:
            head = f"{self.var}={self.value}" if self.value != "(unset)" else f"{self.var} unset"
            return head + (f"  [{self.source}]" if self.source else "")
        if self.file is not None:
            return f"{self.file}: {self.value}"
        return self.value


@dataclass(frozen=True)
class Finding:
    id: str  # family.problem, e.g. "deepep.pr466-missing" (docs/doctor.md lists them all)
    severity: str  # "error" | "warning" | "info"
    title: str
    evidence: tuple[Evidence, ...]
    fix: str
    check: str = ""  # the check family that produced it

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"bad severity {self.severity!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity,
            "title": one_line(self.title, 1000),
            "evidence": [e.to_dict() for e in self.evidence],
            "fix": one_line(self.fix, 2000),
            "check": self.check,
        }


@dataclass(frozen=True)
class NicTraffic:
    hca: str
    port: int
    before: Optional[int]  # port_xmit_data (units of 4 octets), None when unreadable
    after: Optional[int]
    active: bool

    @property
    def delta(self) -> Optional[int]:
        if self.before is None or self.after is None:
            return None
        return self.after - self.before

    def to_dict(self) -> dict[str, Any]:
        d = self.delta
        return {
            "hca": self.hca,
            "port": self.port,
            "active": self.active,
            "port_xmit_data_before": self.before,
            "port_xmit_data_after": self.after,
            "delta": d,
            "bytes": None if d is None else d * 4,  # the counter counts 4-octet words
        }


@dataclass(frozen=True)
class TrafficResult:
    command: tuple[str, ...]
    returncode: Optional[int]  # None: the command could not be started
    ports: tuple[NicTraffic, ...]
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": list(self.command),
            "returncode": self.returncode,
            "seconds": round(self.seconds, 3),
            "ports": [p.to_dict() for p in self.ports],
        }


@dataclass(frozen=True)
class DoctorReport:
    root: str
    platform: str
    platform_source: str  # "detected" | "override"
    env: Optional[str]
    prefix: Optional[str]
    overlay_applied: bool  # True when the env's overlay is part of the checked environment
    findings: tuple[Finding, ...]
    notes: tuple[str, ...] = ()
    confirmed: tuple[str, ...] = ()  # checks that looked and found the right thing (e.g. PR #466 present)
    checks: tuple[str, ...] = ()  # check families that ran
    skipped: tuple[tuple[str, str], ...] = ()  # (family, why) for families that did not run
    traffic: Optional[TrafficResult] = None
    context: dict[str, Any] = field(default_factory=dict)  # what was checked: python path, deep_ep origin, …

    def by_severity(self, severity: str) -> list[Finding]:
        return [f for f in self.findings if f.severity == severity]

    @property
    def errors(self) -> list[Finding]:
        return self.by_severity("error")

    @property
    def warnings(self) -> list[Finding]:
        return self.by_severity("warning")

    def exit_code(self, strict: bool = False) -> int:
        if self.errors:
            return 2
        if strict and self.warnings:
            return 1
        return 0

    def ids(self) -> list[str]:
        return [f.id for f in self.findings]

    def to_dict(self, strict: bool = False) -> dict[str, Any]:
        return {
            "_meta": DOCTOR_REPORT.meta(),
            "root": self.root,
            "platform": {"name": self.platform, "source": self.platform_source},
            "env": self.env,
            "prefix": self.prefix,
            "overlay_applied": self.overlay_applied,
            "summary": {s: len(self.by_severity(s)) for s in SEVERITIES},
            "exit_code": self.exit_code(strict),
            "findings": [f.to_dict() for f in self.findings],
            "notes": [one_line(n, 1000) for n in self.notes],
            "confirmed": [one_line(n, 1000) for n in self.confirmed],
            "checks": list(self.checks),
            "skipped": [{"check": c, "why": w} for c, w in self.skipped],
            "context": self.context,
            "traffic": self.traffic.to_dict() if self.traffic else None,
        }
