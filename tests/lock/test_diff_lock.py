"""`deepep-env diff`: two real locks (a NCCL pin change and a DeepEP rebuild), as data and rendered."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

import lock_fixtures as lf
from cli_runner import cli_in_process


@pytest.fixture
def two_locks(lt_world, tmp_path, monkeypatch):
    """lt-conda locked, then NCCL downgraded in the spec and DeepEP's recipe changed (rebuilt for
    real into the channel at its new build id), then locked again."""
    from deepep_env.lock import lock_env

    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(lt_world.root / "cache"))
    proj = lf.project_copy(lt_world, tmp_path / "proj")
    lock_env("lt-conda", proj)
    old = tmp_path / "old.pixi.lock"
    shutil.copy(proj.pixi_lock, old)
    lf.set_spec_value(proj, "lt-conda", '[nccl]\nversion = "2.28.9"', '[nccl]\nversion = "2.27.7"')
    recipe = proj.recipes / "deep-ep" / "recipe.yaml"
    recipe.write_text(recipe.read_text() + "# rebuilt\n")
    builds = lf.build_env(proj.root, "lt-conda", proj.channel, tmp_path / "work")
    lock_env("lt-conda", proj)
    return proj, old, proj.pixi_lock, builds


def test_diff_is_data_with_pinned_first_and_build_ids(two_locks, lt_world):
    from deepep_env.lock import diff_locks

    proj, old, new, builds = two_locks
    d = diff_locks(str(old), str(new))
    assert not d.empty
    (sec,) = d.sections
    assert sec.env == "lt-conda" and sec.platform == "linux-64-cuda129"
    changed = {c.name: c for c in sec.changed}
    assert set(changed) == {"nccl", "deep-ep"}
    assert changed["nccl"].change == "downgraded"
    assert (changed["nccl"].old_version, changed["nccl"].new_version) == ("2.28.9", "2.27.7")
    assert changed["nccl"].component == "nccl" and changed["nccl"].pinned
    assert changed["deep-ep"].change == "rebuilt"
    assert changed["deep-ep"].old_build == lt_world.builds["lt-conda"]["deep-ep"]
    assert changed["deep-ep"].new_build == builds["deep-ep"]
    # Review order: CUDA, NVSHMEM, NCCL, PyTorch, DeepEP first.
    assert [c.name for c in sec.changed] == ["nccl", "deep-ep"]
    assert sec.unchanged == 7 and not sec.added and not sec.removed   # deepep-env among them
    (bid,) = d.build_ids
    assert bid.package == "deep-ep"
    assert bid.old == lt_world.builds["lt-conda"]["deep-ep"][1:11] and bid.new == builds["deep-ep"][1:11]
    assert d.summary() == {"added": 0, "removed": 0, "changed": 2, "build_ids_changed": 1,
                           "virtual_packages_changed": 0}


def test_diff_cli_formats(two_locks, capsys):
    proj, old, new, builds = two_locks
    rc, out, err = cli_in_process(capsys, "diff", old, new, "--format", "json")
    assert rc == 0, err
    data = json.loads(out)
    assert data["format"] == "deepep-env/lock-diff/v1"
    assert [c["name"] for c in data["sections"][0]["changed"]] == ["nccl", "deep-ep"]
    assert data["build_ids"][0]["package"] == "deep-ep"
    rc, out, _ = cli_in_process(capsys, "diff", old, new, "--json")
    assert json.loads(out) == data

    rc, md, _ = cli_in_process(capsys, "diff", old, new, "--format", "markdown")
    assert rc == 0
    assert "| package | old | new | change |" in md and "|---|---|---|---|" in md
    assert "| **nccl** | `2.28.9 h4d09622_0` | `2.27.7 h4d09622_0` | downgraded |" in md
    assert md.index("**nccl**") < md.index("**deep-ep**")
    assert "**Build ids changed**" in md and builds["deep-ep"][1:11] in md

    rc, table, _ = cli_in_process(capsys, "diff", old, new)
    assert rc == 0 and "nccl" in table and "downgraded" in table and "build ids changed" in table


def test_identical_locks(two_locks, capsys):
    proj, old, new, _ = two_locks
    rc, md, _ = cli_in_process(capsys, "diff", old, old, "-f", "markdown")
    assert rc == 0 and "No changes." in md
    rc, out, _ = cli_in_process(capsys, "diff", old, old, "--json")
    assert json.loads(out)["empty"] is True


def test_diff_git_revisions(two_locks, capsys, monkeypatch):
    proj, old, new, _ = two_locks
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(proj.root)], check=True)
    shutil.move(str(proj.pixi_lock), proj.root / "new.lock")
    shutil.copy(old, proj.pixi_lock)
    subprocess.run([*git, "-C", str(proj.root), "add", "pixi.lock"], check=True)
    subprocess.run([*git, "-C", str(proj.root), "commit", "-qm", "old lock"], check=True)
    shutil.move(str(proj.root / "new.lock"), proj.pixi_lock)
    monkeypatch.chdir(proj.root)
    rc, out, err = cli_in_process(capsys, "diff", "HEAD:pixi.lock", "pixi.lock", "--json")
    assert rc == 0, err
    data = json.loads(out)
    assert data["old"] == "HEAD:pixi.lock"
    assert {c["name"] for c in data["sections"][0]["changed"]} == {"nccl", "deep-ep"}
    # The review flow's defaults: the committed pixi.lock against the working tree's, one environment.
    rc, out2, err = cli_in_process(capsys, "diff", "--json", "-e", "lt-conda")
    assert rc == 0, err
    assert json.loads(out2)["sections"] == data["sections"]
    rc, _, err = cli_in_process(capsys, "diff", "-e", "nope")
    assert rc == 2 and "no environment 'nope' in either lock" in err
    rc, _, err = cli_in_process(capsys, "diff", "HEAD:nope.pixi.lock", "pixi.lock")
    assert rc == 2 and "cannot read nope.pixi.lock at HEAD" in err


def test_diff_reads_pixi_v6_locks_with_pypi_packages(tmp_path, capsys):
    """Locks written by pixi itself (format v6, PyPI entries) diff too."""
    def lock_text(nccl: str, np2: str) -> str:
        return f"""version: 6
