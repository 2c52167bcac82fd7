"""`deepep-env install`: exactly the locked packages, sha256-verified, marker last; offline and real."""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import lock_fixtures as lf
from cli_runner import cli_in_process


@pytest.fixture
def proj(lt_world, tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    return lf.project_copy(lt_world, tmp_path / "proj")


def _lock(proj, env, capsys):
    rc, _, err = cli_in_process(capsys, "lock", env, "--project", proj.root)
    assert rc == 0, err
    return proj.pixi_lock


def _pkg_file(root, name, build):
    (f,) = root.glob(f"*/{name}-[0-9]*-{build}.conda")
    return f


def test_install_then_noop(proj, capsys):
    from deepep_env.base.hashing import file_sha256
    from deepep_env.install.installer import read_marker

    lock = _lock(proj, "lt-host", capsys)
    rc, out, err = cli_in_process(capsys, "install", "lt-host", "--project", proj.root)
    assert rc == 0, err
    prefix = proj.prefix_for("lt-host")
    assert "installed 4 packages" in out and "4 sha256-verified" in out   # deepep-env is the fourth
    assert (prefix / "share/deep-ep/tests/test_intranode.py").is_file()
    assert (prefix / "lib/libnvshmem_host.so.3").is_file()
    m = read_marker(prefix)
    assert m["format"] == "deepep-env/prefix/v1" and m["env"] == "lt-host"
    assert m["platforms"] == ["nvlink"]
    assert m["python"] == {"provider": "host", "version": "3.12", "executable": sys.executable}
    assert m["spec_env"] == {"NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1"}
    assert m["lock_sha256"] == file_sha256(lock)
    assert sorted(p["name"] for p in m["packages"]) == ["deep-ep", "deepep-env", "deepep-nvshmem", "deepep-testdep"]
    # The marker names packages by the lock's URLs (the team channel), not this machine's paths.
    assert all(p["url"].startswith("https://conda.deepep-env.invalid/lt-host/") for p in m["packages"])

    rc, out, _ = cli_in_process(capsys, "install", "lt-host", "--project", proj.root)
    assert rc == 0 and "up to date" in out
    rc, out, _ = cli_in_process(capsys, "install", "lt-host", "--project", proj.root, "--json")
    assert json.loads(out)["status"] == "up-to-date"


def test_conda_python_env_records_its_interpreter(proj, capsys):
    from deepep_env.install.installer import read_marker

    _lock(proj, "lt-conda", capsys)
    rc, out, err = cli_in_process(capsys, "install", "lt-conda", "--project", proj.root, "--json")
    assert rc == 0, err
    prefix = proj.prefix_for("lt-conda")
    m = read_marker(prefix)
    assert m["python"] == {"provider": "conda", "version": "3.12", "full_version": "3.12.8",
                           "executable": str(prefix / "bin" / "python")}
    from deepep_env.formats.prefix import read_prefix_meta  # what activate/run read

    meta = read_prefix_meta(prefix, "lt-conda")
    assert meta.python_provider == "conda" and meta.python_version == "3.12"
    names = {p["name"] for p in m["packages"]}
    assert {"python", "pytorch", "nccl", "cuda-version", "deep-ep"} <= names
    # conda-meta/*.json holds exactly the locked set; our marker is conda-meta/deepep-env (no .json).
    metas = sorted(p.name for p in (prefix / "conda-meta").glob("*.json"))
    assert len(metas) == len(m["packages"]) and (prefix / "conda-meta" / "deepep-env").is_file()


def test_corrupt_package_in_channel_is_refused(proj, capsys, lt_world):
    from deepep_env.install.installer import read_marker

    _lock(proj, "lt-host", capsys)
    lf.corrupt(_pkg_file(proj.channel, "deep-ep", lt_world.builds["lt-host"]["deep-ep"]))
    rc, out, err = cli_in_process(capsys, "install", "lt-host", "--project", proj.root)
    assert rc == 2
    line = err.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in err
    assert "deep-ep 1.2.1" in line and "sha256" in line and "refusing to install" in line
    assert read_marker(proj.prefix_for("lt-host")) is None


def test_tampered_lock_is_refused_and_the_working_prefix_is_left_exactly_as_it_was(proj, capsys):
    from deepep_env.install.installer import read_marker

    lock = _lock(proj, "lt-host", capsys)
    assert cli_in_process(capsys, "install", "lt-host", "--project", proj.root)[0] == 0
    prefix = proj.prefix_for("lt-host")
    before = read_marker(prefix)
    assert before is not None
    tree_before = sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*"))
    # Someone edits the sha256 of deep-ep in the lock (e.g. to slip in another build).
    text = lock.read_text()
    from deepep_env.lock import read_lock

    sha = {p.name: p.sha256 for p in read_lock(lock).env("lt-host").packages_for("linux-64")}["deep-ep"]
    lock.write_text(text.replace(sha, "0" * 64))
    rc, _, err = cli_in_process(capsys, "install", "lt-host", "--project", proj.root)
    assert rc == 2
    assert "deep-ep" in err and "the lock says 0000000000000000" in err and "refusing to install" in err
    # Verify first, then swap (issue 14.5): the refusal came before anything was written, so the env
    # that worked a second ago still works — same marker, same files, and activate still succeeds.
    assert read_marker(prefix) == before
    assert sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*")) == tree_before
    assert not list(prefix.parent.glob(f".{prefix.name}.staging-*"))
    assert cli_in_process(capsys, "activate", "lt-host", "--prefix", str(prefix))[0] == 0


def test_malformed_lock_is_a_clear_error(proj, capsys):
    lock = _lock(proj, "lt-host", capsys)
    lock.write_text(lock.read_text().replace("version: 7", "version: seven"))
    rc, _, err = cli_in_process(capsys, "install", "lt-host", "--project", proj.root)
    assert rc == 2 and "not a readable pixi.lock" in err and "Traceback" not in err


def test_missing_lock(proj, capsys):
    rc, _, err = cli_in_process(capsys, "install", "lt-host", "--project", proj.root)
    assert rc == 2 and "no lock to install from" in err and "deepep-env lock lt-host" in err


def test_mirror_maps_the_team_url_to_a_folder(proj, capsys, tmp_path):
    _lock(proj, "lt-host", capsys)
    elsewhere = tmp_path / "mirror"
    shutil.move(str(proj.channel), elsewhere)
    # Without a mirror the team URL (an .invalid host: a placeholder) cannot be downloaded from; nor can
    # the package be rebuilt (its sources are not cached): one line with both halves and what to run.
    rc, _, err = cli_in_process(capsys, "install", "lt-host", "--project", proj.root)
    assert rc == 2 and "is published nowhere" in err and "conda.deepep-env.invalid, a placeholder" in err
    assert "sources must be cached" in err
    assert "deepep-env fetch lt-host" in err and [ln for ln in err.splitlines() if "error" in ln] == [err.strip().splitlines()[-1]]
    rc, out, err = cli_in_process(capsys, "install", "lt-host", "--project", proj.root,
                                  "--mirror", f"https://conda.deepep-env.invalid/lt-host={elsewhere}")
    assert rc == 0, err
    assert "0 downloaded" in out


def test_custom_prefix_and_lock(proj, capsys, tmp_path):
    from deepep_env.install.installer import read_marker

    lock = _lock(proj, "lt-host", capsys)
    other = tmp_path / "copy.pixi.lock"
    shutil.copy(lock, other)
    rc, _, err = cli_in_process(capsys, "install", "lt-host", "--project", proj.root, "--prefix", tmp_path / "p",
                                "--lock", other)
    assert rc == 0, err
    assert read_marker(tmp_path / "p")["lock"] == str(other.resolve())


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def http_channel(proj, tmp_path):
    """The built channel served over HTTP on 127.0.0.1 (a subprocess: a real server)."""
    root = tmp_path / "served"
    shutil.copytree(proj.channel, root)
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                             "--directory", str(root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", root
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_install_downloads_from_http_and_verifies(proj, capsys, http_channel):
    url, served = http_channel
    lf.set_spec_value(proj, "lt-host", 'publish_url = "https://conda.deepep-env.invalid/lt-host"',
                      f'publish_url = "{url}"')
    shutil.rmtree(proj.channel)  # no local build: lock reads the served channel, install downloads
    rc, _, err = cli_in_process(capsys, "lock", "lt-host", "--project", proj.root)
    assert rc == 0, err
    assert f"{url}/linux-64/deep-ep" in (proj.pixi_lock).read_text()
    rc, out, err = cli_in_process(capsys, "install", "lt-host", "--project", proj.root, "--json")
    assert rc == 0, err
    assert json.loads(out)["downloaded"] == 4  # deep-ep, deepep-nvshmem, deepep-testdep, deepep-env


def test_corrupt_package_on_http_server_is_refused(proj, capsys, http_channel, lt_world):
    from deepep_env.install.installer import read_marker

    url, served = http_channel
    lf.set_spec_value(proj, "lt-host", 'publish_url = "https://conda.deepep-env.invalid/lt-host"',
                      f'publish_url = "{url}"')
    shutil.rmtree(proj.channel)
    assert cli_in_process(capsys, "lock", "lt-host", "--project", proj.root)[0] == 0
    lf.corrupt(_pkg_file(served, "deepep-nvshmem", lt_world.builds["lt-host"]["nvshmem"]))
    rc, _, err = cli_in_process(capsys, "install", "lt-host", "--project", proj.root)
    assert rc == 2
    assert "deepep-nvshmem" in err and f"{url}/linux-64/" in err and "refusing to install" in err
    assert read_marker(proj.prefix_for("lt-host")) is None
    assert not list(Path(lf.os.environ["DEEPEP_ENV_CACHE_DIR"]).rglob("*deepep-nvshmem*.part"))


def test_files_edited_after_an_install_never_reach_another_install(proj, capsys, tmp_path):
    """Issue 14.3: rattler links from its package cache with hard links, so an edit in one prefix
    (or by a build script in rattler-build's host env) rewrote the cached copy and reached the next
    install. Installs now extract from the verified archive into a cache of their own."""
    _lock(proj, "lt-host", capsys)
    assert cli_in_process(capsys, "install", "lt-host", "--project", proj.root)[0] == 0
    first = proj.prefix_for("lt-host") / "share/deep-ep/tests/test_intranode.py"
    pristine = first.read_bytes()
    with open(first, "ab") as fh:          # in place, as a careless tool or a build script would
        fh.write(b"\n# tampered\n")
    other = tmp_path / "second-prefix"
    assert cli_in_process(capsys, "install", "lt-host", "--project", proj.root, "--prefix", str(other))[0] == 0
    assert (other / "share/deep-ep/tests/test_intranode.py").read_bytes() == pristine
    assert not list(other.parent.glob(".second-prefix.pkgs-*"))   # the private cache is gone


def test_a_spec_env_edit_reaches_the_installed_marker(proj, capsys):
    """Issue 14.5: editing a spec's [env] changes no package, but activate/run read the marker."""
    from deepep_env.install.installer import read_marker

    _lock(proj, "lt-host", capsys)
    assert cli_in_process(capsys, "install", "lt-host", "--project", proj.root)[0] == 0
    spec = proj.spec_path("lt-host")
    spec.write_text(spec.read_text().replace('NCCL_NVLS_ENABLE = "0"', 'NCCL_NVLS_ENABLE = "1"'))
    rc, out, err = cli_in_process(capsys, "install", "lt-host", "--project", proj.root)
    assert rc == 0, err
    assert read_marker(proj.prefix_for("lt-host"))["spec_env"]["NCCL_NVLS_ENABLE"] == "1"
    rc, out, _ = cli_in_process(capsys, "activate", "lt-host", "--prefix", str(proj.prefix_for("lt-host")))
    assert rc == 0 and "export NCCL_NVLS_ENABLE=1" in out.replace("'", "")


@pytest.mark.parametrize("case", ["root", "file", "proc", "checkout", "home-like"])
def test_install_refuses_a_prefix_it_would_damage(proj, capsys, tmp_path, case):
    """Issue 15: `--prefix /`, an existing file, /proc/x and the checkout were accepted or gave a
    traceback; with verify-then-swap, a non-empty folder that is not an env would even be replaced."""
    _lock(proj, "lt-host", capsys)
    target = {"root": "/", "file": str(tmp_path / "afile"), "proc": "/proc/x", "checkout": str(proj.root),
              "home-like": str(tmp_path / "home")}[case]
    (tmp_path / "afile").write_text("keep me\n")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "notes.txt").write_text("keep me too\n")
    rc, out, err = cli_in_process(capsys, "install", "lt-host", "--project", proj.root, "--prefix", target)
    assert rc == 2 and "refusing to install" in err and "Traceback" not in err and [ln for ln in err.splitlines() if "error" in ln] == [err.strip().splitlines()[-1]]
    assert (tmp_path / "afile").read_text() == "keep me\n"
    assert (tmp_path / "home" / "notes.txt").read_text() == "keep me too\n"
    assert not list(Path("/").glob(".*.install-lock"))


def test_install_leaves_no_lock_file_beside_the_prefix(proj, capsys, tmp_path):
    _lock(proj, "lt-host", capsys)
    target = tmp_path / "envs" / "x"
    assert cli_in_process(capsys, "install", "lt-host", "--project", proj.root, "--prefix", str(target))[0] == 0
    assert sorted(p.name for p in target.parent.iterdir()) == ["x"]
