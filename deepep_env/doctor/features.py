"""Features an env spec can require of the installed DeepEP (``[deepep].require``), and how each is
recognised in the module Python actually imports — by the code itself, parsed, never imported
(importing deep_ep imports torch and CUDA: slow, and impossible without a GPU driver).

recipes/deep-ep/verify_install.py (V1) and recipes/deep-ep-v2/verify_install.py (V2) keep their own
copy of their engine's rows because they run inside the recipe test, where deepep_env is not
installed; tests/test_doctor_deepep.py asserts each equals FEATURE_CHECKS restricted to FEATURE_ENGINE.
"""
from __future__ import annotations

import ast

# feature -> (file in the package, function/method that must be defined there)
FEATURE_CHECKS = {
    # DeepEP PR #466 (head 8a07e7e): Buffer._setup_device_hca_mapping reads
    # DEEP_EP_DEVICE_TO_HCA_MAPPING. Without it every GPU used mlx5_0 (seed 000 §4 problem 1).
    "pr-466": ("buffer.py", "_setup_device_hca_mapping"),
    # DeepEP 2.x (b306af0 on): the EPv2 API, deep_ep/buffers/elastic.py class ElasticBuffer.
    "elastic-buffer": ("buffers/elastic.py", "ElasticBuffer"),
}

# Which engine's recipe (and verify_install.py) knows each feature.
FEATURE_ENGINE = {"pr-466": "v1", "elastic-buffer": "v2"}

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
