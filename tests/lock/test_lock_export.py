"""`deepep-env export ENV | --all [--check]`: pixi.lock's environments as conda-lock files (issue 25.4),
read back by conda-lock's own parsers and by what micromamba requires of one."""
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
    path = proj.root / "lockfiles" / "lt-conda.conda-lock.yml"
    assert path.is_file() and "written" in out
    parsed = parse_conda_lock_file(path)
    assert parsed.metadata.platforms == ["linux-64"]
    assert [c.url for c in parsed.metadata.channels][0] == "https://conda.deepep-env.invalid/lt-conda"
    assert parsed.metadata.sources == ["lt-conda.environment.yml"]
    assert (proj.root / "lockfiles" / "lt-conda.environment.yml").is_file()
    rc, out, _ = cli_in_process(capsys, "export", "lt-conda", "--check", "--project", proj.root)
    assert rc == 0 and "fresh" in out
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
    assert rc == 0 and out_file.is_file() and (tmp_path / "custom.environment.yml").is_file()
    assert parse_conda_lock_file(out_file).metadata.sources == ["custom.environment.yml"]


def test_export_needs_a_lock(lt_world, tmp_path, capsys):
    proj = lf.project_copy(lt_world, tmp_path / "proj")
    rc, _, err = cli_in_process(capsys, "export", "lt-conda", "--project", proj.root)
    assert rc == 2 and "no lock to export" in err
    rc, _, err = cli_in_process(capsys, "export", "lt-conda", "--format", "yaml", "--project", proj.root)
    assert rc == 2 and "unknown format" in err
    for args in ((), ("lt-conda", "--all"), ("--all", "--platform", "linux-64-cuda130")):
        rc, _, err = cli_in_process(capsys, "export", *args, "--project", proj.root)
        assert rc == 2 and len(err.strip().splitlines()) == 1, err


def _two_rich_platforms(repo_root, tmp_path, drop_one: bool = False):
    """A lock with linux-64-cuda130 and linux-64-cuda129 on one subdir (what pixi ≥0.71 writes for
    rich platform entries, as p1/p2), made from the committed h200-nvlink records."""
    from deepep_env.formats.lockfile import EnvSection, _existing_sections, write_env
    from deepep_env.formats.lock_platforms import platform_for

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
    from deepep_env.base.errors import UserError
    from deepep_env.lock.export import to_conda_lock

    src = _two_rich_platforms(repo_root, tmp_path, drop_one=True)
    with pytest.raises(UserError, match="share subdir linux-64 with different packages"):
        to_conda_lock(src, "h200-nvlink")
    model = to_conda_lock(src, "h200-nvlink", platform="linux-64-cuda129")
    assert sorted(p.name for p in model.package) == ["deep-ep", "deepep-env"]
    with pytest.raises(UserError, match="no platform 'nope'"):
        to_conda_lock(src, "h200-nvlink", platform="nope")


# --- lockfiles/: every environment of the committed pixi.lock (issue 25.4) ---------------------------

def _micromamba_reads(path) -> None:
    """What micromamba's conda-lock reader requires (libmamba src/core/env_lockfile.cpp, v1): a
    `*-lock.yml` name, version 1, at least one platform, source and content hash, channels with
    `url` and `used_env_vars`, and per package name, version, manager, platform, url, an md5 or a
    sha256 and a mapping of dependencies."""
    import yaml

    assert path.name.endswith("-lock.yml")
    doc = yaml.safe_load(path.read_text())
    assert doc["version"] == 1
    meta = doc["metadata"]
    assert meta["platforms"] and meta["sources"] and meta["content_hash"]
    assert all(isinstance(c["url"], str) and isinstance(c["used_env_vars"], list) for c in meta["channels"])
    for p in doc["package"]:
        assert all(isinstance(p[k], str) for k in ("name", "version", "manager", "platform", "url"))
        assert p["hash"].get("md5") or p["hash"].get("sha256")
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in p["dependencies"].items())


def _conda_lock_reads(path) -> list:
    """conda-lock's own readers: the lock file, its sources (as `conda-lock lock` finds them), and the
    explicit file `conda-lock install` renders from it before it calls conda."""
    from conda_lock.conda_lock import _render_lockfile_for_install, handle_no_specified_source_files
    from conda_lock.lockfile import parse_conda_lock_file
    from conda_lock.src_parser import make_lock_spec

    lock = parse_conda_lock_file(path)
    sources = handle_no_specified_source_files(path)
    assert [s.name for s in sources] == lock.metadata.sources and all(s.exists() for s in sources)
    spec = make_lock_spec(src_files=sources, mapping_url="https://mapping.invalid/map.json")
    for subdir in lock.metadata.platforms:
        pinned = {(d.name, d.version, d.build) for d in spec.dependencies[subdir] if d.manager == "conda"}
        assert pinned == {(p.name, f"=={p.version}", p.build) for p in lock.package if p.platform == subdir}
    with _render_lockfile_for_install(path, force_platform=lock.metadata.platforms[0]) as explicit:
        text = explicit.read_text()
    assert all(p.url in text for p in lock.package)
    return lock.package


