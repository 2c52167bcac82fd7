"""Issue 51.4: a host external that moves a build id is named wherever the id is compared — `lock`,
`install`, `plan` — with where this shell reads it (DEEPEP_ENV_RDMA_CORE) and how to make it match,
never rattler's bare "No candidates".

The stand-in project of tests/lock/test_lock_is_enough.py (build_fixtures.fake_project): built and
locked with rdma-core's headers from a prefix of its own, then planned/locked/installed from a shell
whose DEEPEP_ENV_RDMA_CORE names another rdma-core (other headers)."""
from __future__ import annotations

import shutil

import pytest

from build_fixtures import fake_project_with_toolkit
from cli_runner import cli_in_process


def _rdma(path, text):
    (path / "include" / "infiniband").mkdir(parents=True)
    (path / "include" / "infiniband" / "verbs.h").write_text(text)
    return path


@pytest.fixture
def locked(tmp_path, monkeypatch, capsys):
    from deepep_env.sources import hostprint

    fp = fake_project_with_toolkit(tmp_path)
    rdma = _rdma(tmp_path / "rdma", "/* rdma-core 50 */\n")
    monkeypatch.setenv("DEEPEP_ENV_RDMA_CORE", str(rdma))
    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    hostprint.clear_caches()
    p = ["--project", str(fp.root)]
    assert cli_in_process(capsys, "fetch", "h200-nvlink", *p, "--from", str(fp.upstream), "--offline")[0] == 0
    rc, _, err = cli_in_process(capsys, "build", "h200-nvlink", *p, "--offline", "-j", "7")
    assert rc == 0, err
    rc, _, err = cli_in_process(capsys, "lock", "h200-nvlink", *p)
    assert rc == 0, err
    other = _rdma(tmp_path / "rdma-other", "/* rdma-core 57 */\n")
    monkeypatch.setenv("DEEPEP_ENV_RDMA_CORE", str(other))
    hostprint.clear_caches()
    yield fp, p, rdma, other
    hostprint.clear_caches()


def _readers(fp):
    from deepep_env.formats.build_inputs import read_inputs

    rec = read_inputs(fp.project)["h200-nvlink"]
    return [pkg for pkg, r in rec.items()
            if ((r["preimage"].get("externals") or {}).get("rdma_core") or {}).get("fingerprint")]


def test_lock_plan_install_name_the_variable(locked, capsys):
    fp, p, rdma, other = locked
    readers = _readers(fp)
    if not readers:
        pytest.skip("the stand-in recipes read no rdma-core headers")
    lock_before = fp.project.pixi_lock.read_bytes()
    # lock: the channel has only the lock's build; this shell plans another id
    rc, _, err = cli_in_process(capsys, "lock", "h200-nvlink", *p)
    assert rc == 2 and "No candidates" not in err.split("(rattler:")[0], err
    assert f"rdma_core read from {other} (DEEPEP_ENV_RDMA_CORE={other})" in err and "rdma_core.headers:" in err, err
    assert "export DEEPEP_ENV_RDMA_CORE=" in err and "the lock's build is" in err, err
    assert fp.project.pixi_lock.read_bytes() == lock_before
    # plan: the locked node names the external that differs and how to match it
    rc, out, _ = cli_in_process(capsys, "plan", "h200-nvlink", *p)
    flat = " ".join(out.split())
    assert f"rdma_core read from {other} (DEEPEP_ENV_RDMA_CORE={other})" in flat, flat
    assert "to match the lock: export DEEPEP_ENV_RDMA_CORE=" in flat, flat
    # install without the lock's packages: the rebuild would get another id; the refusal names the variable
    shutil.rmtree(fp.project.store)
    shutil.rmtree(fp.project.channel)
    rc, _, err = cli_in_process(capsys, "install", "h200-nvlink", *p)
    assert rc == 2 and f"DEEPEP_ENV_RDMA_CORE={other}" in err and "export DEEPEP_ENV_RDMA_CORE=" in err, err


def test_where_read_and_read_note():
    from deepep_env.sources.hostprint import where_read, with_read_note

    assert where_read("rdma_core", {}, environ={}) == "rdma_core read from /usr (DEEPEP_ENV_RDMA_CORE unset)"
    assert where_read("rdma_core", {"rdma_core_prefix": "/x"}, environ={"DEEPEP_ENV_RDMA_CORE": "/x"}) == \
        "rdma_core read from /x (DEEPEP_ENV_RDMA_CORE=/x)"
    assert with_read_note(["rdma_core: /usr/include/infiniband", "cuda: /usr/local/cuda"], {}, environ={}) == \
        ["rdma_core: /usr/include/infiniband (DEEPEP_ENV_RDMA_CORE unset → /usr)", "cuda: /usr/local/cuda"]
