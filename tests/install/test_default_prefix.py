"""The default prefix is written once (deepep_env/base/project.py) and quoted from there (issue 29.3)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from cli_runner import cli_in_process
from deepep_env.base.project import DEFAULT_PREFIX, ENVS_DIR, Project, envs_dir

REPO = Path(__file__).resolve().parents[2]


def test_default_prefix_is_where_the_code_installs(tmp_path):
    assert DEFAULT_PREFIX == f"{ENVS_DIR}/ENV" == ".pixi/envs/ENV"
    assert envs_dir(tmp_path) == tmp_path / ".pixi" / "envs"
    assert Project(tmp_path).prefix_for("h200.x_y") == tmp_path / ".pixi" / "envs" / "h200-x-y"


@pytest.mark.parametrize("command", ["install", "doctor"])
def test_help_quotes_the_default_prefix(capsys, command):
    code, out, _ = cli_in_process(capsys, command, "--help")
    assert code == 0 and DEFAULT_PREFIX in " ".join(re.sub(r"[│╭╮╰╯─]", " ", out).split()), out


def test_activate_help_quotes_the_default_prefix(capsys):
    """`activate` has two parsers: typer's (listed by `deepep-env --help`) and the fast path's."""
    import typer

    from deepep_env.cli.main import build_app

    cmd = typer.main.get_command(build_app()).commands["activate"]
    assert DEFAULT_PREFIX in next(p.help for p in cmd.params if p.name == "prefix")

    from deepep_env.cli.fast_activate import main

    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["--help"])
    assert DEFAULT_PREFIX in " ".join(capsys.readouterr().out.split())


def test_no_help_or_doc_names_another_default_prefix():
    """`.deepep-env/envs` and `<state>/envs` were the default before pixi's layout; nothing says so now
    (docs/benchmarks.md keeps the paths its past runs printed)."""
    files = [*(REPO / "deepep_env").rglob("*.py"), *(REPO / "docs").glob("*.md"), REPO / "README.md"]
    bad = [f"{p.relative_to(REPO)}:{i}" for p in files if p.name != "benchmarks.md"
           for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
           if ".deepep-env/envs" in line or "<state>/envs" in line]
    assert not bad, bad