def test_committed_exports_are_the_lock(repo_root, capsys):
    """lockfiles/ holds one export per environment of pixi.lock, in step with it (CI runs the check),
    read by conda-lock and shaped as micromamba reads it, every package at the lock's sha256."""
    import yaml

    from deepep_env.lock import read_lock

    rc, out, err = cli_in_process(capsys, "export", "--all", "--check", "--project", repo_root)
    assert rc == 0 and "fresh" in out, err
    data = read_lock(repo_root / "pixi.lock")
    envs = [n for n, e in data.envs.items() if any(e.packages.values())]
    assert sorted(p.name for p in (repo_root / "lockfiles").glob("*.conda-lock.yml")) == \
        sorted(f"{n}.conda-lock.yml" for n in envs)
    for env in envs:
        path = repo_root / "lockfiles" / f"{env}.conda-lock.yml"
        _micromamba_reads(path)
        got = {(p.name, p.hash.sha256) for p in _conda_lock_reads(path)}
        (pkgs,) = data.env(env).packages.values()
        assert got == {(p.name, p.sha256) for p in pkgs}
        assert yaml.safe_load(path.read_text())["metadata"]["sources"] == [f"{env}.environment.yml"]


def test_a_pixi_lock_source_is_what_conda_lock_cannot_parse(repo_root):
    """Why sources name the environment file: conda-lock reads any other source as an environment.yml."""
    from conda_lock.src_parser import make_lock_spec

    with pytest.raises(KeyError, match="dependencies"):
        make_lock_spec(src_files=[repo_root / "pixi.lock"], mapping_url="https://mapping.invalid/map.json",
                       platform_overrides=["linux-64"])


def test_same_lock_same_bytes_anywhere(repo_root, tmp_path, capsys):
    """Deterministic: another folder, another run, the same bytes as the committed ones (no time, no
    path of this machine)."""
    for _ in range(2):
        rc, out, err = cli_in_process(capsys, "export", "--all", "-o", tmp_path / "x", "--project", repo_root)
        assert rc == 0, err
    committed = {p.name: p.read_bytes() for p in (repo_root / "lockfiles").glob("*.yml")}
    assert {p.name: p.read_bytes() for p in (tmp_path / "x").iterdir()} == committed
    assert not any(str(repo_root).encode() in b for b in committed.values())


def _changed_lock(repo_root, tmp_path):
    """A PR that changes one environment: a copy of pixi.lock whose deep-ep record of h200-nvlink
    has other bytes (sha256), and lockfiles/ as committed."""
    lock = tmp_path / "pixi.lock"
    from deepep_env.formats.lockfile import read_lock

    text = (repo_root / "pixi.lock").read_text()
    env = read_lock(repo_root / "pixi.lock").env("h200-nvlink")
    old = "sha256: " + next(q.sha256 for ps in env.packages.values() for q in ps if q.name == "deep-ep")
    assert text.count(old) == 1
    lock.write_text(text.replace(old, "sha256: " + "ab" * 32))
    folder = tmp_path / "lockfiles"
    folder.mkdir()
    for p in (repo_root / "lockfiles").glob("*.yml"):
        (folder / p.name).write_bytes(p.read_bytes())
    return lock, folder


def test_a_changed_environment_is_a_changed_export_and_check_catches_it(repo_root, tmp_path, capsys):
    lock, folder = _changed_lock(repo_root, tmp_path)
    args = ("--all", "--lock", lock, "-o", folder, "--project", repo_root)
    rc, out, err = cli_in_process(capsys, "export", *args, "--check")
    assert rc == 1 and out == ""
    assert err.strip().splitlines() == [err.strip()]                  # one line, naming the stale file
    assert f"{folder / 'h200-nvlink.conda-lock.yml'}: out of step with pixi.lock" in err
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    rc, out, err = cli_in_process(capsys, "export", *args)
    assert rc == 0 and "written" in out, err
    after = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert [n for n in sorted(after) if after[n] != before[n]] == ["h200-nvlink.conda-lock.yml"]
    assert b"ab" * 32 in after["h200-nvlink.conda-lock.yml"]
    assert cli_in_process(capsys, "export", *args, "--check")[0] == 0


def test_exports_of_a_removed_environment_go(repo_root, tmp_path, capsys):
    lock, folder = _changed_lock(repo_root, tmp_path)
    lock.write_bytes((repo_root / "pixi.lock").read_bytes())
    gone = folder / "old-env.conda-lock.yml"
    gone.write_text("version: 1\n")
    (folder / "README.md").write_text("kept\n")
    args = ("--all", "--lock", lock, "-o", folder, "--project", repo_root)
    rc, _, err = cli_in_process(capsys, "export", *args, "--check")
    assert rc == 1 and f"{gone}: no environment of pixi.lock exports this file" in err
    rc, out, _ = cli_in_process(capsys, "export", *args)
    assert rc == 0 and f"removed {gone}" in out
    assert not gone.exists() and (folder / "README.md").exists()
    assert cli_in_process(capsys, "export", *args, "--check")[0] == 0


def test_conda_lock_render_linux_64_works_on_every_committed_export(repo_root, tmp_path):
    """pixi.lock names its CUDA platforms p1, p2 (pixi's format); the exports say linux-64, so
    `conda-lock render -p linux-64` (its command line, not an internal name) writes each env's
    explicit file with every locked package (issue 40.7)."""
    import subprocess
    import sys

    import yaml

    exports = sorted((repo_root / "lockfiles").glob("*.conda-lock.yml"))
    assert exports
    for path in exports:
        out = tmp_path / path.name
        out.mkdir()
        res = subprocess.run([sys.executable, "-m", "conda_lock", "render", "-p", "linux-64", "--kind", "explicit",
                              str(path)], cwd=out, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        text = (out / "conda-linux-64.lock").read_text()
        assert "# platform: linux-64" in text
        urls = [p["url"] for p in yaml.safe_load(path.read_text())["package"]]
        assert urls and all(u in text for u in urls)
