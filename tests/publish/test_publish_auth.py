"""deepep_env.base.channels.auth: where credentials come from, where they are sent, and redaction."""
from __future__ import annotations

import base64
import hashlib
import json
import logging
import subprocess
import sys

import pytest

from publish_fixtures import FIXTURES, free_port, no_creds_env, stop, wait_port

from deepep_env.base.channels import auth
from deepep_env.base.errors import UserError

SECRET = "s3kr1t-VALUE-42"
OTHER = "0ther-S3CRET-7"


@pytest.fixture(autouse=True)
def _remove_credential_files(tmp_path):
    """Credential files are inputs these tests must write; none outlives its test, so a grep of
    everything the test session left behind finds no secret."""
    yield
    for name in ("auth.json", "credentials.json", ".netrc"):
        for path in tmp_path.rglob(name):
            path.unlink()


def _sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


# --------------------------------------------------------------------------------------------- redact


def test_redact_env_secrets_and_their_basic_encoding(no_creds, monkeypatch):
    monkeypatch.setenv(auth.ENV_TOKEN, SECRET)
    monkeypatch.setenv(auth.ENV_USER, "me")
    monkeypatch.setenv(auth.ENV_PASSWORD, OTHER)
    basic = base64.b64encode(f"me:{OTHER}".encode()).decode()
    text = f"token={SECRET} pw={OTHER} hdr=Basic {basic} user=me"
    out = auth.redact(text)
    assert SECRET not in out and OTHER not in out and basic not in out
    assert "user=me" in out  # a user name is not a secret


def test_redact_auth_file_entries(no_creds, monkeypatch, tmp_path):
    path = tmp_path / "auth.json"
    path.write_text(json.dumps({
        "a.example": {"BearerToken": SECRET},
        "b.example": {"BasicHTTP": {"username": "u", "password": OTHER}},
        "c.example": {"CondaToken": "conda-tok-123"},
        "s3://bkt": {"S3Credentials": {"access_key_id": "AKID", "secret_access_key": "s3-secret-xyz",
                                       "session_token": "sess-tok-abc"}},
    }))
    monkeypatch.setenv("RATTLER_AUTH_FILE", str(path))
    out = auth.redact(f"{SECRET} {OTHER} conda-tok-123 s3-secret-xyz sess-tok-abc AKID")
    for s in (SECRET, OTHER, "conda-tok-123", "s3-secret-xyz", "sess-tok-abc"):
        assert s not in out
    assert "AKID" in out  # an access key id identifies, it does not authenticate


def test_redact_shapes_without_configuration(no_creds):
    out = auth.redact("GET https://u:pa55@host/x https://host/t/tk-123/chan/ Authorization: Bearer abc.def "
                      "x-api-key: zzz")
    assert "pa55" not in out and "tk-123" not in out and "abc.def" not in out and "zzz" not in out
    assert "https://u:***@host/x" in out and "/t/***/chan" in out


def test_redact_data_and_log_filter(no_creds, monkeypatch):
    monkeypatch.setenv(auth.ENV_TOKEN, SECRET)
    assert auth.redact_data({"a": [f"x{SECRET}y", 3], SECRET: None}) == {"a": ["x***y", 3], "***": None}
    record = logging.LogRecord("t", logging.INFO, __file__, 1, "sending %s to %s", (SECRET, "host"), None)
    auth.RedactingFilter().filter(record)
    assert record.getMessage() == "sending *** to host"


def test_credentials_repr_never_shows_the_secret():
    cred = auth.Credentials("basic", "env X", SECRET, username="me")
    assert SECRET not in repr(cred) and SECRET not in str(cred) and SECRET not in f"{cred}"


def test_url_with_secret_is_refused(no_creds):
    with pytest.raises(UserError) as err:
        auth.check_url_has_no_secret(f"https://me:{SECRET}@host/chan")
    assert SECRET not in str(err.value)
    with pytest.raises(UserError) as err:
        auth.check_url_has_no_secret(f"https://host/t/{SECRET}/chan")
    assert SECRET not in str(err.value)
    auth.check_url_has_no_secret("https://host/chan")


# --------------------------------------------------------------------------------------------- lookup


def test_env_token_scoped_to_the_named_channels(no_creds, monkeypatch):
    monkeypatch.setenv(auth.ENV_TOKEN, SECRET)
    cred = auth.credentials_for("https://chan.team.example/x", ["https://chan.team.example/x"])
    assert cred.kind == "bearer" and cred.source == f"env {auth.ENV_TOKEN}"
    assert cred.http_headers()["Authorization"] == f"Bearer {SECRET}"
    # never to a public host, even when a spec lists it beside the private channel
    assert auth.credentials_for("https://conda.anaconda.org/conda-forge",
                                ["https://conda.anaconda.org/conda-forge", "https://chan.team.example/x"]) is None
    monkeypatch.setenv(auth.ENV_HOSTS, "other.example")
    assert auth.credentials_for("https://chan.team.example/x") is None
    assert auth.credentials_for("https://other.example/y").kind == "bearer"


