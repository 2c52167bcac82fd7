"""pixi.toml generated from env_specs/ (`deepep-env pixi sync [--check]`), validated against pixi's
own manifest schema (../shared/schemas; a missing schema is a failure, not a skip)."""
from __future__ import annotations

import json
import sys

import pytest

import lock_fixtures as lf
from cli_runner import cli_in_process

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SCHEMA = "pixi-manifest-v0.77.0.schema.json"


@pytest.fixture(scope="session")
def pixi_schema(shared_dir):
    path = shared_dir / "schemas" / SCHEMA
    if not path.is_file():
        pytest.fail(f"pixi's manifest schema is missing: {path} (CI places ../shared/schemas beside the project)")
    return json.loads(path.read_text())


def validate(manifest: dict, schema: dict) -> None:
    import jsonschema

    v = jsonschema.Draft7Validator(schema)
    errors = sorted(v.iter_errors(manifest), key=lambda e: list(e.absolute_path))
    assert not errors, "; ".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5])


@pytest.fixture
def proj(lt_world, tmp_path, monkeypatch):
    """A project whose two specs are locked: pixi.toml has an environment per locked spec."""
    from deepep_env.lock import lock_env

    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(lt_world.root / "cache"))
    p = lf.project_copy(lt_world, tmp_path / "proj")
    for env in ("lt-host", "lt-conda"):
        lock_env(env, p)
    return p


def test_only_locked_specs_are_environments(lt_world, tmp_path, capsys, monkeypatch):
    """pixi checks every environment of the manifest against pixi.lock (pixi's lf/outdated.rs): a spec
    without a lock is named in a comment, not declared as an environment `pixi install --locked`
    would refuse. Its platform stays declared (the lock's pN numbering follows the declared list)."""
    from deepep_env.lock import lock_env

    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(lt_world.root / "cache"))
    p = lf.project_copy(lt_world, tmp_path / "proj")
    lock_env("lt-conda", p)
    assert cli_in_process(capsys, "pixi", "sync", "--project", p.root)[0] == 0
    text = p.pixi_toml.read_text()
    m = tomllib.loads(text)
    assert set(m["environments"]) == {"lt-conda"} and "lt-host" not in m["feature"]
    assert "#   lt-host: not in pixi.lock yet (`deepep-env build lt-host && deepep-env lock lt-host`)" in text
    assert [x["name"] for x in m["workspace"]["platforms"]] == ["linux-64-cuda129"]


def test_generated_manifest_is_valid_pixi(proj, pixi_schema, capsys):
    rc, out, err = cli_in_process(capsys, "pixi", "sync", "--project", proj.root)
    assert rc == 0, err
    assert "written" in out
    text = proj.pixi_toml.read_text()
    m = tomllib.loads(text)  # TOML 1.0: Python's tomllib reads it
    validate(m, pixi_schema)
    assert set(m["environments"]) == {"lt-host", "lt-conda"}
    assert m["environments"]["lt-host"] == {"features": ["lt-host"], "no-default-feature": True}
    # Rich platform entry with the spec's CUDA version (no deprecated [system-requirements]).
    (plat,) = m["workspace"]["platforms"]
    assert plat == {"name": "linux-64-cuda129", "platform": "linux-64", "cuda": "12.9", "glibc": "2.28",
                    "linux": "4.18", "archspec": "x86_64"}
    assert "system-requirements" not in text
    host = m["feature"]["lt-host"]
    # The local channel is named by its publish URL: nothing machine-specific is committed.
    assert host["channels"] == ["https://conda.deepep-env.invalid/lt-host"]
    assert str(proj.root) not in text.replace(sys.executable, "")
    assert host["platforms"] == ["linux-64-cuda129"]
    assert host["dependencies"]["deep-ep"]["version"] == "==1.2.1"
    # host python/CUDA/PyTorch, pip NCCL: not pixi's; deepep-env (CLI + activation) by version
    assert set(host["dependencies"]) == {"deep-ep", "deepep-env"}
    assert host["dependencies"]["deepep-env"] == "==0.2.0"
    assert host["activation"]["env"] == {"NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1"}
    conda = m["feature"]["lt-conda"]["dependencies"]
    assert conda["pytorch"] == {"version": "==2.10.0", "build": "cuda129*"}
    # conda-forge versions NCCL with four numbers (2.28.9.1): the spec's 2.28.9 is a prefix match
    assert conda["nccl"] == "2.28.9.*" and conda["python"] == "3.12.*" and conda["cuda-version"] == "12.9.*"


