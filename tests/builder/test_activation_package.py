"""The host overlay as conda activation (issue 16): the deepep-env package (recipes/deepep-env, built
by the real rattler-build in the lock world) installed from the root pixi.lock into pixi's prefix,
activated by rattler's own activation code — the library pixi uses — in bash, zsh and fish.

The activated environment must hold exactly the variables and values `deepep-env overlay` computes
for the same captured host, and deactivation must put every one of them back."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import lock_fixtures as lf
from cli_runner import cli_subprocess
from platform_fixtures import REPO, has_shell

SHELLS = ("bash", "zsh", "fish")


@pytest.fixture(scope="module")
def installed(lt_world, tmp_path_factory):
    return lf.installed_lt_host(lt_world, tmp_path_factory.mktemp("act") / "proj")


def _rattler_run(prefix: Path, shell: str, env: dict[str, str]) -> tuple[dict, dict, subprocess.CompletedProcess]:
    """Activate ``prefix`` with rattler's activation script for ``shell``, dump the environment, then
    deactivate (rattler: activating another prefix first runs the current one's deactivate.d)."""
    from rattler.shell import ActivationVariables, Shell, activate

    empty = prefix.parent / "empty-env"
    (empty / "conda-meta").mkdir(parents=True, exist_ok=True)
    sh = getattr(Shell, shell)
    act = activate(prefix, ActivationVariables(None, env["PATH"].split(os.pathsep)), sh).script
    deact = activate(empty, ActivationVariables(prefix, None), sh).script
    dump = prefix.parent / f"{shell}.env"
    prog = f"{act}\nenv -0 > {dump}.1\n{deact}\nenv -0 > {dump}.2\n"
    res = subprocess.run([shell, "-c", prog], env=env, capture_output=True, text=True, timeout=120)

    def read(p: Path) -> dict[str, str]:
        return dict(x.split("=", 1) for x in p.read_text().split("\0") if "=" in x) if p.exists() else {}

    return read(Path(f"{dump}.1")), read(Path(f"{dump}.2")), res


def _overlay_env(prefix: Path, root: Path) -> dict[str, str]:
    out = cli_subprocess("overlay", "--root", root, "--platform", "gcp-b200", "--prefix", prefix, "-f", "json",
                         env=dict(os.environ, PYTHONPATH=str(REPO)), check=True)
    return {k: v for k, v in json.loads(out.stdout)["env"].items() if v is not None}


@pytest.mark.parametrize("shell", SHELLS)
def test_rattler_activation_applies_the_overlay_and_deactivation_restores(installed, host_tree, shell):
    if not has_shell(shell):
        pytest.skip(f"{shell} not installed")
    proj, prefix = installed
    root = host_tree("gcp-b200")
    want = _overlay_env(prefix, root)
    assert want["NVSHMEM_IB_GID_INDEX"] == "3" and want["DEEP_EP_DEVICE_TO_HCA_MAPPING"].startswith("0:mlx5_0:1")
    base = dict(os.environ, DEEPEP_ENV_HOST_ROOT=str(root), DEEPEP_ENV_PLATFORM="gcp-b200",
                NVSHMEM_IB_GID_INDEX="7")   # a value the user had: activation replaces it, deactivation restores it
    active, after, res = _rattler_run(prefix, shell, base)
    assert res.returncode == 0, res.stderr
    assert active["CONDA_PREFIX"] == str(prefix)
    assert {k: active.get(k) for k in want} == want
    restored = {k: after.get(k) for k in [*want, "PYTHONPATH", "_DEEPEP_ENV_UNDO"]}
    assert restored == {k: base.get(k) for k in restored}


def test_the_same_environment_through_every_door(installed, host_tree):
    """rattler's activation (pixi run / pixi shell), conda's way (source activate.d in the shell) and
    `deepep-env activate` give the same overlay variables."""
    proj, prefix = installed
    root = host_tree("gcp-b200")
    want = _overlay_env(prefix, root)
    base = dict(os.environ, DEEPEP_ENV_HOST_ROOT=str(root), DEEPEP_ENV_PLATFORM="gcp-b200")
    rattler_env, _, _ = _rattler_run(prefix, "bash", base)
    conda_like = subprocess.run(["bash", "-c", f'export CONDA_PREFIX={prefix}; '
                                 f'for f in {prefix}/etc/conda/activate.d/*.sh; do . "$f"; done; env -0'],
                                env=base, capture_output=True, check=True).stdout.decode()
    conda_env = dict(x.split("=", 1) for x in conda_like.split("\0") if "=" in x)
    script = cli_subprocess("activate", "lt-host", "--root", root, "--platform", "gcp-b200", "--prefix", prefix,
                            "--shell", "bash", env=dict(base, PYTHONPATH=str(REPO)), check=True).stdout
    ours = subprocess.run(["bash", "-c", script + "\nenv -0"], env=base, capture_output=True, check=True).stdout.decode()
    ours_env = dict(x.split("=", 1) for x in ours.split("\0") if "=" in x)
    for got in (rattler_env, conda_env, ours_env):
        assert {k: got.get(k) for k in want} == want


def test_silent_and_safe(installed, tmp_path):
    """A host with no GPU: nothing printed, nothing set. A broken host tree: one warning line, the
    activation still succeeds. DEEPEP_ENV_NO_OVERLAY=1: skipped. (A prefix as pixi installs it: no
    deepep-env install marker, so no spec [env] either: pixi applies that itself.)"""
    import shutil

    proj, installed_prefix = installed
    prefix = tmp_path / "pixi-env"
    shutil.copytree(installed_prefix, prefix, symlinks=True)
    (prefix / "conda-meta" / "deepep-env").unlink()
    hook = [sys.executable, str(prefix / "share" / "deepep-env" / "hook.py"), "--shell", "sh", "--prefix", str(prefix)]
    empty = tmp_path / "nogpu"   # a machine with nothing under /sys and /proc to act on
    (empty / "sys").mkdir(parents=True)
    (empty / "proc").mkdir()
    res = subprocess.run(hook, env=dict(os.environ, DEEPEP_ENV_HOST_ROOT=str(empty)), capture_output=True, text=True)
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "")
    res = subprocess.run(hook, env=dict(os.environ, DEEPEP_ENV_HOST_ROOT=str(tmp_path / "absent")),
                         capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout == ""
    assert len(res.stderr.splitlines()) == 1 and "host overlay not applied" in res.stderr
    res = subprocess.run(hook, env=dict(os.environ, DEEPEP_ENV_NO_OVERLAY="1"), capture_output=True, text=True)
    assert (res.returncode, res.stdout) == (0, "")


def test_the_package_holds_the_activation_alone(installed):
    """The package is the activation (issue 50): its hook runs the package's own copy of deepep_env (never
    another on sys.path), which holds exactly base/layers.py's ACTIVATION modules: no builder, lock,
    envspec or views, and no bin/deepep-env (the tool is installed beside the environment)."""
    from deepep_env.base.layers import ACTIVATION

    proj, prefix = installed
    share = prefix / "share" / "deepep-env"
    res = subprocess.run([sys.executable, "-I", str(share / "hook.py"), "--help"], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=""), cwd=str(prefix))
    assert res.returncode == 0 and "--shell" in res.stdout
    assert not (prefix / "bin" / "deepep-env").exists()
    lib = share / "lib"
    shipped = {".".join(p.relative_to(lib).with_suffix("").parts).removesuffix(".__init__")
               for p in lib.rglob("*.py")}
    assert shipped == set(ACTIVATION)
