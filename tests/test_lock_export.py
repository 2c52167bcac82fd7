"""`deepep-env export ENV --format conda-lock`: conda-lock's own models write it and read it back."""
from __future__ import annotations

import pytest

import lock_fixtures as lf
from cli_runner import cli_in_process


def test_export_conda_lock_round_trips_through_conda_lock(lt_world, tmp_path, monkeypatch, capsys):
    from conda_lock.lockfile import parse_conda_lock_file

    from deepep_env.lock import lock_env, read_lock

    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(lt_world.root / "cache"))
    proj = lf.project_copy(lt_world, tmp_path / "proj")
    lock_env("lt-conda", proj)
    rc, out, err = cli_in_process(capsys, "export", "lt-conda", "--format", "conda-lock", "--project", proj.root)
    assert rc == 0, err
    path = proj.root / "lt-conda.conda-lock.yml"
    assert path.is_file() and "wrote" in out
    parsed = parse_conda_lock_file(path)
    assert parsed.metadata.platforms == ["linux-64"]
    assert [c.url for c in parsed.metadata.channels][0] == "https://conda.deepep-env.invalid/lt-conda"
    assert parsed.metadata.sources == ["pixi.lock"]
    locked = {p.name: p for p in read_lock(proj.pixi_lock).env("lt-conda").packages_for("linux-64")}
    got = {p.name: p for p in parsed.package}
    assert set(got) == set(locked)
    for name, p in got.items():
        assert p.manager == "conda" and p.platform == "linux-64"
        assert p.version == locked[name].version and p.build == locked[name].build
        assert p.hash.sha256 == locked[name].sha256 and p.url == locked[name].url
    assert got["pytorch"].dependencies["python"] == ">=3.12,<3.13.0a0"

    out_file = tmp_path / "custom.yml"
    rc, out, _ = cli_in_process(capsys, "export", "lt-conda", "-o", out_file, "--project", proj.root, "--json")
    assert rc == 0 and out_file.is_file()


def test_export_needs_a_lock(lt_world, tmp_path, capsys):
    proj = lf.project_copy(lt_world, tmp_path / "proj")
    rc, _, err = cli_in_process(capsys, "export", "lt-conda", "--project", proj.root)
    assert rc == 2 and "no lock to export" in err
    rc, _, err = cli_in_process(capsys, "export", "lt-conda", "--format", "yaml", "--project", proj.root)
    assert rc == 2 and "unknown format" in err


def _two_rich_platforms(repo_root, tmp_path, drop_one: bool = False):
    """A lock with linux-64-cuda130 and linux-64-cuda129 on one subdir (what pixi ≥0.71 writes for
    rich platform entries, as p1/p2), made from the committed h200-nvlink records."""
    from deepep_env.lock.lockfile import EnvSection, _existing_sections, write_env
    from deepep_env.lock.platforms import platform_for

    secs, _ = _existing_sections(repo_root / "pixi.lock")
    (recs,) = secs["h200-nvlink"].records.values()
    other = [r for r in recs if not (drop_one and r.name.normalized == "deepep-nvshmem")]
    p = tmp_path / "two.pixi.lock"
    write_env(p, "h200-nvlink", EnvSection(secs["h200-nvlink"].channels,
                                           {"linux-64-cuda130": recs, "linux-64-cuda129": other}),
              [platform_for("linux-64", "12.9"), platform_for("linux-64", "13.0")])
    return p


def test_two_rich_platforms_on_one_subdir_export_once(repo_root, tmp_path):
    """Issue 13 conformance: was `platforms: [linux-64, linux-64]` with every package twice, which
    conda-lock's own parser rejects."""
    from conda_lock.lockfile import parse_conda_lock_file, write_conda_lock_file

    from deepep_env.lock.export import to_conda_lock

    src = _two_rich_platforms(repo_root, tmp_path)
    model = to_conda_lock(src, "h200-nvlink", output=tmp_path / "out.yml")
    assert list(model.metadata.platforms) == ["linux-64"] and len(model.package) == 3   # deep-ep, nvshmem, deepep-env
    write_conda_lock_file(model, tmp_path / "out.yml", metadata_choices=None)
    assert len(parse_conda_lock_file(tmp_path / "out.yml").package) == 3


def test_different_package_sets_on_one_subdir_need_a_platform(repo_root, tmp_path):
    from deepep_env.errors import UserError
    from deepep_env.lock.export import to_conda_lock

    src = _two_rich_platforms(repo_root, tmp_path, drop_one=True)
    with pytest.raises(UserError, match="share subdir linux-64 with different packages"):
        to_conda_lock(src, "h200-nvlink")
    model = to_conda_lock(src, "h200-nvlink", platform="linux-64-cuda129")
    assert [p.name for p in model.package] == ["deep-ep", "deepep-env"]
    with pytest.raises(UserError, match="no platform 'nope'"):
        to_conda_lock(src, "h200-nvlink", platform="nope")