environments:
  default:
    channels:
    - url: https://conda.anaconda.org/conda-forge/
    indexes:
    - https://pypi.org/simple
    packages:
      linux-64:
      - conda: https://conda.anaconda.org/conda-forge/linux-64/nccl-{nccl}-h4d09622_0.conda
      - conda: https://conda.anaconda.org/conda-forge/noarch/tzdata-2025c-hc9c84f9_1.conda
      - pypi: https://files.pythonhosted.org/packages/aa/bb/np2typing-{np2}-py3-none-any.whl
packages:
- conda: https://conda.anaconda.org/conda-forge/linux-64/nccl-{nccl}-h4d09622_0.conda
  sha256: a111111111111111111111111111111111111111111111111111111111111111
  md5: 1a111111111111111111111111111111
  depends:
  - __glibc >=2.17,<3.0.a0
  license: BSD-3-Clause
  size: 100
  timestamp: 1700000000000
- conda: https://conda.anaconda.org/conda-forge/noarch/tzdata-2025c-hc9c84f9_1.conda
  sha256: b222222222222222222222222222222222222222222222222222222222222222
  md5: 2a222222222222222222222222222222
  license: LicenseRef-Public-Domain
  size: 100
  timestamp: 1700000000000
- pypi: https://files.pythonhosted.org/packages/aa/bb/np2typing-{np2}-py3-none-any.whl
  name: np2typing
  version: {np2}
  sha256: c333333333333333333333333333333333333333333333333333333333333333
  requires_python: '>=3.7'
