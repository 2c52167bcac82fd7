"""Renderers: hostile values stay data in every shell and format; the CLI renders each format."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from cli_runner import cli_subprocess
from deepep_env.base.errors import UserError
from deepep_env.overlay.changes import Note, Overlay, PrependPath, Set, Source, Unset
from deepep_env.overlay.render import FORMATS, dotenv_quote, render
from platform_fixtures import has_shell, no_traceback

HOSTILE = {
    "V_SUBST": "$(touch {sentinel})",
    "V_BACKTICK": "`touch {sentinel}`",
    "V_SQUOTE": "it's 'quoted'",
    "V_DQUOTE": 'say "hi" \\ and \\\\',
    "V_NEWLINE": "line1\nline2\n; touch {sentinel}",
    "V_DOLLAR": "$HOME ${PATH} $$ $1",
    "V_SEMI": "a; touch {sentinel}; b",
    "V_GLOB": "* ? [a-z] ~",
    "V_BANG": "!! !$ -n -e",
    "V_EMPTY": "",
    "V_UNICODE": "ü 中文 \t tab",
    "V_FISHY": "(touch {sentinel}) {a,b} %self",
}

DUMP = "import json, os; print(json.dumps(dict(os.environ)))"


def hostile_overlay(sentinel: str) -> Overlay:
    changes = [Set(k, v.replace("{sentinel}", sentinel), "test", f"fact\n$(touch {sentinel})") for k, v in HOSTILE.items()]
    changes.append(Unset("V_GONE", "test", "fact"))
    changes.append(PrependPath("V_PATHLIKE", ("/new dir/$(touch x)", "/two"), "test", "fact"))
    notes = (Note(f"rule\ntouch {sentinel}", "fact\n`touch x`", f"message\n$(touch {sentinel})", "warning"),)
    return Overlay("test\n$(touch x)", tuple(changes), notes)


def expected(sentinel: str) -> dict:
    return {k: v.replace("{sentinel}", sentinel) for k, v in HOSTILE.items()}


def run_shell(shell: str, script: str, env: dict) -> dict:
    if shell == "fish":
        prog = f"source {script}; and {sys.executable} -c '{DUMP}'"
        args = ["fish", "--no-config", "-c", prog]
    else:
        prog = f'. "{script}" && "{sys.executable}" -c \'{DUMP}\''
        args = [shell, "-f", "-c", prog] if shell == "zsh" else [shell, "-c", prog]
    res = subprocess.run(args, capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
@pytest.mark.parametrize("with_environ", [False, True], ids=["eval-time", "computed"])
def test_hostile_values_stay_data(tmp_path, shell, with_environ):
    if not has_shell(shell):
        pytest.skip(f"{shell} not installed")
    sentinel = str(tmp_path / "PWNED")
    base = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "V_GONE": "x", "V_PATHLIKE": "/old"}
    text = render(hostile_overlay(sentinel), shell, environ=base if with_environ else None)
    script = tmp_path / f"overlay.{shell}"
    script.write_text(text)
    env = run_shell(shell, str(script), base)
    assert not os.path.exists(sentinel), "a value or a comment was executed"
    for k, v in expected(sentinel).items():
        assert env[k] == v, k
    assert "V_GONE" not in env
    assert env["V_PATHLIKE"] == "/new dir/$(touch x):/two:/old"


def test_activation_scripts_are_sourced_per_shell(tmp_path):
    ov = Overlay("p", (Source("/a b/x.sh", "sh", "r", "f"), Source("/a b/x.fish", "fish", "r", "f")))
    assert ". '/a b/x.sh'" in render(ov, "bash") and "x.fish" not in render(ov, "bash")
    assert "source '/a b/x.fish'" in render(ov, "fish") and "x.sh'" not in render(ov, "fish")


def test_json_env_and_changes():
    doc = json.loads(render(hostile_overlay("/s"), "json"))
    assert doc["env"]["V_GONE"] is None
    assert doc["env"]["V_NEWLINE"] == "line1\nline2\n; touch /s"
    assert doc["env"]["V_PATHLIKE"] == "/new dir/$(touch x):/two"
    pp = next(c for c in doc["changes"] if c["name"] == "V_PATHLIKE")
    assert pp["op"] == "prepend-path" and pp["entries"] == ["/new dir/$(touch x)", "/two"]
    assert doc["notes"][0]["level"] == "warning"
    assert doc["_meta"] == {"format": "deepep-env/overlay", "version": 1}


def test_k8s_yaml_and_json_are_valid_and_exact():
    ov = hostile_overlay("/s")
    items = yaml.safe_load(render(ov, "k8s"))["env"]
    want = {k: v for k, v in ov.env().items() if v is not None}
    assert {i["name"]: i["value"] for i in items} == want
    assert json.loads(render(ov, "k8s-json")) == items
    kv = pytest.importorskip("kubernetes_validate")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
           "spec": {"containers": [{"name": "c", "image": "busybox", "env": items}]}}
    kv.validate(pod, kv.latest_version(), strict=True)
    assert "# unset V_GONE" in render(ov, "k8s")


def test_dotenv_quoting():
    assert dotenv_quote("A", "$(rm -rf /)") == "'$(rm -rf /)'"
    assert dotenv_quote("A", 'it\'s "x"\nnext') == '"it\'s \\"x\\"\\nnext"'
    with pytest.raises(UserError, match="not representable"):
        dotenv_quote("A", "it's ${HOME}")
    text = render(Overlay("p", (Set("A", "x y", "r", "f"), Unset("B", "r", "f"))), "dotenv")
    assert "A='x y'" in text and "# unset B" in text


def test_unknown_format():
    with pytest.raises(UserError, match="unknown format"):
        render(Overlay("p", ()), "powershell")


# -- the overlay command ------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", FORMATS)
def test_overlay_cli_every_format(host_tree, fmt):
    res = cli_subprocess("overlay", "--root", str(host_tree("gke-a4")), "--format", fmt, check=True)
    no_traceback(res)
    assert "DEEP_EP_DEVICE_TO_HCA_MAPPING" in res.stdout


def test_overlay_cli_json_with_platform_override(host_tree):
    res = cli_subprocess("overlay", "--root", str(host_tree("gcp-b200")), "--platform", "nvlink", "--format", "json", check=True)
    doc = json.loads(res.stdout)
    assert doc["platform"] == "nvlink"
    assert doc["env"]["NVSHMEM_REMOTE_TRANSPORT"] == "none"
    assert "turns the remote transport off" in res.stderr  # warning notes go to stderr


def test_overlay_cli_eval_in_bash(host_tree, tmp_path):
    res = cli_subprocess("overlay", "--root", str(host_tree("gcp-b200-scrambled")), check=True)
    script = tmp_path / "o.sh"
    script.write_text(res.stdout)
    env = run_shell("bash", str(script), {"PATH": os.environ["PATH"]})
    assert env["DEEP_EP_DEVICE_TO_HCA_MAPPING"].startswith("0:mlx5_5:1,1:mlx5_2:1,")
    assert env["NVSHMEM_IB_GID_INDEX"] == "3"


@pytest.mark.parametrize("args,needle", [(["--format", "xml"], "unknown format"), (["--platform", "b9000"], "unknown platform")])
def test_overlay_cli_bad_input(host_tree, args, needle):
    res = cli_subprocess("overlay", "--root", str(host_tree("gcp-b200")), *args)
    assert res.returncode == 2 and needle in res.stderr
    no_traceback(res)
