"""Shared test configuration: where the project and ../shared live."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

# The shared fixture modules, registered once for every test module (tests/ is on sys.path: this
# conftest's folder, rootdir-relative import mode). A test just names the fixture it wants; the
# modules' helper functions and constants are imported normally where they are used. Modules with
# helpers only (build_fixtures, launch_fixtures, cli_runner) are not plugins.
pytest_plugins = [
    "platform_fixtures",   # host_tree
    "publish_fixtures",    # pkgs, nginx, no_creds, captured
    "doctor_fixtures",     # clean_env
    "lock_fixtures",       # lt_world
]

REPO = Path(__file__).resolve().parents[1]
SLOW_LIST = Path(__file__).with_name("slow.txt")


def _slow_keys() -> set[str]:
    """``<file>::<test>`` (or a whole ``<file>``) of tests/slow.txt."""
    lines = SLOW_LIST.read_text(encoding="utf-8").splitlines() if SLOW_LIST.is_file() else []
    return {ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")}


def pytest_collection_modifyitems(config, items) -> None:
    """The ``slow`` marker (registered in pyproject.toml) on the tests tests/slow.txt names: a list made
    from measured durations, so a test that becomes slow is one line to add, whatever folder it is in."""
    keys = _slow_keys()
    for item in items:
        name = Path(str(item.fspath)).name
        if name in keys or f"{name}::{getattr(item, 'originalname', None) or item.name}" in keys:
            item.add_marker(pytest.mark.slow)
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


# py-rattler 0.28's runtime can abort the interpreter at shutdown (PyGILState_Release, exit 134)
# after its async calls ran in this process, turning a green run red after the summary. The CLI
# avoids it the same way (deepep_env.cli.main.entry): flush, then leave without the shutdown dance.
_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session, exitstatus):
    _EXIT_STATUS.append(int(exitstatus))


def pytest_unconfigure(config):
    import sys

    if _EXIT_STATUS and "rattler" in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT_STATUS[-1])
