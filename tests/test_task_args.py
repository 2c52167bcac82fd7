"""pixi task `args`: `{{ name }}` placeholders rendered as pixi renders them (issue 13 conformance)."""
from pathlib import Path

import pytest

from deepep_env.errors import UserError
from deepep_env.tasks import render_task_args

P = Path("pixi.toml")


def test_declared_args_fill_placeholders_in_order_with_defaults():
    declared = ["who", {"arg": "greeting", "default": "hello"}]
    assert render_task_args("echo {{ greeting }}, {{who}}!", declared, ["world"], task="t", path=P) == "echo hello, world!"
    assert render_task_args("echo {{ greeting }}, {{ who }}!", declared, ["a", "hi"], task="t", path=P) == "echo hi, a!"


@pytest.mark.parametrize("cmd, declared, given, msg", [
    ("echo {{ who }}", ["who"], [], "no default"),
    ("echo {{ who }}", ["who"], ["a", "b"], "takes 1 argument"),
    ("echo {{ whom }}", ["who"], ["a"], "declares no such argument"),
    ("echo", [{"default": "x"}], [], "neither a name"),
])
def test_bad_task_args_are_one_clear_line(cmd, declared, given, msg):
    with pytest.raises(UserError, match=msg):
        render_task_args(cmd, declared, given, task="t", path=P)
