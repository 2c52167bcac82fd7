"""Publish to a real private channel — nginx from Debian with WebDAV PUT, basic auth and token
auth on 127.0.0.1 — then solve, lock and install from it over HTTP with credentials.

nginx missing → these tests FAIL (set DEEPEP_ENV_SKIP_NGINX=1 to skip them instead).
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from publish_fixtures import (
    FILE_PASSWORD,
    FILE_USER,
    FIXTURES,
    PASSWORD,
    TOKEN,
    USER,
    Captured,
    free_port,
    no_creds_env,
    one_error_line,
    stop,
    wait_port,
)


@pytest.fixture
def chan(request):
    return request.node.name.replace("[", "-").replace("]", "")


def bearer_env(**extra):
    return no_creds_env(DEEPEP_ENV_CHANNEL_TOKEN=TOKEN, **extra)


def basic_env(**extra):
    return no_creds_env(DEEPEP_ENV_CHANNEL_USER=USER, DEEPEP_ENV_CHANNEL_PASSWORD=PASSWORD, **extra)


def listed(nginx, area, chan, subdir):
    path = nginx.path(area, chan) / subdir / "repodata.json"
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    return {**data.get("packages", {}), **data.get("packages.conda", {})}


@pytest.mark.parametrize("area,env_of", [("bearer", bearer_env), ("basic", basic_env)])
def test_publish_then_lock_and_install_over_http(nginx, chan, pkgs, tmp_path, no_creds, captured: Captured,
                                                 area, env_of):
    url = nginx.url(area, chan)
    proc = captured.cli("publish", "--to", url, "--package", pkgs.linux, "--package", pkgs.noarch, "--json",
                        env=env_of())
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [p["status"] for p in report["packages"]] == ["uploaded", "uploaded"]
    assert report["indexed"] == ["linux-64", "noarch"]
    assert pkgs.linux.name in listed(nginx, area, chan, "linux-64")
    assert pkgs.noarch.name in listed(nginx, area, chan, "noarch")

    # lock + install read the private channel with the same credentials
    proc, out = captured.solve_install(url, "tinypkg", tmp_path / "prefix", tmp_path / "pixi.lock",
                                       tmp_path / "cache", env=env_of())
    assert out.get("ok"), proc.stdout + proc.stderr
    assert out["packages"] == ["tinypkg=1.0.0=" + pkgs.linux.name.rsplit("-", 1)[1].removesuffix(".conda")]
    assert (tmp_path / "prefix" / "share" / "tinypkg" / "content.txt").read_text().strip() == "first"
    lock_text = (tmp_path / "pixi.lock").read_text()
    assert url in lock_text
    assert TOKEN not in lock_text and PASSWORD not in lock_text

    # ... and without credentials the channel is really private
    proc, out = captured.solve_install(url, "tinypkg", tmp_path / "prefix2", tmp_path / "pixi2.lock",
                                       tmp_path / "cache2", env=no_creds_env())
    assert not out.get("ok") and "401" in out.get("error", "")


def test_rattler_auth_file_is_used_for_publish_and_install(nginx, chan, pkgs, tmp_path, no_creds,
                                                          captured: Captured):
    """Credentials from rattler's auth store (RATTLER_AUTH_FILE), keyed by the bare host."""
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"127.0.0.1": {"BasicHTTP": {"username": FILE_USER, "password": FILE_PASSWORD}}}))
    try:
        env = no_creds_env(RATTLER_AUTH_FILE=str(auth))
        url = nginx.url("basic", chan)
        proc = captured.cli("publish", "--to", url, "--package", pkgs.linux, env=env)
        assert proc.returncode == 0, proc.stderr
        proc, out = captured.solve_install(url, "tinypkg", tmp_path / "prefix", tmp_path / "pixi.lock",
                                           tmp_path / "cache", env=env)
        assert out.get("ok"), proc.stdout + proc.stderr
    finally:
        auth.unlink()
    leaked = [p for p in tmp_path.rglob("*") if p.is_file() and FILE_PASSWORD.encode() in p.read_bytes()]
    assert not leaked, "the auth file's password was written to " + ", ".join(p.name for p in leaked)


def test_publish_again_is_a_no_op(nginx, chan, pkgs, no_creds, captured: Captured):
    url = nginx.url("bearer", chan)
    assert captured.cli("publish", "--to", url, "--package", pkgs.linux, env=bearer_env()).returncode == 0
    index = nginx.path("bearer", chan) / "linux-64" / "repodata.json"
    before = (index.stat().st_mtime_ns, index.read_bytes())
    proc = captured.cli("publish", "--to", url, "--package", pkgs.linux, "--json", env=bearer_env())
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["packages"][0]["status"] == "already-present" and report["changed"] is False
    assert (index.stat().st_mtime_ns, index.read_bytes()) == before


def test_different_file_same_name_is_refused(nginx, chan, pkgs, no_creds, captured: Captured):
    url = nginx.url("basic", chan)
    assert captured.cli("publish", "--to", url, "--package", pkgs.linux, env=basic_env()).returncode == 0
    on_server = nginx.path("basic", chan) / "linux-64" / pkgs.linux.name
    original = on_server.read_bytes()
    proc = captured.cli("publish", "--to", url, "--package", pkgs.linux_other, env=basic_env())
    line = one_error_line(proc)
    assert "refusing to overwrite" in line and pkgs.linux.name in line
    assert on_server.read_bytes() == original


