"""`deepep-env lock`: real solves with py-rattler against a channel built by rattler-build, offline."""
from __future__ import annotations

import socket
import time

import pytest

import lock_fixtures as lf
from cli_runner import cli_in_process


@pytest.fixture
def proj(lt_world, tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(lt_world.root / "cache"))
    return lf.project_copy(lt_world, tmp_path / "proj")


def test_lock_pins_our_build_ids_and_names_channels_by_url(proj, lt_world, capsys):
    from deepep_env.lock import read_lock

    rc, out, err = cli_in_process(capsys, "lock", "lt-host", "--project", proj.root)
    assert rc == 0, err
    path = proj.pixi_lock
    text = path.read_text()
    assert "\nversion: 7\n" in text
    # No machine path anywhere: the local channel is named by the spec's publish_url.
    assert str(proj.state) not in text and "file://" not in text
    data = read_lock(path)
    env = data.env("lt-host")
    assert env.channels == ["https://conda.deepep-env.invalid/lt-host/"]
    pkgs = {p.name: p for p in env.packages_for("linux-64")}
    assert set(pkgs) == {"deep-ep", "deepep-nvshmem", "deepep-testdep", "deepep-env"}
    builds = lt_world.builds["lt-host"]
    assert pkgs["deep-ep"].build == builds["deep-ep"]
    assert pkgs["deepep-nvshmem"].build == builds["nvshmem"]
    assert pkgs["deep-ep"].url == f"https://conda.deepep-env.invalid/lt-host/linux-64/deep-ep-1.2.1-{builds['deep-ep']}.conda"
    assert all(p.sha256 and len(p.sha256) == 64 for p in pkgs.values())
    # Virtual packages come from the spec (CUDA 12.9), not from this machine (which has no GPU), under
    # the rich platform's name and spelled as pixi writes them (formats/lock_platforms.py cites pixi's source).
    assert data.platforms["linux-64-cuda129"] == {"subdir": "linux-64", "virtual_packages": [
        "__cuda=12.9", "__archspec=0=x86_64", "__glibc=2.28", "__linux=4.18", "__unix=0=0"]}
    # Provenance line: which spec version and build ids the lock was made from, per environment.
    assert text.startswith('# deepep-env-lock: {"envs":{"lt-host":') and '"format":"deepep-env/lock-meta/v2"' in text
    meta = data.meta_for("lt-host")
    assert meta["spec_version"] == "2026.1.0"
    assert meta["builds"]["deep-ep"]["build"] == builds["deep-ep"]


def test_lock_is_readable_by_rattler_and_relock_is_byte_identical(proj, capsys):
    from rattler import LockFile

    assert cli_in_process(capsys, "lock", "lt-host", "--project", proj.root)[0] == 0
    path = proj.pixi_lock
    first = path.read_bytes()
    mtime = path.stat().st_mtime_ns
    lock = LockFile.from_path(path)
    assert sorted(n for n, _ in lock.environments()) == ["default", "lt-host"]  # pixi always has a `default` environment
    rc, out, _ = cli_in_process(capsys, "lock", "lt-host", "--project", proj.root, "--json")
    assert rc == 0
    import json

    assert json.loads(out)["changed"] is False
    assert path.read_bytes() == first and path.stat().st_mtime_ns == mtime


def test_conda_components_are_solved_with_their_pins(proj, capsys):
    from deepep_env.lock import read_lock

    rc, _, err = cli_in_process(capsys, "lock", "lt-conda", "--project", proj.root)
    assert rc == 0
    assert "valid on this machine only" in err  # the stand-in conda-forge is a file:// channel
    pkgs = {p.name: p for p in read_lock(proj.pixi_lock).env("lt-conda").packages_for("linux-64")}
    assert pkgs["pytorch"].version == "2.10.0" and pkgs["pytorch"].build.startswith("cuda129")
    assert pkgs["nccl"].version == "2.28.9"
    assert pkgs["python"].version.startswith("3.12.")
    assert pkgs["cuda-version"].version == "12.9"
    assert "deep-ep" in pkgs and "deepep-nvshmem" in pkgs


def test_host_and_pip_components_are_not_solved(proj, capsys):
    from deepep_env.lock import read_lock

    assert cli_in_process(capsys, "lock", "lt-host", "--project", proj.root)[0] == 0
    names = {p.name for p in read_lock(proj.pixi_lock).env("lt-host").packages_for("linux-64")}
    assert not names & {"python", "pytorch", "nccl", "cuda-version"}


