"""pixi task `args`: `{{ name }}` placeholders rendered as pixi renders them (issue 13 conformance)."""
from pathlib import Path

import pytest

from deepep_env.base.errors import UserError
from deepep_env.lock.pixi_model import parse_manifest
from deepep_env.views.tasks import render_task_args as _render

P = Path("pixi.toml")


def render_task_args(cmd, declared, given, *, task, path):
    """``declared`` as pixi.toml spells it, checked by the manifest model first."""
    m = parse_manifest({"tasks": {task: {"cmd": cmd, "args": declared}}}, path)
    return _render(cmd, m.features["default"].tasks[task].args or (), given, task=task, path=path)


def test_declared_args_fill_placeholders_in_order_with_defaults():
    declared = ["who", {"arg": "greeting", "default": "hello"}]
    assert render_task_args("echo {{ greeting }}, {{who}}!", declared, ["world"], task="t", path=P) == "echo hello, world!"
    assert render_task_args("echo {{ greeting }}, {{ who }}!", declared, ["a", "hi"], task="t", path=P) == "echo hi, a!"


@pytest.mark.parametrize("cmd, declared, given, msg", [
    ("echo {{ who }}", ["who"], [], "no default"),
    ("echo {{ who }}", ["who"], ["a", "b"], "takes 1 argument"),
    ("echo {{ whom }}", ["who"], ["a"], "declares no such argument"),
    ("echo", [{"default": "x"}], [], "tasks.t.args.0..arg"),
])
def test_bad_task_args_are_one_clear_line(cmd, declared, given, msg):
    with pytest.raises(UserError, match=msg):
        render_task_args(cmd, declared, given, task="t", path=P)


HOSTILE = ["x; touch pwned", "x'; touch pwned; echo '", 'x"; touch pwned; echo "', "$(touch pwned)", "`touch pwned`",
           "-n", "a\\", "it's \"quoted\" \\ $HOME"]


@pytest.mark.parametrize("cmd", ["printf '%s\\n' {{ who }}", "printf '%s\\n' '{{ who }}'", 'printf "%s\\n" "{{ who }}"',
                                 "printf '%s\\n' pre-{{ who }}-post", "printf '%s\\n' $'{{ who }}'",
                                 "printf '%s\\n' \"$(printf '%s' '{{ who }}')\"", "printf '%s\\n' \"`printf '%s' {{ who }}`\"",
                                 "printf '%s\\n' \"$(printf '%s' \"$(printf '%s' {{ who }})\")\""])
@pytest.mark.parametrize("value", HOSTILE)
def test_an_argument_value_is_data_never_code(cmd, value, tmp_path):
    """Issue 26: `{{ who }}` pasted the raw value into `bash -c` (`x; touch /tmp/pwned` ran touch);
    each value is now one literal word, quoted for where it lands (bare, in '…' or in "…")."""
    import subprocess

    line = render_task_args(cmd, ["who"], [value], task="t", path=P)
    out = subprocess.run(["bash", "-c", line], capture_output=True, text=True, cwd=tmp_path, env={"HOME": "/h"})
    want = f"pre-{value}-post" if "pre-" in cmd else value
    assert out.returncode == 0 and out.stdout == want + "\n", (line, out)
    assert not (tmp_path / "pwned").exists()
