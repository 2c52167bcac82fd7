"""What a check module imports to define checks: the ``@check`` mark, :class:`Emitter`.

A check is a function ``(ctx, emit) -> None`` over a :class:`~deepep_env.doctor.context.DoctorContext`
that emits the finding ids it declares — one id per check (the shape of ``spack audit`` and
``brew doctor``: a named check per problem). ``family`` groups checks in the report (``check`` in
the JSON) and in docs/doctor.md. The mark only annotates the function: collecting every check is
:mod:`deepep_env.doctor.catalog`'s job (it imports the check modules; they never import it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from deepep_env.doctor.model import Evidence, Finding

CheckFn = Callable[..., None]


@dataclass(frozen=True)
class Check:
    name: str  # the check's name: its finding id ("lib.ibverbs-conflict")
    family: str  # "deepep", "nic-handler", "host", "libraries", "nvshmem", "nccl", "env", …
    fn: CheckFn
    ids: tuple[str, ...]  # every finding id it may emit
    doc: str
    # Checks whose findings depend on environment values the overlay may change: with ENV they
    # also run over the current environment alone, and what only that shows is reported as info
    # ("fixed by the overlay; processes started outside deepep-env still hit it").
    current_env_too: bool = False


def check(family: str, id: str, *more_ids: str, current_env_too: bool = False) -> Callable[[CheckFn], CheckFn]:
    """Mark ``fn`` as the check for finding ``id`` (``more_ids``: ids it may also emit)."""

    def deco(fn: CheckFn) -> CheckFn:
        doc = (fn.__doc__ or "").strip().split("\n")[0]
        fn.doctor_check = Check(id, family, fn, (id, *more_ids), doc, current_env_too)  # type: ignore[attr-defined]
        return fn

    return deco


def checks_of(module: object) -> list[Check]:
    """The checks a module defines, in definition order."""
    return [fn.doctor_check for fn in vars(module).values() if isinstance(getattr(fn, "doctor_check", None), Check)]


class Emitter:
    """Collects one check's findings; ``id`` must be one the check declared."""

    def __init__(self, family: str, ids: tuple[str, ...]) -> None:
        self.family = family
        self.ids = ids
        self.findings: list[Finding] = []

    def __call__(self, id: str, severity: str, title: str, evidence: Iterable[Evidence], fix: str) -> Finding:
        if id not in self.ids:
            raise AssertionError(f"check {self.family} emitted undeclared id {id}")
        f = Finding(id=id, severity=severity, title=title, evidence=tuple(evidence), fix=fix, check=self.family)
        self.findings.append(f)
        return f
