"""`launch` of an env this checkout cannot install (issue 56): a warning naming the next step, a refusal
with --strict; once the named step is run (here: lock), the same launch is quiet."""
from __future__ import annotations

import lock_fixtures as lf
from cli_runner import REPO, cli_in_process


def test_unlocked_env_warns_then_strict_refuses_then_lock_fixes(lt_world, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(lt_world.root / "cache"))
    proj = lf.project_copy(lt_world, tmp_path / "proj")
    args = ("launch", "lt-host", "low-latency", "-n", "2", "--project", proj.root)
    rc, out, err = cli_in_process(capsys, *args)
    assert rc == 0 and out.startswith("# deepep-env launch:")
    assert err.startswith("deepep-env: warning: lt-host is not in pixi.lock yet: every node's install and preflight "
                          "would fail; next: `deepep-env build lt-host && deepep-env lock lt-host`")
    rc, out, err = cli_in_process(capsys, *args, "--strict")
    assert rc == 2 and out == "" and "error: ENV: lt-host is not in pixi.lock yet" in err
    assert cli_in_process(capsys, "lock", "lt-host", "--project", proj.root).returncode == 0   # the named step
    rc, out, err = cli_in_process(capsys, *args, "--strict")
    assert rc == 0 and err == ""


def test_an_env_that_cannot_be_built_here_warns():
    from deepep_env.base.project import find_project
    from deepep_env.launch import not_installable

    assert not_installable("h200-nvlink", find_project(REPO)) is None
    why = not_installable("gcp-b200-seed", find_project(REPO))
    assert why and "not pinned by content" in why and "`deepep-env fetch gcp-b200-seed --from DIR`" in why