def test_pinned_build_is_the_plan_build(proj, lt_world, capsys):
    assert cli_in_process(capsys, "pixi", "sync", "--project", proj.root)[0] == 0
    m = tomllib.loads(proj.pixi_toml.read_text())
    for env in ("lt-host", "lt-conda"):
        assert m["feature"][env]["dependencies"]["deep-ep"]["build"] == lt_world.builds[env]["deep-ep"]


def test_tasks(proj, capsys):
    assert cli_in_process(capsys, "pixi", "sync", "--project", proj.root)[0] == 0
    m = tomllib.loads(proj.pixi_toml.read_text())
    conda_tasks = m["feature"]["lt-conda"]["tasks"]
    assert set(conda_tasks) == {"deepep-test-intranode", "deepep-test-internode", "deepep-test-low-latency"}
    # An NVLink-only spec has no internode test to run.
    assert set(m["feature"]["lt-host"]["tasks"]) == {"deepep-test-intranode", "deepep-test-low-latency"}
    t = conda_tasks["deepep-test-intranode"]
    # pixi's own environment, activated by pixi (the overlay is the deepep-env package's activate.d):
    # no install task, no second prefix, no wrapper.
    assert "depends-on" not in t
    assert t["cmd"] == "python $CONDA_PREFIX/share/deep-ep/tests/test_intranode.py"
    assert "test_low_latency.py" in conda_tasks["deepep-test-low-latency"]["cmd"]
    # Host python: the task runs the spec's interpreter, not whatever `python` is first on PATH, and
    # names no path of this machine: activation sets DEEPEP_ENV_PYTHON from the install marker.
    assert m["feature"]["lt-host"]["tasks"]["deepep-test-intranode"]["cmd"] == \
        '"$DEEPEP_ENV_PYTHON" $CONDA_PREFIX/share/deep-ep/tests/test_intranode.py'
    assert sys.executable not in proj.pixi_toml.read_text()


def test_sync_check_detects_drift(proj, capsys):
    assert cli_in_process(capsys, "pixi", "sync", "--project", proj.root)[0] == 0
    rc, out, _ = cli_in_process(capsys, "pixi", "sync", "--check", "--project", proj.root)
    assert rc == 0 and "fresh" in out
    rc, out, _ = cli_in_process(capsys, "pixi", "sync", "--project", proj.root)
    assert rc == 0 and "unchanged" in out
    lf.set_spec_value(proj, "lt-conda", '[nccl]\nversion = "2.28.9"', '[nccl]\nversion = "2.27.7"')
    before = proj.pixi_toml.read_text()
    rc, out, err = cli_in_process(capsys, "pixi", "sync", "--check", "--project", proj.root)
    assert rc == 1
    assert "out of step" in err and "deepep-env pixi sync" in err
    assert '+nccl = "2.27.7.*"' in out and '-nccl = "2.28.9.*"' in out
    assert proj.pixi_toml.read_text() == before  # --check writes nothing
    rc, out, _ = cli_in_process(capsys, "pixi", "sync", "--check", "--json", "--project", proj.root)
    assert rc == 1 and json.loads(out)["status"] == "stale"


def test_missing_manifest_is_stale(proj, capsys):
    rc, _, err = cli_in_process(capsys, "pixi", "sync", "--check", "--project", proj.root)
    assert rc == 1 and "out of step" in err


def test_repo_pixi_toml_is_valid_and_in_step_with_env_specs(repo_root, pixi_schema, capsys):
    path = repo_root / "pixi.toml"
    assert path.is_file(), "pixi.toml is missing: run `deepep-env pixi sync`"
    m = tomllib.loads(path.read_text())
    validate(m, pixi_schema)
    from deepep_env.lock import read_lock

    locked = sorted(set(read_lock(repo_root / "pixi.lock").envs) - {"default"})
    assert sorted(m["environments"]) == locked
    rc, out, err = cli_in_process(capsys, "pixi", "sync", "--check", "--project", repo_root)
    assert rc == 0, f"pixi.toml drifted from env_specs/ (run `deepep-env pixi sync`): {err}{out[:2000]}"
