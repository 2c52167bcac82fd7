"""Family ``env``: variable names nothing reads. (The family's other findings — the env is not
installed, targets another platform, its overlay cannot be built — come from building the context:
:mod:`deepep_env.doctor.setup`.)

A misspelt variable does nothing, silently: a published overlay sets ``NVSHMEM_DISABLED_GDRCOPY``
for ``NVSHMEM_DISABLE_GDRCOPY`` (field notes §3). Names in the namespaces NVSHMEM, NCCL and DeepEP
own are checked against deepep_env/overlay/known_vars.py (taken from their sources).
"""
from __future__ import annotations

import difflib
from typing import Optional

from deepep_env.doctor.context import DoctorContext
from deepep_env.doctor.check import Emitter, check
from deepep_env.doctor.model import Evidence
from deepep_env.overlay import known_vars

CHECKED_PREFIXES = ("NVSHMEM_", "NCCL_", "DEEP_EP_")
# Set by NVIDIA's container images and PyTorch builds as metadata or build inputs; nothing at run
# time misreads them, so they are not typos (the real H200's environment has NCCL_VERSION).
NOT_TYPOS = frozenset({"NCCL_VERSION", "NCCL_ROOT", "NCCL_LIB_DIR", "NCCL_INCLUDE_DIR", "NCCL_HOME",
                       "NCCL_PACKAGE_VERSION", "NCCL_ROOT_DIR", "NVSHMEM_DIR", "NVSHMEM_HOME"})


def _prefix(name: str) -> Optional[str]:
    return next((p for p in CHECKED_PREFIXES if name.startswith(p)), None)


@check("env", "env.unknown-name")
def unknown_name(ctx: DoctorContext, emit: Emitter) -> None:
    """No unknown NVSHMEM_/NCCL_/DEEP_EP_ names in the environment (a typo does nothing, silently)."""
    for name in sorted(ctx.env.values):
        p = _prefix(name)
        if p is None or name in NOT_TYPOS or known_vars.is_known(name):
            continue
        if not ctx.env.origin(name).startswith("environment"):
            continue  # the overlay validates what it sets
        owned = known_vars.OWNED_PREFIXES.get(p, frozenset())
        close = difflib.get_close_matches(name, sorted(owned), n=2, cutoff=0.75)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        emit(
            "env.unknown-name",
            "warning",
            f"{name} is not a variable {p.rstrip('_')} reads: it has no effect" + (f" ({hint.strip()})" if close else ""),
            [ctx.env.evidence(name), Evidence(value=f"not among the {len(owned)} {p}* names", file="deepep_env/overlay/known_vars.py")],
            f"{hint}fix or remove it",
        )
