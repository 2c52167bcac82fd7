"""`deepep-env export ENV --format conda-lock`: conda-lock's own models write it and read it back."""
from __future__ import annotations

import pytest

import lock_fixtures as lf


@pytest.fixture(scope="session")
def lt_world(tmp_path_factory):
    return lf.world(tmp_path_factory)


def test_export_conda_lock_round_trips_through_conda_lock(lt_world, tmp_path, monkeypatch, capsys):
    from conda_lock.lockfile import parse_conda_lock_file

    from deepep_env.lock import lock_env, read_lock

    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(lt_world.root / "cache"))
    proj = lf.project_copy(lt_world, tmp_path / "proj")
    lock_env("lt-conda", proj)
    rc, out, err = lf.run_cli(capsys, "export", "lt-conda", "--format", "conda-lock", "--project", proj.root)
    assert rc == 0, err
    path = proj.lockfiles / "lt-conda.conda-lock.yml"
    assert path.is_file() and "wrote" in out
    parsed = parse_conda_lock_file(path)
    assert parsed.metadata.platforms == ["linux-64"]
    assert [c.url for c in parsed.metadata.channels][0] == "https://conda.deepep-env.invalid/lt-conda"
    assert parsed.metadata.sources == ["lt-conda.pixi.lock"]
    locked = {p.name: p for p in read_lock(proj.lockfiles / "lt-conda.pixi.lock").env("lt-conda").packages["linux-64"]}
    got = {p.name: p for p in parsed.package}
    assert set(got) == set(locked)
    for name, p in got.items():
        assert p.manager == "conda" and p.platform == "linux-64"
        assert p.version == locked[name].version and p.build == locked[name].build
        assert p.hash.sha256 == locked[name].sha256 and p.url == locked[name].url
    assert got["pytorch"].dependencies["python"] == ">=3.12,<3.13.0a0"

    out_file = tmp_path / "custom.yml"
    rc, out, _ = lf.run_cli(capsys, "export", "lt-conda", "-o", out_file, "--project", proj.root, "--json")
    assert rc == 0 and out_file.is_file()


def test_export_needs_a_lock(lt_world, tmp_path, capsys):
    proj = lf.project_copy(lt_world, tmp_path / "proj")
    rc, _, err = lf.run_cli(capsys, "export", "lt-conda", "--project", proj.root)
    assert rc == 2 and "no lock to export" in err
    rc, _, err = lf.run_cli(capsys, "export", "lt-conda", "--format", "yaml", "--project", proj.root)
    assert rc == 2 and "unknown format" in err
