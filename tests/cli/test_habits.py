"""What a pixi or conda user types first (issue 56): `--version`, `-h` on every level in one (rich)
help style, `--json` wherever a command has a machine-readable form, `lock all --check`."""
from __future__ import annotations

import json
import os

import pytest

import lock_fixtures as lf
from cli_runner import cli_in_process, cli_subprocess


def _commands() -> list[list[str]]:
    """Every command and sub-command of the app, as argv prefixes."""
    import typer.main

    from deepep_env.cli.main import build_app

    group = typer.main.get_command(build_app())
    out: list[list[str]] = [[]]

    def walk(cmd, path: list[str]) -> None:
        for name, sub in getattr(cmd, "commands", {}).items():
            out.append([*path, name])
            walk(sub, [*path, name])

    walk(group, [])
    return out


def test_version(capsys):
    from deepep_env import __version__

    rc, out, err = cli_in_process(capsys, "--version")
    assert rc == 0, err
    first, rb, pr = out.splitlines()
    assert first.startswith(f"deepep-env {__version__} (the environments' activation h") or first.startswith(f"deepep-env {__version__} (the environments' activation tree sha256:")
    assert rb.startswith("rattler-build 0.") and pr.startswith("py-rattler 0.")
    assert cli_in_process(capsys, "-V").stdout == out


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_on_every_level(flag, capsys):
    cmds = _commands()
    assert ["fleet", "report"] in cmds and ["activate"] in cmds
    for path in cmds:
        rc, out, err = cli_in_process(capsys, *path, flag)
        assert rc == 0, (path, err)
        assert "Usage: deepep-env" in out and "╭─ Options" in out, path   # the one (rich) style
        assert "-h" in out and "--help" in out, path


def test_activate_help_is_rich_but_activate_stays_fast():
    """`activate -h` goes through typer (the style of every other command); `activate ENV` does not
    import typer (the stdlib fast path)."""
    r = cli_subprocess("activate", "-h")
    assert r.returncode == 0 and "╭─ Options" in r.stdout and "--json" in r.stdout
    r = cli_subprocess("activate", "no-such-env", "--demo-host", "h200x8-nvlink", "--json",
                       env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    imported = {line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    assert "deepep_env.cli.fast_activate" in imported
    assert not {"typer", "rich", "click"} & imported


def test_overlay_json_is_format_json(capsys):
    a = cli_in_process(capsys, "overlay", "--json", "--demo-host", "h200x8-nvlink")
    b = cli_in_process(capsys, "overlay", "-f", "json", "--demo-host", "h200x8-nvlink")
    assert a.returncode == b.returncode == 0, a.stderr
    assert json.loads(a.stdout) == json.loads(b.stdout)


@pytest.fixture
def proj(lt_world, tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(lt_world.root / "cache"))
    return lf.project_copy(lt_world, tmp_path / "proj")


def test_lock_all_check(proj, capsys):
    """`lock all --check` checks every environment the lock holds (a spec not locked yet is named, not a
    failure, as pixi checks only its manifest's environments); a lock environment whose spec is gone is
    stale and names `lock all --prune`, the step that mends it, run here."""
    from deepep_env.lock import lock_env

    envs = proj.spec_names()
    lock_env(envs[0], proj)
    rc, out, err = cli_in_process(capsys, "lock", "all", "--check", "--json", "--project", proj.root)
    assert rc == 0, err
    docs = {d["env"]: d for d in json.loads(out)}
    assert docs[envs[0]]["fresh"] and all(docs[e].get("locked") is False for e in envs[1:])
    spec = proj.spec_path(envs[0])
    spec.rename(spec.with_name("renamed.toml"))          # the locked spec renamed: its lock section is an orphan
    spec.with_name("renamed.toml").write_text(spec.with_name("renamed.toml").read_text()
                                              .replace(f'name = "{envs[0]}"', 'name = "renamed"'))
    rc, out, err = cli_in_process(capsys, "lock", "all", "--check", "--project", proj.root)
    assert rc == 1 and f"{envs[0]}: cannot check: no spec makes it" in out and "stale or not checkable: " in err
    assert cli_in_process(capsys, "lock", "all", "--prune", "--project", proj.root).returncode == 0
    rc, out, err = cli_in_process(capsys, "lock", "all", "--check", "--project", proj.root)
    assert rc == 0, err
