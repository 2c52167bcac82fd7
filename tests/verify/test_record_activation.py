"""Records bind to what runs, not to the tool's version (issue 50).

- A record made with ``deepep-env record`` (and ``task``) keeps the activation it ran under as data:
  what the environment's own ``deepep-env`` package computed on that host, each variable with the rule
  that set it and the prefix written as ``$CONDA_PREFIX``, and the digest of it (record v2).
- A tool-only edit (a comment in builder/plan.py, lock/, envspec/) leaves the activation package's id,
  and so every lock and every record, as it was: ``lock all --only deepep-env --check`` passes with the
  committed pixi.lock and ``verified --json`` gives the same cells; an edit of an overlay rule fails it.
  Each is run as a user would: the CLI in a subprocess, over an edited copy of the package.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import lock_fixtures as lf
from platform_fixtures import REPO
from verify_fixtures import DEEPEP_OUTPUT

from deepep_env.base.errors import UserError
from deepep_env.verify.activation import digest_of
from deepep_env.verify.schema import check_record


@pytest.fixture(scope="module")
def installed(lt_world, tmp_path_factory):
    return lf.installed_lt_host(lt_world, tmp_path_factory.mktemp("rec-act") / "proj")


def _cli(*args: object, cwd: Path, pythonpath: Path = REPO, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ if env is None else env, PYTHONPATH=str(pythonpath))
    return subprocess.run([sys.executable, "-m", "deepep_env.cli.main", *map(str, args)], cwd=cwd, env=e,
                          capture_output=True, text=True, timeout=300)


def test_a_record_keeps_the_activation_it_ran_under(installed, host_tree, tmp_path):
    proj, prefix = installed
    log = tmp_path / "out.log"
    log.write_text(DEEPEP_OUTPUT)
    root = host_tree("gcp-b200")
    res = _cli("record", "lt-host", "--test", "intranode", "--exit-code", "0", "--log", log, "--root", root,
               "--platform", "gcp-b200", "--prefix", prefix, "--json", cwd=proj.root)
    assert res.returncode == 0, res.stderr
    rec = json.loads(res.stdout)
    assert rec["format"] == "deepep-env/test-record/v2"
    act = rec["activation"]
    assert act["package"].startswith("deepep-env-0.2.0-h") and act["platform"] == "gcp-b200"
    by_name = {v["name"]: v for v in act["variables"]}
    # the captured A4 host's overlay, as values: GID index from its GID table, GPU->HCA from its PCIe tree
    assert by_name["NVSHMEM_IB_GID_INDEX"]["value"] == "3"
    assert by_name["DEEP_EP_DEVICE_TO_HCA_MAPPING"]["value"].startswith("0:mlx5_0:1")
    assert all(v["rule"] for v in act["variables"])
    assert str(prefix) not in json.dumps(act)            # the prefix is $CONDA_PREFIX: records of two machines compare
    assert act["digest"] == digest_of(act["variables"])
    check_record(rec, Path("rec.json"))                  # readers accept what record wrote


def test_an_edited_activation_is_refused_by_readers(installed, host_tree, tmp_path):
    proj, prefix = installed
    res = _cli("record", "lt-host", "--test", "intranode", "--exit-code", "0", "--root", host_tree("gcp-b200"),
               "--platform", "gcp-b200", "--prefix", prefix, "--json", cwd=proj.root)
    rec = json.loads(res.stdout)
    rec["activation"]["variables"][0]["value"] = "edited"
    with pytest.raises(UserError, match="activation"):
        check_record(rec, Path("rec.json"))
    v1 = {k: v for k, v in rec.items() if k != "activation"} | {"format": "deepep-env/test-record/v1"}
    assert check_record(v1, Path("old.json")) is v1       # v1 records stay readable


def _edited_tool(tmp_path: Path, rel: str) -> Path:
    """A copy of this checkout's deepep_env with a comment appended to ``rel``; returns the folder to put on PYTHONPATH."""
    base = tmp_path / f"pkg-{rel.replace('/', '-')}"
    shutil.copytree(REPO / "deepep_env", base / "deepep_env", ignore=shutil.ignore_patterns("__pycache__"))
    f = base / "deepep_env" / rel
    f.write_text(f.read_text() + "\n# a comment: nothing that runs changes\n")
    return base


def _project(tmp_path: Path) -> Path:
    """The committed project (specs, recipes, pixi.lock, records) in a private folder."""
    dst = tmp_path / "project"
    for name in ("env_specs", "recipes", "verified", "lockfiles"):
        shutil.copytree(REPO / name, dst / name)
    for name in ("pixi.lock", "pixi.toml", "pyproject.toml"):
        shutil.copy2(REPO / name, dst / name)
    return dst


@pytest.mark.parametrize("rel", ["builder/plan.py", "lock/tool.py", "envspec/wheel_pins.py", "views/planning.py",
                                 "cli/lock.py", "__init__.py"])
def test_a_tool_only_edit_keeps_the_lock_and_the_records(tmp_path, rel):
    proj = _project(tmp_path)
    env = dict(os.environ, DEEPEP_ENV_STATE=str(tmp_path / "state"))
    before = _cli("verified", "--json", cwd=proj, env=env)
    pkg = _edited_tool(tmp_path, rel)
    check = _cli("lock", "all", "--only", "deepep-env", "--check", cwd=proj, pythonpath=pkg, env=env)
    assert check.returncode == 0, check.stderr
    after = _cli("verified", "--json", cwd=proj, pythonpath=pkg, env=env)
    assert json.loads(after.stdout)["cells"] == json.loads(before.stdout)["cells"]


@pytest.mark.parametrize("rel", ["overlay/rules.py", "platform/probes_rdma.py", "cli/hook.py"])
def test_an_activation_edit_fails_the_lock_check(tmp_path, rel):
    proj = _project(tmp_path)
    pkg = _edited_tool(tmp_path, rel)
    check = _cli("lock", "all", "--only", "deepep-env", "--check", cwd=proj, pythonpath=pkg,
                 env=dict(os.environ, DEEPEP_ENV_STATE=str(tmp_path / "state")))
    assert check.returncode == 1
    assert "this checkout builds" in check.stderr and len(check.stderr.strip().splitlines()) == 1


def test_the_digest_a_record_binds_to_golden():
    """The pre-image of one digest, spelled out: the sorted sha256 of h200-nvlink's three packages (DeepEP,
    NVSHMEM, the activation), one a line. A change of the formula would stale every record: it fails here."""
    import hashlib

    from deepep_env.lock.digest import section_digest

    class P:
        def __init__(self, sha: str) -> None:
            self.sha256, self.name, self.version, self.build = sha, "x", "0", "0"

    shas = ["4f8602b05c207d7a37e31b221d1060d7d10b42b9461ece7ef7bf0e2ae87487ef",
            "215107b573ed97b7f2f80c96ec7550a78f14a17ceaa6bf72e6613fb34449788c",
            "364add1f4c7d818128494863b7b3d30addf2a36bddbe8ca77f70ef1f8d762d42"]
    pre_image = "\n".join(sorted(shas))
    assert section_digest(P(s) for s in shas) == "sha256:" + hashlib.sha256(pre_image.encode()).hexdigest() \
        == "sha256:05ad243219ed0015a3be43e09a733a951c846244c6f13202eadc3c8821914a47"
