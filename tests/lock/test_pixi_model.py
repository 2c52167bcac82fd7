"""pixi.toml's tasks and environments as typed data (deepep_env/lock/pixi_model.py): what pixi accepts is
accepted, what it refuses is one line naming the key (issue 26)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from deepep_env.base.errors import UserError
from deepep_env.lock.pixi_model import DependsOn, TaskArg, parse_manifest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

P = Path("pixi.toml")
GOOD = """
[workspace]
channels = ["conda-forge", { channel = "https://example.invalid/c", priority = 1 }]
platforms = ["linux-64", { platform = "linux-aarch64", cuda = "12.9", glibc = "2.28" }]
[dependencies]
python = "3.12.*"
[tasks]
plain = "echo hi"
alias = [{ task = "plain" }, "table"]
table = { cmd = ["echo", "a b"], depends-on = "plain", cwd = "sub", env = { X = "1" }, description = "d", inputs = ["a"], outputs = ["b"] }
greet = { cmd = "echo {{ who }} {{ how }}", args = ["who", { arg = "how", default = "hi", choices = ["hi", "yo"] }] }
dep = { depends-on = [{ task = "greet", args = ["w"] }] }
[activation]
env = { A = "1" }
[feature.gpu.dependencies]
nccl = { version = "2.28.*", build = "h*" }
[feature.gpu.pypi-dependencies]
np2typing = { version = "*", extras = ["x"], editable = false }
[feature.gpu]
platforms = ["linux-64"]
channels = ["conda-forge"]
[environments]
gpu = ["gpu"]
solo = { features = ["gpu"], solve-group = "g", no-default-feature = true }
"""


def test_what_pixi_accepts_is_accepted():
    m = parse_manifest(tomllib.loads(GOOD), P)
    t = m.tasks_of("gpu")
    assert t["plain"].cmd == "echo hi" and t["alias"].cmd is None
    assert t["alias"].depends_on == (DependsOn("plain"), DependsOn("table"))
    assert t["table"].cmd == "echo 'a b'" and t["table"].env == {"X": "1"} and t["table"].cwd == "sub"
    assert t["greet"].args == (TaskArg("who"), TaskArg("how", "hi", ("hi", "yo")))
    assert t["dep"].depends_on == (DependsOn("greet", ("w",)),)
    assert m.tasks_of("solo") == {} and m.activation_env("gpu") == {"A": "1"}
    assert m.explicit("gpu") == ({"python", "nccl"}, {"np2typing"}) and m.explicit("solo") == ({"nccl"}, {"np2typing"})
    assert set(m.environments) == {"default", "gpu", "solo"}


@pytest.mark.parametrize("toml, field", [
    ('[tasks]\nt = 7', "tasks.t"),
    ('[tasks]\nt = { cmd = "x", depends-on = 7 }', "tasks.t.depends-on"),
    ('[tasks]\nt = { cmd = "x", depends-on = [{ name = "y" }] }', "tasks.t.depends-on[0].name"),
    ('[tasks]\nt = { cmd = "x", env = "X=1" }', "tasks.t.env"),
    ('[tasks]\nt = { cmd = [] }', "tasks.t.cmd"),
    ('[tasks]\nt = { cmd = "x", cwd = 1 }', "tasks.t.cwd"),
    ('[tasks]\nt = { cmd = "x", clean-env = true }', "tasks.t.clean-env"),
    ('[tasks]\nt = { cmd = "x", args = ["a", "a"] }', "tasks.t.args"),
    ('[tasks]\nt = { cmd = "x", inputs = "a" }', "tasks.t.inputs"),
    ('tasks = 5', "tasks"),
    ('feature = 5', "feature"),
    ('[feature]\nx = 5', "feature.x"),
    ('[environments]\ne = { features = "x" }', "environments.e.features"),
    ('[environments]\ne = { no-default-feature = "yes" }', "environments.e.no-default-feature"),
    ('[activation]\nscripts = "a.sh"', "activation.scripts"),
    ('[feature.x]\nplatforms = [{ platform = "linux-64" }]\n[environments]\ne = ["x"]', "feature.x.platforms[0]"),
    ('[workspace]\nchannels = [{ channel = "c", priority = "high" }]', "workspace.channels[0].priority"),
    ('[pypi-dependencies]\nx = 5', "pypi-dependencies.x"),
])
def test_what_pixi_refuses_is_one_line_naming_the_key(toml, field):
    with pytest.raises(UserError) as e:
        parse_manifest(tomllib.loads(toml), P)
    assert f"pixi.toml: {field}: " in str(e.value) and "\n" not in str(e.value), str(e.value)
