"""The check registry: each family is a function ``ctx -> findings`` registered with the ids it
may emit (docs/doctor.md documents every id; a test keeps the two in step)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from deepep_env.doctor.model import Evidence, Finding

CheckFn = Callable[..., Iterable[Finding]]


@dataclass(frozen=True)
class Check:
    name: str  # the family: "deepep", "nic-handler", "host", "libraries", "nvshmem", "nccl", "env"
    fn: CheckFn
    ids: tuple[str, ...]  # every finding id the family can emit
    doc: str
    # Families whose findings depend on environment values the overlay may change: with ENV they
    # also run over the current environment alone, and what only that shows is reported as info
    # ("fixed by the overlay; processes started outside deepep-env still hit it").
    current_env_too: bool = False


CHECKS: dict[str, Check] = {}


def check(name: str, ids: Iterable[str], current_env_too: bool = False) -> Callable[[CheckFn], CheckFn]:
    def deco(fn: CheckFn) -> CheckFn:
        CHECKS[name] = Check(name, fn, tuple(ids), (fn.__doc__ or "").strip().split("\n")[0], current_env_too)
        return fn

    return deco


def all_checks() -> list[Check]:
    # Importing the families registers them (one module per family).
    from deepep_env.doctor import (  # noqa: F401
        checks_deepep,
        checks_deepep_v2,
        checks_env,
        checks_host,
        checks_libraries,
        checks_nccl,
        checks_nic,
        checks_nvshmem,
    )

    return list(CHECKS.values())


def all_ids() -> list[str]:
    from deepep_env.doctor import traffic

    ids = [i for c in all_checks() for i in c.ids]
    return ids + list(traffic.TRAFFIC_IDS) + ["doctor.check-failed"]


class Emitter:
    """Collects one family's findings; ``id`` must be one the family declared."""

    def __init__(self, family: str, ids: tuple[str, ...]) -> None:
        self.family = family
        self.ids = ids
        self.findings: list[Finding] = []

    def __call__(
        self,
        id: str,
        severity: str,
        title: str,
        evidence: Iterable[Evidence],
        fix: str,
    ) -> Finding:
        if id not in self.ids:
            raise AssertionError(f"check {self.family} emitted undeclared id {id}")
        f = Finding(id=id, severity=severity, title=title, evidence=tuple(evidence), fix=fix, check=self.family)
        self.findings.append(f)
        return f


def ev(value: object, file: Optional[str] = None) -> Evidence:
    from deepep_env.doctor.model import one_line

    return Evidence(value=one_line(value, 600), file=file)