"""
    a, b = tmp_path / "a.lock", tmp_path / "b.lock"
    a.write_text(lock_text("2.27.7.1", "2.6.3"))
    b.write_text(lock_text("2.28.9.1", "2.7.0"))
    rc, out, err = cli_in_process(capsys, "diff", a, b, "--json")
    assert rc == 0, err
    (sec,) = json.loads(out)["sections"]
    ch = {c["name"]: c for c in sec["changed"]}
    assert ch["nccl"]["change"] == "upgraded" and ch["np2typing"]["kind"] == "pypi"
    assert ch["np2typing"]["old_version"] == "2.6.3" and sec["unchanged"] == 1


def test_bad_arguments(tmp_path, capsys):
    rc, _, err = cli_in_process(capsys, "diff", tmp_path / "nope.lock", tmp_path / "nope2.lock")
    assert rc == 2 and "lock file not found" in err
    bad = tmp_path / "bad.lock"
    bad.write_text("not: [a, lock")
    rc, _, err = cli_in_process(capsys, "diff", bad, bad)
    assert rc == 2 and "not a readable pixi.lock" in err and "Traceback" not in err


def test_diff_pixi_json_is_pixi_update_shape(two_locks, capsys):
    """Issue 13 conformance: `--format pixi-json` is what `pixi update --json` prints (pixi's
    LockFileJsonDiff), the input of pixi-diff-to-markdown."""
    proj, old, new, _ = two_locks
    # No pixi.toml beside the lock yet: pixi's `explicit` has nothing to come from, so it is left out.
    rc, out, err = cli_in_process(capsys, "diff", str(old), str(new), "--format", "pixi-json")
    assert rc == 0 and "explicit` left out" in err
    assert all("explicit" not in r for r in json.loads(out)["environment"]["lt-conda"]["linux-64-cuda129"])
    assert cli_in_process(capsys, "pixi", "sync", "--project", proj.root)[0] == 0
    rc, out, err = cli_in_process(capsys, "diff", str(old), str(new), "--format", "pixi-json")
    assert rc == 0 and err == ""
    data = json.loads(out)
    assert data["version"] == 1
    rows = {r["name"]: r for r in data["environment"]["lt-conda"]["linux-64-cuda129"]}
    assert rows["nccl"]["before"]["version"] == "2.28.9" and rows["nccl"]["after"]["version"] == "2.27.7"
    assert rows["nccl"]["type"] == "conda" and rows["nccl"]["explicit"] is True   # a manifest dependency
    assert rows["deep-ep"]["before"]["build"] != rows["deep-ep"]["after"]["build"]


def test_pixi_json_explicit_is_the_manifests_dependencies(tmp_path):
    """Issue 26: `explicit` came from "pinned components" (nvshmem and nccl explicit, deepep-env not,
    the reverse of pixi.toml). pixi sets it from the environment's manifest dependencies (the default
    feature's only where the environment uses it) and leaves it out when false."""
    from deepep_env.lock.diff import LockDiff, PackageEntry, PlatformDiff, manifest_explicit, pixi_update_json

    (tmp_path / "pixi.toml").write_text(
        '[dependencies]\ntop = "*"\n[feature.e.dependencies]\ndeepep-env = "==1"\n'
        '[feature.e.pypi-dependencies]\nNp2_Typing = "*"\n'
        '[environments]\ne = { features = ["e"], no-default-feature = true }\nboth = ["e"]\n')
    added = [PackageEntry(n, "1", "h_0", k, component="nvshmem" if n == "nvshmem" else None) for n, k in
             (("deepep-env", "conda"), ("nvshmem", "conda"), ("np2-typing", "pypi"), ("top", "conda"))]
    d = LockDiff(old="a", new="b", sections=[PlatformDiff("e", "linux-64", added=added),
                                             PlatformDiff("both", "linux-64", added=added)])
    envs = pixi_update_json(d, manifest_explicit(tmp_path / "pixi.toml"))["environment"]
    assert {r["name"] for r in envs["e"]["linux-64"] if r.get("explicit")} == {"deepep-env", "np2-typing"}
    assert {r["name"] for r in envs["both"]["linux-64"] if r.get("explicit")} == {"deepep-env", "np2-typing", "top"}
    assert all(r.get("explicit", True) is True for e in envs.values() for r in e["linux-64"])
