"""``deepep-env doctor``: checks over the host, the installed env and its overlay → findings.

Entry point: :func:`run_doctor` (returns a :class:`DoctorReport`, plain data);
:func:`render_text` renders it; ``report.to_dict()`` is the ``--json`` form. One module per check
family (``checks_*.py``), one named check per finding id, collected by :mod:`deepep_env.doctor.catalog`;
the context they read is built once (:mod:`deepep_env.doctor.setup`). docs/doctor.md lists every
finding id with the seed failure it catches.
"""
from __future__ import annotations

from deepep_env.doctor.model import DoctorReport, Evidence, Finding, NicTraffic, TrafficResult
from deepep_env.doctor.render import render_text
from deepep_env.doctor.run import run_doctor
from deepep_env.doctor.traffic import run_traffic, snapshot

__all__ = ["DoctorReport", "Evidence", "Finding", "NicTraffic", "TrafficResult", "render_text", "run_doctor", "run_traffic", "snapshot"]
