"""Features an env spec can require of the installed DeepEP (``[deepep].require``), and how each is
recognised in the module Python actually imports — by the code itself, parsed, never imported
(importing deep_ep imports torch and CUDA: slow, and impossible without a GPU driver).

recipes/deep-ep/verify_install.py (V1) and recipes/deep-ep-v2/verify_install.py (V2) keep their own
copy of their engine's rows because they run inside the recipe test, where deepep_env is not
installed; tests/doctor/test_doctor_deepep.py asserts each equals FEATURE_CHECKS restricted to FEATURE_ENGINE.
The rows themselves are the engines' (deepep_env/base/engines.py Engine.features).
"""
from __future__ import annotations

import ast

from deepep_env.base.engines import ENGINES, all_features

# feature -> (file in the package, function/method that must be defined there)
FEATURE_CHECKS = all_features()

# Which engine's recipe (and verify_install.py) knows each feature.
FEATURE_ENGINE = {f: e.name for e in ENGINES.values() for f in e.features}

# What a missing feature costs, for the finding's title.
FEATURE_WHY = {
    "pr-466": "DEEP_EP_DEVICE_TO_HCA_MAPPING is ignored and every GPU uses the first NIC (seed 000: RDMA ~6.5 GB/s instead of 36-80)",
    "elastic-buffer": "the module is not DeepEP 2.x: there is no deep_ep.ElasticBuffer (EPv2 over NCCL Gin)",
}


def defined_names_in(source: str) -> set[str]:
    """Names of every function, method and class defined in ``source`` (SyntaxError propagates)."""
    tree = ast.parse(source)
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def finding_id(feature: str) -> str:
    """``pr-466`` → ``deepep.pr466-missing``."""
    return "deepep." + "".join(ch for ch in feature.lower() if ch.isalnum()) + "-missing"
