"""A channel's 401/403/5xx, on `lock` and `install` (issue 56): the refusal names the real cause and a
next step, and the step it names works: the credentials variable, set, locks and installs; a changed
package is "build first", and the build makes the lock work."""
from __future__ import annotations

import pytest

import lock_fixtures as lf
from channel_server import ChannelServer
from cli_runner import cli_in_process

TOKEN = "tok-issue-56"


@pytest.fixture
def served(lt_world, tmp_path, monkeypatch):
    """lt-conda's conda-forge stand-in served over HTTP behind a bearer token, the env rebuilt for it."""
    for var in ("DEEPEP_ENV_CHANNEL_TOKEN", "DEEPEP_ENV_CHANNEL_USER", "DEEPEP_ENV_CHANNEL_PASSWORD",
                "DEEPEP_ENV_CHANNEL_HOSTS", "RATTLER_AUTH_FILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    proj = lf.project_copy(lt_world, tmp_path / "proj")
    srv = ChannelServer(lt_world.forge, token=TOKEN)
    lf.set_spec_value(proj, "lt-conda", lt_world.forge.as_uri(), srv.url)
    yield proj, srv
    srv.close()


def _err(capsys, *args) -> str:
    rc, _, err = cli_in_process(capsys, *args)
    assert rc != 0
    assert err.count("\n") == 1 and err.startswith("deepep-env: error: "), err
    return err


def test_changed_package_is_build_first_then_locks(served, tmp_path, capsys):
    proj, _ = served
    err = _err(capsys, "lock", "lt-conda", "--project", proj.root)     # the spec moved: new build ids
    assert "not built" in err and "`deepep-env build lt-conda` first" in err
    lf.build_env(proj.root, "lt-conda", proj.channel, tmp_path / "work")   # what `deepep-env build` does
    err = _err(capsys, "lock", "lt-conda", "--project", proj.root)     # now the channel's own refusal
    assert "not built" not in err


def test_lock_and_install_401_403_5xx_name_credentials_and_the_server(served, tmp_path, capsys, monkeypatch):
    proj, srv = served
    lf.build_env(proj.root, "lt-conda", proj.channel, tmp_path / "work")
    host = srv.url.split("//")[1]
    err = _err(capsys, "lock", "lt-conda", "--project", proj.root)
    assert f"{host} requires credentials (401 Unauthorized)" in err
    assert "DEEPEP_ENV_CHANNEL_TOKEN" in err and "RATTLER_AUTH_FILE" in err and "build" not in err
    monkeypatch.setenv("DEEPEP_ENV_CHANNEL_TOKEN", "not-the-token")
    err = _err(capsys, "lock", "lt-conda", "--project", proj.root)
    assert f"{host} refused access (403 Forbidden)" in err and "credential from env DEEPEP_ENV_CHANNEL_TOKEN" in err
    assert "not-the-token" not in err
    srv.fail = (500, "disk full on the channel host")
    err = _err(capsys, "lock", "lt-conda", "--project", proj.root)
    assert "failed (500 Internal Server Error): disk full on the channel host" in err and "retry later" in err
    srv.fail = None
    monkeypatch.setenv("DEEPEP_ENV_CHANNEL_TOKEN", TOKEN)                 # the step the 401 named
    rc, _, err = cli_in_process(capsys, "lock", "lt-conda", "--project", proj.root)
    assert rc == 0, err
    # install: the lock's conda-forge packages are on the served channel
    pfx = tmp_path / "pfx"
    monkeypatch.delenv("DEEPEP_ENV_CHANNEL_TOKEN")
    err = _err(capsys, "install", "lt-conda", "--project", proj.root, "--prefix", pfx)
    assert "requires credentials (401 Unauthorized)" in err and "DEEPEP_ENV_CHANNEL_TOKEN" in err
    assert "prereqs" not in err and "rebuil" not in err and "fetch" not in err
    srv.fail = (503, "maintenance until 10:00")
    err = _err(capsys, "install", "lt-conda", "--project", proj.root, "--prefix", pfx)
    assert "failed (503 Service Unavailable): maintenance until 10:00" in err and "retry later" in err
    srv.fail = None
    monkeypatch.setenv("DEEPEP_ENV_CHANNEL_TOKEN", TOKEN)
    rc, _, err = cli_in_process(capsys, "install", "lt-conda", "--project", proj.root, "--prefix", pfx)
    assert rc == 0, err
