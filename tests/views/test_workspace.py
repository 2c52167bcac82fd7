"""One resolution per spec per command (issue 29.2): the commands share a Workspace, which
resolves each spec at most once, however many steps ask for it."""
from __future__ import annotations

from collections import Counter

import pytest

import lock_fixtures as lf
from cli_runner import cli_in_process


@pytest.fixture
def proj(lt_world, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(lt_world.root / "cache"))
    p = lf.project_copy(lt_world, tmp_path / "proj")
    for env in ("lt-host", "lt-conda"):
        assert cli_in_process(capsys, "lock", env, "--project", p.root)[0] == 0
    assert cli_in_process(capsys, "pixi", "sync", "--project", p.root)[0] == 0
    return p


@pytest.fixture
def count(monkeypatch):
    """Counts resolve() calls by spec name; load_resolved goes through it however it was imported."""
    import importlib

    mod = importlib.import_module("deepep_env.envspec.resolve")   # the package re-exports a function `resolve`

    seen: Counter = Counter()
    real = mod.resolve

    def counting(spec, project, file=None):
        r = real(spec, project, file=file)
        seen[r.name] += 1
        return r

    monkeypatch.setattr(mod, "resolve", counting)
    return seen


@pytest.fixture
def lock_reads(monkeypatch):
    """Counts the reads of pixi.lock through lockfile.read_lock looked up at call time (the Workspace's)."""
    import deepep_env.formats.lockfile as lockfile

    seen: Counter = Counter()
    real = lockfile.read_lock

    def counting(path):
        seen[str(path)] += 1
        return real(path)

    monkeypatch.setattr(lockfile, "read_lock", counting)
    return seen


def _run(capsys, count, *args):
    count.clear()
    rc, out, err = cli_in_process(capsys, *args)
    print(args, dict(count))
    return rc, out, err


def test_install_resolves_each_spec_once(proj, capsys, count):
    rc, _, err = _run(capsys, count, "install", "lt-host", "--project", proj.root)
    assert rc == 0, err
    assert dict(count) == {"lt-host": 1, "lt-conda": 1}   # lt-conda: the lock's workspace platforms
    rc, _, err = _run(capsys, count, "install", "lt-host", "--project", proj.root)   # up to date: no lock check
    assert rc == 0, err
    assert dict(count) == {"lt-host": 1}


def test_pixi_sync_check_resolves_each_spec_once(proj, capsys, count, lock_reads):
    rc, _, err = _run(capsys, count, "pixi", "sync", "--check", "--project", proj.root)
    assert rc == 0, err
    assert dict(count) == {"lt-host": 1, "lt-conda": 1}
    assert dict(lock_reads) == {str(proj.pixi_lock): 1}


def test_plan_resolves_its_spec_once(proj, capsys, count, lock_reads):
    rc, _, err = _run(capsys, count, "plan", "lt-host", "--project", proj.root, "--json")
    assert rc == 0, err
    assert dict(count) == {"lt-host": 1, "lt-conda": 1}   # lt-conda: the lock check's workspace platforms
    assert dict(lock_reads) == {str(proj.pixi_lock): 1}   # the lock check, the status and the test records


def test_task_resolves_its_spec_once(proj, capsys, count, host_tree, monkeypatch):
    """The task's install (the lock check included) shares the task's workspace."""
    monkeypatch.setenv("DEEPEP_ENV_HOST_ROOT", str(host_tree("gcp-b200")))
    monkeypatch.setenv("DEEPEP_ENV_PLATFORM", "gcp-b200")
    rc, _, err = _run(capsys, count, "task", "deepep-test-intranode", "-e", "lt-host", "--no-record",
                      "--project", proj.root, "--", "--num-processes", "2")
    assert rc == 0, err
    assert dict(count) == {"lt-host": 1, "lt-conda": 1}   # lt-conda: the lock's workspace platforms


def test_plans_are_memoized_per_provider(tmp_path):
    """One plan per (spec, host provider, resolution provider): another provider is another value."""
    from build_fixtures import fake_project

    from deepep_env.builder.plan import live_host
    from deepep_env.lock.workspace import Workspace

    fp = fake_project(tmp_path)
    ws = Workspace(fp.project)
    r = ws.resolved("h200-nvlink")
    assert ws.resolved("h200-nvlink") is r
    bp = ws.plan("h200-nvlink")
    assert ws.plan("h200-nvlink") is bp and ws.plan_of(r) is bp
    live = ws.plan("h200-nvlink", live_host)
    assert live is not bp and ws.plan("h200-nvlink", live_host) is live
    other = r.model_copy()   # not this workspace's resolution: planned, not memoized
    assert ws.plan_of(other) is not bp


def test_a_spec_that_does_not_resolve_raises_each_time(tmp_path):
    from build_fixtures import fake_project

    from deepep_env.base.errors import UnknownEnvError
    from deepep_env.lock.workspace import Workspace

    ws = Workspace(fake_project(tmp_path).project)
    for _ in range(2):
        with pytest.raises(UnknownEnvError):
            ws.resolved("no-such-env")


def test_doctor_resolves_its_spec_once(proj, capsys, count, host_tree, monkeypatch):
    monkeypatch.setenv("DEEPEP_ENV_PROJECT", str(proj.root))
    assert cli_in_process(capsys, "install", "lt-host", "--project", proj.root)[0] == 0
    _run(capsys, count, "doctor", "lt-host", "--project", proj.root, "--root", str(host_tree("gcp-b200")), "--json")
    assert dict(count) == {"lt-host": 1}
    # a prefix with no marker of ours (as pixi leaves it): the spec stands in for the marker, resolved once
    (proj.prefix_for("lt-host") / "conda-meta" / "deepep-env").unlink()
    _run(capsys, count, "doctor", "lt-host", "--project", proj.root, "--root", str(host_tree("gcp-b200")), "--json")
    assert dict(count) == {"lt-host": 1}
