"""No channel secret in any file written or any line printed.

One session-wide token and password (publish_fixtures.TOKEN/PASSWORD; DEEPEP_ENV_TEST_TOKEN
chooses the token) drive every publish test. This module runs the success and failure paths once
more with those secrets set — publish (text and --json), wrong credentials, server down,
conflict, URL with an embedded secret, lock + install — then walks every file under the test
session's base temp dir (this module's files, nginx's directory, and those of every test that ran
before) and every captured line, looking for the token, the password and their Basic encoding.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from publish_fixtures import (
    PASSWORD,
    TOKEN,
    USER,
    Captured,
    free_port,
    no_creds_env,
    one_error_line,
    secret_strings,
)


def _files_with_secret(root, needles):
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if any(n in data for n in needles):
                hits.append(path)
    return hits


def test_no_secret_in_files_or_output(nginx, pkgs, tmp_path, tmp_path_factory, no_creds, capfd):
    captured = Captured(tmp_path / "captured")
    bearer = no_creds_env(DEEPEP_ENV_CHANNEL_TOKEN=TOKEN)
    basic = no_creds_env(DEEPEP_ENV_CHANNEL_USER=USER, DEEPEP_ENV_CHANNEL_PASSWORD=PASSWORD)
    # the token offered where it is wrong must not be echoed either
    wrong = no_creds_env(DEEPEP_ENV_CHANNEL_USER=USER, DEEPEP_ENV_CHANNEL_PASSWORD=TOKEN)
    b_url, p_url = nginx.url("bearer", "chan"), nginx.url("basic", "chan")
    state = tmp_path / "state"
    results = [
        captured.cli("publish", "--to", b_url, "--package", pkgs.linux, "--package", pkgs.noarch, env=bearer),
        captured.cli("publish", "--to", b_url, "--package", pkgs.linux, "--json", env=bearer),
        captured.cli("publish", "--to", b_url, "--package", pkgs.linux_other, env=bearer),  # conflict
        captured.cli("publish", "--to", p_url, "--package", pkgs.big, "--json", env=basic),
        captured.cli("publish", "--to", p_url, "--package", pkgs.linux, env=wrong),  # 401
        captured.cli("publish", "--to", f"http://127.0.0.1:{free_port()}/c", "--package", pkgs.linux, env=bearer),
        captured.cli("publish", "--to", f"http://{USER}:{TOKEN}@127.0.0.1:{nginx.port}/basic/c",
                     "--package", pkgs.linux, env=bearer),
        captured.cli("publish", "--to", f"http://127.0.0.1:{nginx.port}/t/{TOKEN}/c", "--package", pkgs.linux,
                     env=bearer),
        captured.cli("publish", "envname", "--to", b_url, "--state", state, env=bearer),  # no manifest
        captured.cli("publish", "--to", tmp_path / "dirchan", "--package", pkgs.linux, env=bearer),
    ]
    assert [r.returncode == 0 for r in results] == [True, True, False, True, False, False, False, False, False,
                                                    True]
    proc, out = captured.solve_install(b_url, "tinypkg", tmp_path / "prefix", tmp_path / "pixi.lock",
                                       tmp_path / "cache", env=bearer)
    assert out.get("ok"), proc.stdout + proc.stderr
    proc, out = captured.solve_install(p_url, "bigpkg", tmp_path / "prefix-b", tmp_path / "pixi-b.lock",
                                       tmp_path / "cache-b", env=basic)
    assert out.get("ok"), proc.stdout + proc.stderr
    # A Python-level log line through the library, with redaction installed as the CLI does.
    log = subprocess.run([sys.executable, "-c", (
        "import logging, sys; from deepep_env.base.channels.auth import install_log_redaction;"
        "logging.basicConfig(level=logging.DEBUG, stream=sys.stderr); install_log_redaction();"
        "logging.getLogger('deepep_env.publish').debug('token is %s', sys.argv[1])"), TOKEN],
        env=bearer, capture_output=True, text=True)
    captured._keep("log", log)
    assert "token is ***" in log.stderr

    needles = [s.encode() for s in secret_strings()]
    printed = "".join(p.read_text().split("\n", 1)[1] for p in captured.runs)  # minus the "$ cmd" line
    out_err = capfd.readouterr()
    assert not any(s in printed + out_err.out + out_err.err for s in secret_strings()), \
        "a secret was printed (see the captured/ files of this test)"
    # every file this module wrote, nginx's own directory included (it stores only salted hashes)
    base = tmp_path_factory.getbasetemp()
    hits = _files_with_secret(base, needles)
    assert not hits, "secret found in: " + ", ".join(str(p.relative_to(base)) for p in hits)
    # the lock names the channel, bare
    lock = (tmp_path / "pixi.lock").read_text()
    assert b_url in lock
    assert json.loads(results[1].stdout)["target"] == b_url


# (id, --to with the session's token in it; the host is never contacted: the URL is refused first)
SECRET_TARGETS = [
    ("query-token", f"https://conda.team.example/ch?token={TOKEN}"),
    ("query-api_key", f"https://conda.team.example/ch?api_key={TOKEN}"),
    ("s3-presigned", f"https://bucket.s3.amazonaws.com/ch?X-Amz-Date=20261124T000000Z&X-Amz-Signature={TOKEN}"),
    ("azure-sas", f"https://acct.blob.core.windows.net/ch?sv=2024-01-01&sig={TOKEN}"),
    ("token-as-user", f"https://{TOKEN}@conda.team.example/ch"),
    ("user-password", f"https://{USER}:{TOKEN}@conda.team.example/ch"),
    ("conda-token", f"https://conda.anaconda.org/t/{TOKEN}/team"),
    ("file-query", "file:///srv/channel?token=" + TOKEN),
]


@pytest.mark.parametrize("target", SECRET_TARGETS, ids=[t[0] for t in SECRET_TARGETS])
def test_publish_to_url_with_secret_is_refused_without_echo(target, pkgs, tmp_path, no_creds, captured):
    """`publish --to URL` with a credential in the URL (channels.auth.url_secret): exit 2, one line
    naming --to, the secret nowhere — not printed (text or --json), not in any file written."""
    from deepep_env.base.channels.auth import url_secret

    _, url = target
    work, state = tmp_path / "work", tmp_path / "state"
    work.mkdir()
    for extra in ((), ("--json",)):
        res = captured.cli("publish", "--to", url, "--package", str(pkgs.linux), "--state", str(state), *extra,
                           cwd=work)
        line = one_error_line(res)
        assert res.returncode == 2 and res.stdout == ""
        assert line.startswith("deepep-env: error: --to: the URL ")
        assert f"carries {url_secret(url).carries.split('<')[0]}" in line
        assert not any(s in res.stdout + res.stderr for s in secret_strings())
    hits = _files_with_secret(tmp_path, [s.encode() for s in secret_strings()])
    assert not hits, hits
    # nothing published or indexed anywhere: refused before any target was touched
    assert not state.exists() and list(work.iterdir()) == []