@pytest.mark.parametrize("area,env", [
    ("bearer", {"DEEPEP_ENV_CHANNEL_TOKEN": "not-the-token"}),
    ("basic", {"DEEPEP_ENV_CHANNEL_USER": USER, "DEEPEP_ENV_CHANNEL_PASSWORD": "wrong-password"}),
])
def test_wrong_credentials_one_line(nginx, chan, pkgs, no_creds, captured: Captured, area, env):
    proc = captured.cli("publish", "--to", nginx.url(area, chan), "--package", pkgs.linux, env=no_creds_env(**env))
    line = one_error_line(proc)
    assert "rejected the credentials (401" in line and "env DEEPEP_ENV_CHANNEL_" in line
    assert "not-the-token" not in line and "wrong-password" not in line
    assert not nginx.path(area, chan).exists()


def test_missing_credentials_one_line(nginx, chan, pkgs, no_creds, captured: Captured):
    proc = captured.cli("publish", "--to", nginx.url("basic", chan), "--package", pkgs.linux)
    line = one_error_line(proc)
    assert "requires credentials (401" in line and "DEEPEP_ENV_CHANNEL_TOKEN" in line


def test_server_down_one_line(pkgs, no_creds, captured: Captured):
    port = free_port()  # nothing listens there
    proc = captured.cli("publish", "--to", f"http://127.0.0.1:{port}/chan", "--package", pkgs.linux,
                        env=bearer_env(), timeout=60)
    line = one_error_line(proc)
    assert f"cannot connect to 127.0.0.1:{port} (connection refused)" in line


def test_dropped_connection_never_lists_the_package(nginx, chan, pkgs, tmp_path, no_creds, captured: Captured):
    proxy_port = free_port()
    proxy = subprocess.Popen([sys.executable, str(FIXTURES / "cut_proxy.py"), str(proxy_port), str(nginx.port),
                              "300000"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(proxy_port, proxy, "cut proxy")
        via_proxy = f"http://127.0.0.1:{proxy_port}/basic/{chan}"
        proc = captured.cli("publish", "--to", via_proxy, "--package", pkgs.big, "--package", pkgs.linux,
                            env=basic_env())
    finally:
        stop(proxy)
    line = one_error_line(proc)
    assert "dropped" in line and "nothing was indexed" in line
    assert listed(nginx, "basic", chan, "linux-64") == {}
    partial = nginx.path("basic", chan) / "linux-64" / pkgs.big.name
    assert not partial.exists() or partial.stat().st_size < pkgs.big.stat().st_size

    # the same publish, connection intact: both listed, installable
    url = nginx.url("basic", chan)
    proc = captured.cli("publish", "--to", url, "--package", pkgs.big, "--package", pkgs.linux, env=basic_env())
    assert proc.returncode == 0, proc.stderr
    assert {pkgs.big.name, pkgs.linux.name} <= set(listed(nginx, "basic", chan, "linux-64"))
    proc, out = captured.solve_install(url, "bigpkg", tmp_path / "prefix", tmp_path / "pixi.lock",
                                       tmp_path / "cache", env=basic_env())
    assert out.get("ok"), proc.stdout + proc.stderr
    assert (tmp_path / "prefix" / "share" / "bigpkg" / "blob.bin").stat().st_size == 2_000_000


def test_stale_derived_index_is_removed(nginx, chan, pkgs, tmp_path, no_creds, captured: Captured):
    """An old repodata.json.zst / shard index would hide the new repodata.json from rattler."""
    root = nginx.path("open", chan)
    (root / "linux-64").mkdir(parents=True)
    (root / "linux-64" / "repodata.json.zst").write_bytes(b"stale")
    (root / "linux-64" / "repodata_shards.msgpack.zst").write_bytes(b"stale")
    url = nginx.url("open", chan)
    proc = captured.cli("publish", "--to", url, "--package", pkgs.linux, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert sorted(report["removed_stale_index_files"]) == [
        "linux-64/repodata.json.zst", "linux-64/repodata_shards.msgpack.zst"]
    assert not (root / "linux-64" / "repodata.json.zst").exists()
    proc, out = captured.solve_install(url, "tinypkg", tmp_path / "prefix", tmp_path / "pixi.lock",
                                       tmp_path / "cache")
    assert out.get("ok"), proc.stdout + proc.stderr


def test_existing_packages_of_others_stay_listed(nginx, chan, pkgs, no_creds, captured: Captured):
    url = nginx.url("bearer", chan)
    assert captured.cli("publish", "--to", url, "--package", pkgs.linux, env=bearer_env()).returncode == 0
    assert captured.cli("publish", "--to", url, "--package", pkgs.big, env=bearer_env()).returncode == 0
    assert {pkgs.linux.name, pkgs.big.name} <= set(listed(nginx, "bearer", chan, "linux-64"))


def test_artifactory_mode_uploads_packages_and_leaves_indexing_to_the_server(nginx, chan, pkgs, no_creds,
                                                                             captured: Captured):
    """artifactory+https:// → the same PUTs, no repodata.json written (Artifactory indexes itself)."""
    url = nginx.url("bearer", chan)
    proc = captured.cli("publish", "--to", "artifactory+" + url, "--package", pkgs.linux, "--json", env=bearer_env())
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["kind"] == "artifactory" and report["channel_url"] == url and report["indexed"] == []
    assert (nginx.path("bearer", chan) / "linux-64" / pkgs.linux.name).read_bytes() == pkgs.linux.read_bytes()
    assert not (nginx.path("bearer", chan) / "linux-64" / "repodata.json").exists()
