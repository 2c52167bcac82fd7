"""Issue 15: children die with their parent. A build script still running when `deepep-env build`
is killed with SIGKILL is terminated by the watchdog (deepep_env/base/children.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from build_fixtures import add_recipe, sandbox
from cli_runner import cli_argv, cli_env


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="Linux /proc needed")
def test_a_build_script_dies_with_a_killed_deepep_env(tmp_path):
    sb = sandbox(tmp_path / "p")
    sb.fill_cache()
    marker = tmp_path / "script.pid"
    add_recipe(sb.graph, "slowpoke", f"""
        package: {{name: slowpoke, version: "1.0"}}
        build:
          string: ${{{{ build_string }}}}
          noarch: generic
          script:
            - echo $$ > {marker}
            - sleep 120
        """)
    proc = subprocess.Popen(cli_argv("build", "--recipes", sb.graph, "--store", sb.store, "--channel", sb.channel,
                                     "--source-cache", sb.cache, "--offline"),
                            env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert marker.exists(), "the build script never started"
        time.sleep(1.0)                       # let the watchdog take a snapshot that includes it
        script = int(marker.read_text())
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and _alive(script):
            time.sleep(0.2)
        assert not _alive(script), "the build script outlived deepep-env"
    finally:
        if proc.poll() is None:
            proc.kill()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False
