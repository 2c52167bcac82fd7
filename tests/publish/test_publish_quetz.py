"""`deepep-env publish --to quetz+http://…/CHANNEL` against a real quetz-server on 127.0.0.1.

quetz-server 0.10.4 runs from its own venv under /tmp with pinned dependencies
(tests/fixtures/quetz-requirements.txt), which `.ci/setup-quetz.sh` builds before the tests (CI runs
it; the tests install nothing). Without that venv the tests skip and say so.
"""
from __future__ import annotations

import json
import re
import subprocess
import urllib.request

import pytest

from publish_fixtures import (
    QUETZ_SETUP,
    Captured,
    free_port,
    no_creds_env,
    one_error_line,
    quetz_venv,
    stop,
    wait_port,
)

CONFIG = """\
[github]
client_id = "unused"
client_secret = "unused"

[sqlalchemy]
database_url = "sqlite:///{dir}/quetz.sqlite"

[session]
secret = "{session}"
https_only = false

[logging]
level = "WARNING"

[local_store]
redirect_enabled = false

[users]
# --dev creates these four users and an API key for one of them; make them all server owners
# so that key may create a channel.
admins = ["dummy:alice", "dummy:bob", "dummy:carol", "dummy:dave"]
"""


@pytest.fixture(scope="module")
def quetz(tmp_path_factory):
    venv = quetz_venv()
    if venv is None:
        pytest.skip(f"quetz-server with its pinned dependencies is not set up (run {QUETZ_SETUP}, which needs "
                    "PyPI; or DEEPEP_ENV_SKIP_QUETZ=1): quetz publishing untested here")
    base = tmp_path_factory.mktemp("quetz-server")  # the server's own files: its DB holds the key
    import secrets

    conf = base / "config.toml"
    conf.write_text(CONFIG.format(dir=base / "deploy", session=secrets.token_hex(16)))
    port = free_port()
    log = base / "quetz.log"
    proc = subprocess.Popen([str(venv / "bin" / "quetz"), "run", str(base / "deploy"), "--copy-conf", str(conf),
                             "--dev", "--port", str(port)], stdout=open(log, "wb"), stderr=subprocess.STDOUT,
                            cwd=base, start_new_session=True)  # quetz writes quetz.log into its working directory
    try:
        wait_port(port, proc, "quetz", log, timeout=120)
        match = re.search(r'Test API key created for user "\w+": ([0-9a-f]+)', log.read_text())
        assert match, "quetz --dev printed no API key"
        key = match.group(1)
        url = f"http://127.0.0.1:{port}"
        req = urllib.request.Request(f"{url}/api/channels", method="POST",
                                     data=json.dumps({"name": "deepep", "private": True}).encode(),
                                     headers={"X-API-Key": key, "Content-Type": "application/json"})
        urllib.request.urlopen(req).read()
        yield url, key
    finally:
        stop(proc, group=True)


def test_publish_to_quetz_then_install(quetz, pkgs, tmp_path, no_creds, captured: Captured):
    url, key = quetz
    env = no_creds_env(DEEPEP_ENV_CHANNEL_TOKEN=key)
    target = f"quetz+{url}/deepep"
    proc = captured.cli("publish", "--to", target, "--package", pkgs.linux, "--package", pkgs.noarch, "--json",
                        env=env)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [p["status"] for p in report["packages"]] == ["uploaded", "uploaded"]
    assert report["channel_url"] == f"{url}/get/deepep"

    again = captured.cli("publish", "--to", target, "--package", pkgs.linux, "--json", env=env)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["packages"][0]["status"] == "already-present"

    clash = captured.cli("publish", "--to", target, "--package", pkgs.linux_other, env=env)
    assert "refusing to overwrite" in one_error_line(clash)

    # a private quetz channel, read with the same token (sent as X-API-Key)
    proc, out = captured.solve_install(f"{url}/get/deepep", "tinypkg", tmp_path / "prefix", tmp_path / "pixi.lock",
                                       tmp_path / "cache", env=env)
    assert out.get("ok"), proc.stdout + proc.stderr
    # ... and with rattler's CondaToken entry (sent as /t/<key>/), never written to the lock
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"127.0.0.1": {"CondaToken": key}}))
    proc, out = captured.solve_install(f"{url}/get/deepep", "tinypkg", tmp_path / "prefix2", tmp_path / "pixi2.lock",
                                       tmp_path / "cache2", env=no_creds_env(RATTLER_AUTH_FILE=str(auth)))
    assert out.get("ok"), proc.stdout + proc.stderr
    auth.unlink()
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), f"API key written to {path.relative_to(tmp_path)}"


def test_quetz_wrong_key_one_line(quetz, pkgs, no_creds, captured: Captured):
    url, key = quetz
    proc = captured.cli("publish", "--to", f"quetz+{url}/deepep", "--package", pkgs.big,
                        env=no_creds_env(DEEPEP_ENV_CHANNEL_TOKEN="0" * 32))
    line = one_error_line(proc)
    assert "401" in line or "403" in line or "unauthorized" in line.lower()
    assert "0" * 32 not in line
