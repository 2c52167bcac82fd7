"""Issue 25.5: the committed pixi.toml names no host path. A host-python environment's tasks run
``"$DEEPEP_ENV_PYTHON"``; activation (the deepep-env package's hook, `deepep-env activate`, `deepep-env
task`) sets it to the spec's interpreter, recorded in the prefix's install marker."""
from __future__ import annotations

import os
import re
import sys

import pytest

from platform_fixtures import fake_prefix

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

EXE = "/opt/torch/.venv/bin/python3"


@pytest.fixture
def host_env(host_tree) -> dict[str, str]:
    return {"DEEPEP_ENV_HOST_ROOT": str(host_tree("gcp-b200")), "DEEPEP_ENV_PLATFORM": "gcp-b200"}


def _sets(ov) -> dict[str, str]:
    return {c.name: c.value for c in ov.changes if c.op == "set"}


def test_committed_tasks_name_no_host_path(repo_root):
    m = tomllib.loads((repo_root / "pixi.toml").read_text())
    for name, feat in m["feature"].items():
        for tname, task in (feat.get("tasks") or {}).items():
            cmd = task["cmd"]
            assert re.match(r'^(python|"\$DEEPEP_ENV_PYTHON") \$CONDA_PREFIX/share/', cmd), (name, tname, cmd)
            assert not re.search(r"(^|\s)/", cmd), (name, tname, cmd)
    assert m["feature"]["h200-nvlink"]["tasks"]["deepep-test-intranode"]["cmd"].startswith('"$DEEPEP_ENV_PYTHON" ')
    assert m["feature"]["h200-nvlink-conda"]["tasks"]["deepep-test-intranode"]["cmd"].startswith("python ")


def test_the_hook_sets_the_marker_interpreter(tmp_path, host_env):
    from deepep_env.cli.hook import hook_overlay, hook_script
    from deepep_env.overlay.render import sh_quote

    pfx = fake_prefix(tmp_path / "host", executable=EXE)
    ov = hook_overlay(str(pfx), host_env)
    assert _sets(ov)["DEEPEP_ENV_PYTHON"] == EXE
    script = hook_script(ov, "sh", host_env)
    assert f"export DEEPEP_ENV_PYTHON={sh_quote(EXE)}" in script and "unset DEEPEP_ENV_PYTHON" in script   # undo too


def test_a_conda_python_env_needs_none(tmp_path, host_env):
    from deepep_env.cli.hook import hook_overlay

    pfx = fake_prefix(tmp_path / "conda", provider="conda", executable=str(tmp_path / "conda/bin/python"))
    (pfx / "bin" / "python").write_text("")
    assert "DEEPEP_ENV_PYTHON" not in _sets(hook_overlay(str(pfx), host_env))


def test_a_prefix_pixi_installed_falls_back_to_python3(tmp_path, host_env):
    """No marker (pixi installed it): a host-python prefix is known from its files; the interpreter is
    python3 from PATH, as bin/deepep-env falls back."""
    from deepep_env.cli.hook import hook_overlay

    pfx = fake_prefix(tmp_path / "pixi", executable=EXE)
    (pfx / "conda-meta" / "deepep-env.json").unlink()
    assert _sets(hook_overlay(str(pfx), host_env))["DEEPEP_ENV_PYTHON"] == "python3"


def test_activate_sets_it(tmp_path):
    from deepep_env.overlay.activation import prefix_changes
    from deepep_env.formats.prefix import read_prefix_meta

    changes, _ = prefix_changes(read_prefix_meta(fake_prefix(tmp_path / "p", executable=EXE)))
    assert {c.name: c.value for c in changes if c.op == "set"}["DEEPEP_ENV_PYTHON"] == EXE


def test_task_sets_it_with_the_overlay_off(tmp_path):
    """`deepep-env task` reads the marker itself: DEEPEP_ENV_NO_OVERLAY skips the package's hook, not
    the interpreter the task needs."""
    from deepep_env.lock.pixi_model import parse_manifest
    from deepep_env.base.project import Project
    from deepep_env.views.tasks import TaskPlan, task_environment

    pfx = fake_prefix(tmp_path / "p", executable=EXE)
    plan = TaskPlan(task="t", environment="gcp-b200", spec="gcp-b200", prefix=str(pfx))
    manifest = parse_manifest({"environments": {"gcp-b200": {"features": []}}}, tmp_path / "pixi.toml")
    env = task_environment(Project(tmp_path), plan, dict(os.environ, DEEPEP_ENV_NO_OVERLAY="1"), manifest)
    assert env["DEEPEP_ENV_PYTHON"] == EXE
