"""`deepep-env publish --to s3://bucket/prefix` against moto's S3 server on 127.0.0.1, and the
Signature V4 signer against AWS's published example."""
from __future__ import annotations

import datetime as dt
import json
import secrets
import subprocess
import urllib.request

import pytest

from publish_fixtures import (
    Captured,
    free_port,
    moto_command,
    no_creds_env,
    one_error_line,
    stop,
    wait_port,
)

from deepep_env.publish.s3 import EMPTY_SHA256, sign_v4

S3_SECRET = f"dpep-s3-{secrets.token_hex(12)}"


def test_sigv4_matches_aws_documented_example():
    """AWS S3 API reference, "Signature Calculations for the Authorization Header", example
    "GET Object" (bucket examplebucket, key test.txt, Range bytes=0-9, 2013-05-24)."""
    headers = sign_v4(
        "GET", "https://examplebucket.s3.amazonaws.com/test.txt", {"Range": "bytes=0-9"}, EMPTY_SHA256,
        access_key="AKIAIOSFODNN7EXAMPLE", secret_key="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        region="us-east-1", now=dt.datetime(2013, 5, 24, tzinfo=dt.timezone.utc),
    )
    assert headers["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    cmd = moto_command()
    if cmd is None:
        pytest.skip("moto is not installed (pip install 'moto[server]'): S3 publishing untested here")
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    proc = subprocess.Popen([*cmd, "-H", "127.0.0.1", "-p", str(port)], stdout=open(log, "wb"),
                            stderr=subprocess.STDOUT)
    try:
        wait_port(port, proc, "moto_server", log)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


@pytest.fixture
def bucket(moto, request):
    name = "team-" + secrets.token_hex(6)
    urllib.request.urlopen(urllib.request.Request(f"{moto}/{name}", method="PUT")).read()
    return name


def s3_env(moto, **extra):
    return no_creds_env(AWS_ACCESS_KEY_ID="AKIDTESTING", AWS_SECRET_ACCESS_KEY=S3_SECRET,
                        DEEPEP_ENV_S3_ENDPOINT_URL=moto, **extra)


def get(moto, bucket, key):
    """A signed GET (moto refuses anonymous reads of private objects)."""
    url = f"{moto}/{bucket}/{key}"
    headers = sign_v4("GET", url, {}, EMPTY_SHA256, access_key="AKIDTESTING", secret_key=S3_SECRET,
                      region="us-east-1", now=dt.datetime.now(dt.timezone.utc))
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as resp:
        return resp.read()


def test_publish_to_s3_idempotent_and_refuses_overwrite(moto, bucket, pkgs, no_creds, captured: Captured):
    url = f"s3://{bucket}/chan"
    proc = captured.cli("publish", "--to", url, "--package", pkgs.linux, "--package", pkgs.noarch, "--json",
                        env=s3_env(moto))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [p["status"] for p in report["packages"]] == ["uploaded", "uploaded"]
    linux = json.loads(get(moto, bucket, "chan/linux-64/repodata.json"))
    assert pkgs.linux.name in linux["packages.conda"]
    assert get(moto, bucket, f"chan/linux-64/{pkgs.linux.name}") == pkgs.linux.read_bytes()

    again = captured.cli("publish", "--to", url, "--package", pkgs.linux, "--json", env=s3_env(moto))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["packages"][0]["status"] == "already-present"

    clash = captured.cli("publish", "--to", url, "--package", pkgs.linux_other, env=s3_env(moto))
    assert "refusing to overwrite" in one_error_line(clash)
    assert get(moto, bucket, f"chan/linux-64/{pkgs.linux.name}") == pkgs.linux.read_bytes()
    assert S3_SECRET not in proc.stdout + proc.stderr + again.stdout + clash.stderr


def test_install_from_s3_with_rattler_auth_file(moto, bucket, pkgs, tmp_path, no_creds, captured: Captured):
    url = f"s3://{bucket}/chan"
    assert captured.cli("publish", "--to", url, "--package", pkgs.linux, env=s3_env(moto)).returncode == 0
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({f"s3://{bucket}": {"S3Credentials": {
        "access_key_id": "AKIDTESTING", "secret_access_key": S3_SECRET, "session_token": None}}}))
    env = no_creds_env(RATTLER_AUTH_FILE=str(auth), DEEPEP_ENV_S3_ENDPOINT_URL=moto)
    try:
        proc, out = captured.solve_install(url, "tinypkg", tmp_path / "prefix", tmp_path / "pixi.lock",
                                           tmp_path / "cache", env=env)
    finally:
        auth.unlink()
    assert out.get("ok"), proc.stdout + proc.stderr
    assert (tmp_path / "prefix" / "share" / "tinypkg" / "content.txt").exists()
    leaked = [p for p in tmp_path.rglob("*") if p.is_file() and S3_SECRET.encode() in p.read_bytes()]
    assert not leaked, "the S3 secret was written to " + ", ".join(p.name for p in leaked)


def test_missing_bucket_and_missing_credentials(moto, pkgs, no_creds, captured: Captured):
    proc = captured.cli("publish", "--to", "s3://no-such-bucket-here/chan", "--package", pkgs.linux,
                        env=s3_env(moto))
    assert "does not exist" in one_error_line(proc)
    proc = captured.cli("publish", "--to", "s3://whatever/chan", "--package", pkgs.linux,
                        env=no_creds_env(DEEPEP_ENV_S3_ENDPOINT_URL=moto))
    assert "no S3 credentials" in one_error_line(proc)


def test_s3_endpoint_down(pkgs, no_creds, captured: Captured):
    port = free_port()
    proc = captured.cli("publish", "--to", "s3://bucket/chan", "--package", pkgs.linux,
                        env=s3_env(f"http://127.0.0.1:{port}"), timeout=60)
    assert "connection refused" in one_error_line(proc)
