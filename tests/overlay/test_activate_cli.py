"""`deepep-env activate ENV` and `deepep-env run ENV -- CMD`: prefix activation plus the overlay."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cli_runner import cli_subprocess
from deepep_env.base.errors import UserError
from deepep_env.host.context import activation_context
from deepep_env.overlay.activation import run_environment
from deepep_env.formats.prefix import default_prefix, read_prefix_meta
from platform_fixtures import REPO, fake_prefix, has_shell, no_traceback

SCRIPTS = {
    "cuda.sh": 'export FROM_ACTIVATE_D="$CONDA_PREFIX/from sh"\n',
    "cuda.fish": 'set -gx FROM_ACTIVATE_D "$CONDA_PREFIX/from fish"\n',
}
DUMP = "import json, os; print(json.dumps(dict(os.environ)))"


def base_env(tmp_path, **extra) -> dict:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(REPO), "LANG": "C.UTF-8"}
    env.update(extra)
    return env


def eval_in(shell: str, script_text: str, tmp_path, env: dict) -> dict:
    script = tmp_path / f"activate.{shell}"
    script.write_text(script_text)
    if shell == "fish":
        args = ["fish", "--no-config", "-c", f"source {script}; and {sys.executable} -c '{DUMP}'"]
    else:
        args = [shell, "-c", f'. "{script}" && "{sys.executable}" -c \'{DUMP}\'']
    res = subprocess.run(args, capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_activate_eval(host_tree, tmp_path, shell):
    if not has_shell(shell):
        pytest.skip(f"{shell} not installed")
    prefix = fake_prefix(tmp_path / "env", spec_env={"NVSHMEM_QP_DEPTH": "1024"}, scripts=SCRIPTS)
    env = base_env(tmp_path)
    res = cli_subprocess("activate", "gcp-b200", "--root", str(host_tree("gcp-b200")), "--prefix", str(prefix), "--shell", shell, env=env, check=True)
    assert res.stderr == ""  # the right platform, nothing to warn about
    got = eval_in(shell, res.stdout, tmp_path, env)
    assert got["CONDA_PREFIX"] == str(prefix)
    assert got["PATH"].split(":")[0] == str(prefix / "bin")
    assert got["PYTHONPATH"].split(":")[0] == str(prefix / "lib/python3.12/site-packages")
    assert got["FROM_ACTIVATE_D"] == f"{prefix}/from {'fish' if shell == 'fish' else 'sh'}"
    assert got["NVSHMEM_QP_DEPTH"] == "1024"
    assert got["DEEP_EP_DEVICE_TO_HCA_MAPPING"].startswith("0:mlx5_0:1,")
    assert got["NVSHMEM_IB_GID_INDEX"] == "3"
    # pip NVSHMEM inside the prefix's site-packages could load first: preload the env's own.
    assert got["LD_PRELOAD"] == str(prefix / "lib" / "libnvshmem_host.so.3")


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_activating_twice_does_not_grow_paths(host_tree, tmp_path, shell):
    if not has_shell(shell):
        pytest.skip(f"{shell} not installed")
    # With an activate.d script the prepends after it are evaluated by the shell: idempotent too.
    prefix = fake_prefix(tmp_path / "env", scripts=SCRIPTS)
    env = base_env(tmp_path)
    args = ("activate", "gke-a4", "--root", str(host_tree("gke-a4")), "--prefix", str(prefix), "--shell", shell)
    fake_prefix(prefix, env="gke-a4", platforms=["gke-a4"], scripts=SCRIPTS)
    once = eval_in(shell, cli_subprocess(*args, env=env, check=True).stdout, tmp_path, env)
    names = ("PATH", "PYTHONPATH", "LD_PRELOAD", "LD_LIBRARY_PATH")
    env2 = {**env, **{n: once[n] for n in names}}
    twice = eval_in(shell, cli_subprocess(*args, env=env2, check=True).stdout, tmp_path, env2)
    for name in names:
        assert twice[name] == once[name], name
    assert once["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64:/usr/local/nvidia/lib:/usr/local/gib/lib64"
    assert once["LD_PRELOAD"] == str(prefix / "lib" / "libnvshmem_host.so.3")


def test_platform_mismatch_warns_but_activates(host_tree, tmp_path):
    prefix = fake_prefix(tmp_path / "env", platforms=["gcp-b200"])
    res = cli_subprocess("activate", "gcp-b200", "--root", str(host_tree("h200x8-nvlink")), "--prefix", str(prefix), "--shell", "bash", env=base_env(tmp_path))
    assert res.returncode == 0
    assert "warning: detected platform 'nvlink' is not one env 'gcp-b200' targets (gcp-b200)" in res.stderr
    assert "export NVSHMEM_REMOTE_TRANSPORT='none'" in res.stdout


def test_conda_python_gets_no_pythonpath(host_tree, tmp_path):
    prefix = fake_prefix(tmp_path / "env", provider="conda")
    act = activation_context("gcp-b200", root=host_tree("gcp-b200"), prefix=prefix, environ={})
    assert "PYTHONPATH" not in act.overlay.env()


def test_json_shell(host_tree, tmp_path):
    prefix = fake_prefix(tmp_path / "env")
    res = cli_subprocess("activate", "gcp-b200", "--root", str(host_tree("gcp-b200")), "--prefix", str(prefix), "--shell", "json", env=base_env(tmp_path), check=True)
    doc = json.loads(res.stdout)
    assert doc["env_name"] == "gcp-b200" and doc["prefix"] == str(prefix)
    assert doc["env"]["CONDA_PREFIX"] == str(prefix)
    assert {c["rule"] for c in doc["changes"]} >= {"prefix", "host-python", "device-hca-mapping"}


def test_default_prefix_locations(host_tree, tmp_path):
    project = tmp_path / "proj"
    prefix = fake_prefix(project / ".pixi" / "envs" / "gcp-b200")   # pixi's layout (issue 16)
    assert default_prefix("gcp-b200", cwd=str(project), environ={}) == prefix
    res = cli_subprocess("activate", "gcp-b200", "--root", str(host_tree("gcp-b200")), "--shell", "bash", env=base_env(tmp_path), cwd=project, check=True)
    assert f"export CONDA_PREFIX='{prefix}'" in res.stdout
    other = fake_prefix(tmp_path / "elsewhere")
    res = cli_subprocess("activate", "gcp-b200", "--root", str(host_tree("gcp-b200")), "--shell", "bash",
                         env=base_env(tmp_path, DEEPEP_ENV_PREFIX=str(other)), cwd=project, check=True)
    assert f"export CONDA_PREFIX='{other}'" in res.stdout


@pytest.mark.parametrize(
    "setup,args,needle",
    [
        ("none", ["gcp-b200"], "not installed there"),
        ("bad-json", ["gcp-b200"], "not valid JSON"),
        ("other-env", ["gcp-b200"], "holds env 'gke-a4'"),
        ("ok", ["../etc"], "not an env name"),
        ("ok", ["gcp-b200", "--platform", "nope"], "unknown platform"),
        ("ok", ["gcp-b200", "--root", "/nonexistent"], "not a directory"),
        ("typo", ["gcp-b200"], "NVSHMEM_DISABLE_GDRCOPY"),
        ("bad-provider", ["gcp-b200"], "python.provider"),
    ],
)
def test_activate_bad_input(host_tree, tmp_path, setup, args, needle):
    prefix = tmp_path / "env"
    if setup == "ok":
        fake_prefix(prefix)
    elif setup == "bad-json":
        (prefix / "conda-meta").mkdir(parents=True)
        (prefix / "conda-meta" / "deepep-env.json").write_text("{not json")
    elif setup == "other-env":
        fake_prefix(prefix, env="gke-a4")
    elif setup == "typo":
        fake_prefix(prefix, spec_env={"NVSHMEM_DISABLED_GDRCOPY": "1"})
    elif setup == "bad-provider":
        fake_prefix(prefix, provider="pip")
    extra = [] if "--root" in args else ["--root", str(host_tree("gcp-b200"))]
    res = cli_subprocess("activate", *args, *extra, "--prefix", str(prefix), "--shell", "bash", env=base_env(tmp_path))
    assert res.returncode == 2, res.stderr
    no_traceback(res)
    assert needle in res.stderr and res.stdout == ""


def test_activate_argparse_usage(tmp_path):
    res = cli_subprocess("activate", "--help", env=base_env(tmp_path))
    assert res.returncode == 0 and "--shell" in res.stdout
    res = cli_subprocess("activate", "x", "--shell", "tcsh", env=base_env(tmp_path))
    assert res.returncode == 2 and "invalid choice" in res.stderr


def test_activate_path_imports_no_heavy_libraries(host_tree, tmp_path):
    prefix = fake_prefix(tmp_path / "env")
    code = (
        "import sys, io, contextlib\n"
        "from deepep_env.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    rc = main(['activate', 'gcp-b200', '--root', {str(host_tree('gcp-b200'))!r}, '--prefix', {str(prefix)!r}])\n"
        "print(rc, sorted(m.split('.')[0] for m in sys.modules))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=base_env(tmp_path))
    rc, _, mods = res.stdout.partition(" ")
    assert rc == "0", res.stderr
    for heavy in ("typer", "click", "rich", "pydantic", "rattler", "yaml", "tomllib", "subprocess"):
        assert f"'{heavy}'" not in mods, heavy


def test_prefix_meta_reader(tmp_path):
    fake_prefix(tmp_path / "p", spec_env={"A": "1"}, executable="/opt/torch/.venv/bin/python3")
    m = read_prefix_meta(tmp_path / "p", "gcp-b200")
    assert (m.env, m.platforms, m.python_provider, m.python_version, m.spec_env) == ("gcp-b200", ("gcp-b200",), "host", "3.12", {"A": "1"})
    assert m.python_executable == "/opt/torch/.venv/bin/python3"
    (tmp_path / "p" / "conda-meta" / "deepep-env.json").write_text(json.dumps({"env": "gcp-b200", "python": {"version": "twelve"}}))
    with pytest.raises(UserError, match="python.version"):
        read_prefix_meta(tmp_path / "p")


# -- run ----------------------------------------------------------------------------------------
def test_run_executes_inside_the_env(host_tree, tmp_path):
    prefix = fake_prefix(tmp_path / "env", scripts=SCRIPTS, spec_env={"NVSHMEM_QP_DEPTH": "2048"})
    env = base_env(tmp_path, TORCH_NCCL_USE_COMM_NONBLOCKING="0")
    res = cli_subprocess("run", "gcp-b200", "--root", str(host_tree("gke-a4")), "--prefix", str(prefix), "--",
                         sys.executable, "-c", DUMP, env=env)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert got["CONDA_PREFIX"] == str(prefix)
    assert got["FROM_ACTIVATE_D"] == f"{prefix}/from sh"  # activate.d sourced in bash, fish ones ignored
    assert got["NVSHMEM_QP_DEPTH"] == "2048"
    assert "TORCH_NCCL_USE_COMM_NONBLOCKING" not in got  # gke-a4 unsets it
    assert got["LD_LIBRARY_PATH"].startswith("/usr/local/nvidia/lib64:")
    assert "is not one env 'gcp-b200' targets" in res.stderr  # a gke-a4 host for a gcp-b200 env


def test_run_exit_codes(host_tree, tmp_path):
    prefix = fake_prefix(tmp_path / "env")
    root = str(host_tree("gcp-b200"))
    env = base_env(tmp_path)
    res = cli_subprocess("run", "gcp-b200", "--root", root, "--prefix", str(prefix), "--", sys.executable, "-c", "raise SystemExit(7)", env=env)
    assert res.returncode == 7
    res = cli_subprocess("run", "gcp-b200", "--root", root, "--prefix", str(prefix), "--", "no-such-command-xyz", env=env)
    assert res.returncode == 127 and "command not found: no-such-command-xyz" in res.stderr
    no_traceback(res)
    res = cli_subprocess("run", "gcp-b200", "--root", root, "--prefix", str(prefix), env=env)
    assert res.returncode == 2 and "no command given" in res.stderr


def test_run_passes_arguments_verbatim(host_tree, tmp_path):
    prefix = fake_prefix(tmp_path / "env")
    args = ["--root", "$(touch x)", "it's", "-c", "a\nb"]
    res = cli_subprocess("run", "gcp-b200", "--root", str(host_tree("gcp-b200")), "--prefix", str(prefix), "--",
                         sys.executable, "-c", "import sys, json; print(json.dumps(sys.argv[1:]))", *args, env=base_env(tmp_path))
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == args


def test_failing_activation_script_is_a_user_error(host_tree, tmp_path):
    prefix = fake_prefix(tmp_path / "env", scripts={"bad.sh": "echo broken >&2; return 3\n"})
    act = activation_context("gcp-b200", root=host_tree("gcp-b200"), prefix=prefix, environ={})
    with pytest.raises(UserError, match="activation script failed"):
        run_environment(act.overlay, {"PATH": os.environ["PATH"]})


def test_activate_on_a_demo_host_prints_the_prefix_and_the_captured_hosts_overlay(tmp_path):
    """`activate gcp-b200 --demo-host gcp-b200-demo` (issue 40.5): the prefix activation and the
    overlay of the bundled capture, with nothing naming the temporary tree it was read from."""
    prefix = fake_prefix(tmp_path / "env")
    env = base_env(tmp_path, TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    res = cli_subprocess("activate", "gcp-b200", "--demo-host", "gcp-b200-demo", "--prefix", str(prefix),
                         "--shell", "json", env=env, check=True)
    doc = json.loads(res.stdout)
    text = json.dumps(doc["changes"])
    assert str(prefix) in text and "DEEP_EP_DEVICE_TO_HCA_MAPPING" in text and "deepep-env-demo-host-" not in res.stdout
    assert list((tmp_path / "tmp").iterdir()) == []      # the capture's tree is gone afterwards
    bad = cli_subprocess("activate", "gcp-b200", "--demo-host", "nosuch", "--prefix", str(prefix), env=env)
    assert bad.returncode != 0 and "--demo-host" in bad.stderr and "gcp-b200-demo" in bad.stderr
    no_traceback(bad)
