"""``[tests] wheels``: the catalog (recipes/test-wheels/sources.toml), the refusal of an unpinned project, and
the plan's deepep-test-wheels node (in_env, no edges: no other node's build id moves)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_runner import cli_in_process

from deepep_env.base.errors import UserError
from deepep_env.envspec.test_wheels import load_test_wheels, require_test_wheels

REPO = Path(__file__).resolve().parents[2]


def test_catalog_pins_numpy_for_cp312() -> None:
    cat = load_test_wheels(REPO / "recipes")
    w = cat.versions["3.12"]["linux-64"]["numpy"]
    assert (w.project, w.version, w.size) == ("numpy", "2.4.6", 16645538)
    assert w.sha256 == "sha256:90f9849678c75fe7afa2d348ac842c168b0a4d3d61919687216dfc547976d853"


def test_unpinned_project_is_refused_in_one_line_naming_the_catalog() -> None:
    with pytest.raises(UserError) as e:
        require_test_wheels(REPO / "recipes", ["numpy", "scipy"], "3.12", "linux-64")
    msg = str(e.value)
    assert "scipy" in msg and "recipes/test-wheels/sources.toml" in msg and "\n" not in msg.strip()


def test_unpinned_python_is_refused() -> None:
    with pytest.raises(UserError, match="recipes/test-wheels/sources.toml"):
        require_test_wheels(REPO / "recipes", ["numpy"], "3.99", "linux-64")


def test_installer_is_pytorch_wheels() -> None:
    link = REPO / "recipes/test-wheels/install_wheels.py"
    assert link.is_symlink() and link.resolve() == (REPO / "recipes/pytorch-wheel/install_wheels.py").resolve()


def test_plan_has_the_node_in_env_and_no_other_id_moves(capsys, tmp_path: Path) -> None:
    spec = REPO / "env_specs/gcp-b200.toml"
    bare = tmp_path / "gcp-b200.toml"
    text = spec.read_text()
    bare.write_text(text[:text.index("[tests]")])
    after = cli_in_process(capsys, "plan", spec, "--json")
    before = cli_in_process(capsys, "plan", bare, "--json")
    assert after.returncode == 0 and before.returncode == 0, (after, before)
    a = {n["package"]: n for n in json.loads(after.stdout)["builds"]}
    b = {n["package"]: n["id"] for n in json.loads(before.stdout)["builds"]}
    assert set(a) - set(b) == {"test-wheels"} and a["test-wheels"]["deps"] == []
    assert all(a[k]["id"] == v for k, v in b.items())
