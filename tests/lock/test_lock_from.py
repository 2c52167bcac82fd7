"""`deepep-env lock ENV --from PATH`: ENV as locked on another machine (from the same tree), taken into
this checkout's pixi.lock and build-inputs record; refused in one line, both files keeping their
bytes, when it is not this checkout's (docs/lockfiles.md §1)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from build_fixtures import REPO
from cli_runner import cli_subprocess

ENV = "h200-nvlink"


@pytest.fixture()
def ours(tmp_path) -> Path:
    """A copy of the project: its specs, recipes, lock and record."""
    dst = tmp_path / "ours"
    for d in ("env_specs", "recipes", "lockfiles"):
        shutil.copytree(REPO / d, dst / d, symlinks=True)
    for f in ("pixi.lock", "pixi.toml", "pyproject.toml"):
        shutil.copy2(REPO / f, dst / f)
    return dst


def _relock_elsewhere(tmp_path: Path, lock_text: str, inputs_text: str) -> Path:
    run = tmp_path / "gpu-run"
    run.mkdir()
    (run / "pixi.lock").write_text(lock_text)
    (run / "build-inputs.json").write_text(inputs_text)
    return run


def _env_url(lock: str, part: str = "") -> str:
    """The first package URL of ENV's own section containing ``part`` (the lock holds other environments,
    some sharing a package file name on another channel, listed before it)."""
    doc = yaml.safe_load(lock)
    return next(p["conda"] for pkgs in doc["environments"][ENV]["packages"].values() for p in pkgs
                if part in p["conda"])


def _build(url: str) -> str:
    return url.rsplit("-", 1)[1].removesuffix(".conda")


def _from(ours: Path, *args):
    return cli_subprocess("lock", *args, "--project", ours, cwd=ours)


def _snapshot(ours: Path) -> tuple[bytes, bytes]:
    return (ours / "pixi.lock").read_bytes(), (ours / "lockfiles" / "build-inputs.json").read_bytes()


def test_an_environment_locked_elsewhere_is_taken_with_its_record(ours, tmp_path):
    """ENV new on the other machine, another environment old here: the result has both — what copying
    the file would lose."""
    lock, inputs = (REPO / "pixi.lock").read_text(), (REPO / "lockfiles" / "build-inputs.json").read_text()
    run = _relock_elsewhere(tmp_path, lock, inputs)
    # here, ENV's section and record are some older state (another build string, another record)
    deep_ep = _build(_env_url(lock, "/deep-ep-1.2.1-"))
    (ours / "pixi.lock").write_text(lock.replace(deep_ep, "h0000000000_0"))
    assert cli_subprocess("lock", ENV, "--check", "--project", ours, cwd=ours).returncode == 1
    rec = json.loads(inputs)
    rec["environments"][ENV] = rec["environments"]["h200-nvlink-wheel"]
    (ours / "lockfiles" / "build-inputs.json").write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n")
    r = _from(ours, ENV, "--from", run)
    assert r.returncode == 0, r.stderr
    assert f"{ENV}: taken from {run / 'pixi.lock'}" in r.stdout and "fresh" in r.stdout
    assert (ours / "pixi.lock").read_text() == lock
    assert (ours / "lockfiles" / "build-inputs.json").read_text() == inputs
    assert cli_subprocess("lock", ENV, "--check", "--project", ours, cwd=ours).returncode == 0


def test_the_record_is_found_in_the_sources_lockfiles_folder(ours, tmp_path):
    other = tmp_path / "clone"
    (other / "lockfiles").mkdir(parents=True)
    shutil.copy2(REPO / "pixi.lock", other / "pixi.lock")
    shutil.copy2(REPO / "lockfiles" / "build-inputs.json", other / "lockfiles" / "build-inputs.json")
    r = _from(ours, ENV, "--from", other / "pixi.lock")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("case, needle", [
    ("stale", "does not satisfy this checkout (build-id-changed); nothing taken"),
    ("foreign-tool", "was locked with deepep-env h0000000000_0"),
    ("no-env", "no environment 'h200-nvlink'"),
    ("no-record", "no record for environment 'h200-nvlink'"),
    ("bad-record", "not the sha256 of its pre-image"),
    ("bad-json", "not valid JSON"),
    ("no-lock", "no pixi.lock there"),
    ("moved-url", "does not satisfy this checkout (url-outside-channels); nothing taken"),
    ("dotdot-url", "does not satisfy this checkout (url-outside-channels); nothing taken"),
])
def test_what_is_not_this_checkouts_is_refused_and_nothing_changes(ours, tmp_path, case, needle):
    lock, inputs = (REPO / "pixi.lock").read_text(), (REPO / "lockfiles" / "build-inputs.json").read_text()
    deep_ep = _build(_env_url(lock, "/deep-ep-1.2.1-"))            # ENV's DeepEP build, e.g. h0fe…_0
    tool = _build(_env_url(lock, "/deepep-env-0.2.0-"))
    rec = json.loads(inputs)
    if case == "stale":
        lock = lock.replace(deep_ep, "h0000000000_0")
    elif case == "foreign-tool":
        lock = lock.replace(tool, "h0000000000_0")
    elif case == "no-env":
        lock = lock.replace(f"  {ENV}:\n", "  renamed-env:\n").replace(f'"{ENV}":', '"renamed-env":')
    elif case == "no-record":
        del rec["environments"][ENV]
    elif case in ("moved-url", "dotdot-url"):     # 39.3: another host (or out of the channel) and other bytes
        url = _env_url(lock)
        moved = (url.replace("https://conda.deepep-env.example/", "https://evil.example/") if case == "moved-url"
                 else url.replace("/linux-64/", "/linux-64/..%2f"))
        sha = lock.split(f"- conda: {url}\n  sha256: ")[1][:64]
        lock = lock.replace(url, moved).replace(sha, "a" * 64)
    elif case == "bad-record":
        next(iter(rec["environments"][ENV].values()))["preimage"]["package"] = "edited"
    inputs = json.dumps(rec) if case in ("no-record", "bad-record") else inputs
    run = _relock_elsewhere(tmp_path, lock, "{oops" if case == "bad-json" else inputs)
    if case == "no-lock":
        (run / "pixi.lock").unlink()
    before = _snapshot(ours)
    r = _from(ours, ENV, "--from", run)
    assert r.returncode != 0
    assert needle in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert _snapshot(ours) == before


def test_from_does_not_combine_with_the_other_modes(ours, tmp_path):
    r = _from(ours, ENV, "--from", tmp_path, "--check")
    assert r.returncode == 2 and "does not combine with --check" in r.stderr
    r = _from(ours, "all", "--from", tmp_path)
    assert r.returncode == 2 and "one environment" in r.stderr


def test_the_same_build_with_other_bytes_is_taken_with_a_note(ours, tmp_path):
    """With no build channel here to compare, a correction of a build's bytes made on the GPU machine
    (GPU round 4: patchelf) is taken, and the note names the build and both sha256 for the review."""
    lock, inputs = (REPO / "pixi.lock").read_text(), (REPO / "lockfiles" / "build-inputs.json").read_text()
    url = _env_url(lock, "/deepep-nvshmem-3.4.5-")
    sha = lock.split(f"- conda: {url}\n  sha256: ")[1][:64]
    run = _relock_elsewhere(tmp_path, lock.replace(sha, "b" * 64), inputs)
    r = _from(ours, ENV, "--from", run)
    assert r.returncode == 0, r.stderr
    build = _build(url)
    assert f"note: deepep-nvshmem 3.4.5 {build}: sha256 {sha[:16]}… here, {'b' * 16}… as taken" in r.stdout
