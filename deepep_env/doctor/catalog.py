"""Every doctor check, collected from the check modules in the order they run.

One way: this module imports the check modules; they import only :mod:`deepep_env.doctor.check`
(the mark) and the context, never this. docs/doctor.md documents every id; a test keeps the two equal.
"""
from __future__ import annotations

import deepep_env.doctor.checks_deepep as checks_deepep
import deepep_env.doctor.checks_deepep_v2 as checks_deepep_v2
import deepep_env.doctor.checks_efa as checks_efa
import deepep_env.doctor.checks_env as checks_env
import deepep_env.doctor.checks_field as checks_field
import deepep_env.doctor.checks_host as checks_host
import deepep_env.doctor.checks_libraries as checks_libraries
import deepep_env.doctor.checks_nccl as checks_nccl
import deepep_env.doctor.checks_nic as checks_nic
import deepep_env.doctor.checks_nvshmem as checks_nvshmem
import deepep_env.doctor.checks_test_imports as checks_test_imports
import deepep_env.doctor.traffic as traffic
from deepep_env.doctor.check import Check, checks_of
from deepep_env.doctor.setup import SETUP_IDS

# Run order: what is installed first (the module Python imports, its NVSHMEM), then the
# environment, the host and its RDMA configuration, the loader, NCCL, the NIC handler; then this
# year's field failures (checks_field) and the EFA host (checks_efa).
MODULES = (checks_deepep, checks_test_imports, checks_nvshmem, checks_deepep_v2, checks_env, checks_host, checks_libraries,
           checks_nccl, checks_nic, checks_field, checks_efa)
CHECK_FAILED = "doctor.check-failed"


def all_checks() -> list[Check]:
    return [c for m in MODULES for c in checks_of(m)]


def all_ids() -> list[str]:
    ids = list(SETUP_IDS) + [i for c in all_checks() for i in c.ids]
    return ids + list(traffic.TRAFFIC_IDS) + [CHECK_FAILED]