def test_env_user_password(no_creds, monkeypatch):
    monkeypatch.setenv(auth.ENV_USER, "me")
    monkeypatch.setenv(auth.ENV_PASSWORD, SECRET)
    cred = auth.credentials_for("http://127.0.0.1:8080/c")
    assert cred.kind == "basic" and cred.username == "me"
    assert cred.http_headers() == {"Authorization": "Basic " + base64.b64encode(f"me:{SECRET}".encode()).decode()}


def test_auth_file_lookup_matches_rattler(no_creds, monkeypatch, tmp_path):
    """Keys as rattler_networking's AuthenticationStorage::get_by_url: bare host (no port), then
    *.parent-domains; s3 URLs also by URL and each parent path."""
    path = tmp_path / "auth.json"
    path.write_text(json.dumps({
        "127.0.0.1:9999": {"BearerToken": "with-port-is-ignored"},
        "127.0.0.1": {"BasicHTTP": {"username": "u", "password": SECRET}},
        "*.team.example": {"BearerToken": OTHER},
        "s3://bkt/chan": {"S3Credentials": {"access_key_id": "K", "secret_access_key": "S", "session_token": None}},
    }))
    monkeypatch.setenv("RATTLER_AUTH_FILE", str(path))
    cred = auth.credentials_for("http://127.0.0.1:9999/chan")
    assert (cred.kind, cred.secret, cred.source) == ("basic", SECRET, "RATTLER_AUTH_FILE")
    assert auth.credentials_for("https://repo.team.example/chan").secret == OTHER
    assert auth.credentials_for("s3://bkt/chan/linux-64/repodata.json").kind == "s3"
    assert auth.credentials_for("https://elsewhere.example/") is None
    # the environment wins over the file for a host in scope
    monkeypatch.setenv(auth.ENV_TOKEN, "env-wins")
    assert auth.credentials_for("http://127.0.0.1:9999/chan").secret == "env-wins"


def test_default_credentials_file_and_netrc(no_creds, monkeypatch, tmp_path):
    home = tmp_path / "home2"
    (home / ".rattler").mkdir(parents=True)
    (home / ".rattler" / "credentials.json").write_text(json.dumps({"a.example": {"BearerToken": SECRET}}))
    (home / ".netrc").write_text(f"machine b.example login me password {OTHER}\n")
    (home / ".netrc").chmod(0o600)
    monkeypatch.setenv("HOME", str(home))
    assert auth.credentials_for("https://a.example/c").source == "~/.rattler/credentials.json"
    cred = auth.credentials_for("https://b.example/c")
    assert (cred.kind, cred.username, cred.source) == ("basic", "me", "netrc")
    assert OTHER not in auth.redact(f"x {OTHER} y")  # learnt at lookup time, scrubbed from then on


def test_malformed_auth_file_is_one_line(no_creds, monkeypatch, tmp_path):
    path = tmp_path / "auth.json"
    path.write_text("{not json")
    monkeypatch.setenv("RATTLER_AUTH_FILE", str(path))
    with pytest.raises(UserError, match="cannot read the credentials file"):
        auth.credentials_for("https://a.example/c")


# --------------------------------------------------------------------------------------------- client


@pytest.fixture
def recorder(tmp_path):
    port = free_port()
    out = tmp_path / "requests.jsonl"
    proc = subprocess.Popen([sys.executable, str(FIXTURES / "header_recorder.py"), str(port), str(out)])
    wait_port(port, proc, "header recorder")
    yield port, out
    stop(proc)


def _probe(port, out, tmp_path, **env):
    out.write_text("")
    url = f"http://127.0.0.1:{port}/chan"
    subprocess.run([sys.executable, str(FIXTURES / "probe_client.py"), url, str(tmp_path / "cache")],
                   env=no_creds_env(**env), timeout=120, capture_output=True)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows, "the client sent no request"
    return rows


def test_client_sends_env_token_to_channel_host_only(recorder, tmp_path, no_creds):
    port, out = recorder
    rows = _probe(port, out, tmp_path, DEEPEP_ENV_CHANNEL_TOKEN=SECRET)
    assert all(r["authorization"] == _sha(f"Bearer {SECRET}") and r["n_authorization"] == 1 for r in rows)
    assert all(r["x_api_key"] == _sha(SECRET) for r in rows)
    rows = _probe(port, out, tmp_path, DEEPEP_ENV_CHANNEL_TOKEN=SECRET, DEEPEP_ENV_CHANNEL_HOSTS="other.example")
    assert all(r["authorization"] is None for r in rows)


def test_client_reads_rattler_auth_file_and_env_overrides_it(recorder, tmp_path, no_creds):
    port, out = recorder
    path = tmp_path / "auth.json"
    path.write_text(json.dumps({"127.0.0.1": {"BasicHTTP": {"username": "u", "password": OTHER}}}))
    rows = _probe(port, out, tmp_path, RATTLER_AUTH_FILE=str(path))
    basic = "Basic " + base64.b64encode(f"u:{OTHER}".encode()).decode()
    assert all(r["authorization"] == _sha(basic) for r in rows)
    rows = _probe(port, out, tmp_path, RATTLER_AUTH_FILE=str(path), DEEPEP_ENV_CHANNEL_TOKEN=SECRET)
    assert all(r["authorization"] == _sha(f"Bearer {SECRET}") and r["n_authorization"] == 1 for r in rows)
