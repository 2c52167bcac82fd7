"""Issue 15, the fresh sweep: bad inputs across every command, each must end in one clear line and a
non-zero exit — no traceback, no hang (each run is bounded), nothing half-written in the checkout."""
from __future__ import annotations

import os
import subprocess

import pytest

from cli_runner import cli_subprocess
from platform_fixtures import REPO

NOFILE = "/nonexistent/deepep-env-sweep"
CASES = [
    ["plan", "no-such-env"], ["plan", "gcp-b200", "--demo-host", "no-such-host"], ["plan", NOFILE + ".toml"],
    ["detect", "--root", NOFILE], ["detect", "--root", "/dev/null"],
    ["overlay", "no-such-env"], ["overlay", "gcp-b200", "--root", NOFILE],
    ["activate", "no-such-env", "--prefix", NOFILE], ["activate", "gcp-b200", "--shell", "tcsh"],
    ["run", "no-such-env", "--", "true"],
    ["fetch", "no-such-env"], ["fetch", "h200-nvlink", "--from", NOFILE, "--offline"],
    ["build", "no-such-env"], ["build", "h200-nvlink", "-j", "0"], ["build", "--recipes", NOFILE],
    ["build", "h200-nvlink", "--check-package", "nosuchpkg", "--offline"], ["build", "--ofline"],
    ["lock", "no-such-env"], ["lock", "h200-nvlink", "--check", "--output", NOFILE],
    ["install", "no-such-env"], ["install", "h200-nvlink", "--prefix", "/"], ["install", "h200-nvlink", "--prefix", "/proc/x"],
    ["install", "h200-nvlink", "--lock", NOFILE],
    ["install", "h200-nvlink", "--mirror", f"https://conda.deepep-env.example/h200={NOFILE}"],
    ["pixi", "verdict", "--lock", NOFILE + ".lock"],
    ["diff", NOFILE, NOFILE], ["diff", "lockfiles/h200-nvlink.pixi.lock", "README.md"],
    ["export", NOFILE], ["export", "README.md"],
    ["task", "no-such-task", "-e", "h200-nvlink"],
    ["doctor", "no-such-env"], ["doctor", "gcp-b200", "--root", NOFILE],
    ["publish", "no-such-env", "--to", NOFILE], ["publish", "h200-nvlink", "--to", "ftp://example.invalid/x"],
    ["launch", "no-such-env", "internode"], ["launch", "gcp-b200", "internode", "--nodes", "0"],
    ["launch", "gcp-b200", "internode", "--target", "nomad"],
    ["spec", "show", "no-such-env"], ["pixi", "nosuch"], ["nosuchcommand"],
]


@pytest.mark.parametrize("args", CASES, ids=[" ".join(a) for a in CASES])
def test_bad_input_is_one_clear_line(args, tmp_path):
    env = {**os.environ, "DEEPEP_ENV_PROJECT": str(REPO), "DEEPEP_ENV_STATE": str(tmp_path / "state"),
           "DEEPEP_ENV_CACHE_DIR": str(tmp_path / "cache")}
    before = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
    res = cli_subprocess(*args, env=env)
    assert "Traceback" not in res.stderr + res.stdout, res.stderr
    assert res.returncode != 0, (res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    assert errors and len(errors[0]) < 2000, res.stderr
    after = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
    assert after == before, "the command wrote into the checkout"
