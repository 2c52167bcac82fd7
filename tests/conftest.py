"""Shared test configuration: where the project and ../shared live."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("DEEPEP_ENV_SHARED") or (REPO.parent / "shared"))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"../shared not found at {SHARED} (CI places it beside the project; set DEEPEP_ENV_SHARED)")
    return SHARED


@pytest.fixture(autouse=True)
def _isolate_state(tmp_path_factory, monkeypatch):
    """No test writes into the developer's .deepep-env/ state."""
    monkeypatch.setenv("DEEPEP_ENV_STATE", str(tmp_path_factory.mktemp("state")))
    monkeypatch.delenv("DEEPEP_ENV_PROJECT", raising=False)