def test_no_publish_url_gives_a_machine_local_lock_with_a_warning(proj, capsys):
    lf.set_spec_value(proj, "lt-host", 'publish_url = "https://conda.deepep-env.invalid/lt-host"\n', "")
    rc, out, err = cli_in_process(capsys, "lock", "lt-host", "--project", proj.root, "--json")
    assert rc == 0
    assert "valid on this machine only" in err
    text = (proj.pixi_lock).read_text()
    assert proj.channel.resolve().as_uri() in text
    assert '"machine_local":true' in text


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize("url", ["http://127.0.0.1:{port}/conda-forge", "https://conda.deepep-env.invalid/forge"])
def test_unreachable_channel_fails_fast_naming_it_and_writes_nothing(proj, capsys, url):
    url = url.format(port=_closed_port())
    lf.set_spec_value(proj, "lt-conda", 'channels = ["local", ', f'channels = ["local", "{url}", ')
    t0 = time.monotonic()
    rc, out, err = cli_in_process(capsys, "lock", "lt-conda", "--project", proj.root)
    elapsed = time.monotonic() - t0
    assert rc == 2
    # a reserved example name (.invalid) is said to be a placeholder, without a DNS lookup
    said = "is a placeholder URL" if ".invalid" in url else "cannot be reached"
    assert url in err and said in err and "nothing written" in err
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    assert elapsed < 20  # seconds, not rattler's minute of retries (a loose bound; not a benchmark)
    assert not (proj.pixi_lock).exists()


def test_missing_local_build_fails_naming_the_package(proj, capsys):
    # The channel holds no build for the id the plan computes after a recipe edit.
    recipe = proj.recipes / "deep-ep" / "recipe.yaml"
    recipe.write_text(recipe.read_text() + "# changed\n")
    rc, _, err = cli_in_process(capsys, "lock", "lt-host", "--project", proj.root)
    assert rc == 2
    # named before any solve, with the step that fixes it (issue 56: "build first")
    assert "deep-ep 1.2.1 h" in err and "not built" in err and "nothing written" in err
    assert "`deepep-env build lt-host` first" in err
    assert not (proj.pixi_lock).exists()


def test_no_local_channel_and_unreachable_publish_url(proj, capsys, lt_world):
    import shutil

    shutil.rmtree(proj.channel)
    rc, _, err = cli_in_process(capsys, "lock", "lt-host", "--project", proj.root)
    assert rc == 2
    # the real cause (nothing built here) before the placeholder, and the step that fixes it (issue 56)
    assert "not built: the local channel" in err and "`deepep-env build lt-host` first" in err
    assert "publish_url https://conda.deepep-env.invalid/lt-host is a placeholder" in err
    shutil.copytree(lt_world.channel, proj.channel)      # the step: the channel `deepep-env build` leaves
    rc, _, err = cli_in_process(capsys, "lock", "lt-host", "--project", proj.root)
    assert rc == 0, err


def test_unpinned_source_cannot_be_locked(proj, capsys):
    lf.set_spec_value(proj, "lt-host", 'version = "3.4.5"', 'version = "3.5.19"')
    rc, _, err = cli_in_process(capsys, "lock", "lt-host", "--project", proj.root)
    assert rc == 2 and "build id of nvshmem is unknown" in err


def test_explicit_channel_dir(proj, capsys, tmp_path):
    import shutil

    other = tmp_path / "elsewhere"
    shutil.move(str(proj.channel), other)
    rc, _, err = cli_in_process(capsys, "lock", "lt-host", "--project", proj.root, "--channel", other)
    assert rc == 0, err
    assert "https://conda.deepep-env.invalid/lt-host/linux-64/deep-ep" in (proj.pixi_lock).read_text()


def test_lock_a_request_given_as_data(proj, tmp_path):
    """Specs to solve can be given as data (no build plan): here, the noarch dependency alone on two
    platforms."""
    from deepep_env.lock import lock_request, read_lock

    req = lf.data_request(proj, "lt-host", ["deepep-testdep >=1"], ["linux-64", "linux-aarch64"])
    res = lock_request(req, tmp_path / "x.pixi.lock")
    assert res.changed
    data = read_lock(tmp_path / "x.pixi.lock")
    env = data.env("lt-host")
    assert sorted(env.packages) == ["linux-64-cuda129", "linux-aarch64-cuda129"]
    assert [p.name for p in env.packages["linux-aarch64-cuda129"]] == ["deepep-testdep"]
    assert data.platforms["linux-aarch64-cuda129"]["virtual_packages"][1] == "__archspec=0=aarch64"


def test_unknown_env_is_a_clear_error(proj, capsys):
    rc, _, err = cli_in_process(capsys, "lock", "nope", "--project", proj.root)
    assert rc == 2 and "unknown env 'nope'" in err and "lt-host" in err


def test_a_publish_url_with_credentials_is_refused(proj, capsys):
    lf.set_spec_value(proj, "lt-host", 'publish_url = "https://conda.deepep-env.invalid/lt-host"',
                      'publish_url = "https://alice:s3cret-token@conda.deepep-env.invalid/lt-host"')
    rc, out, err = cli_in_process(capsys, "lock", "lt-host", "--project", proj.root)
    assert rc == 2 and "carries credentials" in err
    assert "s3cret-token" not in err + out
    assert not (proj.pixi_lock).exists()
