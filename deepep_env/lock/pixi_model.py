"""pixi.toml's tasks, features and environments as typed data, checked with pixi's own rules before
anything runs (pixi_manifest's ``TomlTask``/``TomlEnvironment``, which deny unknown fields):

- a task is a string (its command), a list (an alias: the tasks it depends on), or a table with
  ``cmd`` (a string or a list of strings) and/or ``depends-on`` (a task name, a ``{task, args}``
  table, or a list of them); ``env`` is a table of strings, ``args`` a list of names or
  ``{arg, default}`` tables, ``cwd``/``description`` strings, ``inputs``/``outputs`` lists;
- ``[environments]``: each a list of feature names or ``{features, solve-group, no-default-feature}``,
  every feature named defined under ``[feature]``;
- ``activation.env`` a table of strings, ``dependencies`` a table.

Anything else is one :class:`~deepep_env.base.errors.UserError` naming the file, the key and what would
be accepted. Stdlib only: ``deepep-env task`` imports this.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from deepep_env.base.errors import UserError
from deepep_env.base.readfile import read_toml

TASK_KEYS = ("cmd", "depends-on", "depends_on", "cwd", "env", "description", "args", "inputs", "outputs",
             "clean-env", "default-environment")
ENV_KEYS = ("features", "solve-group", "no-default-feature")
A_TASK = 'a command string, a list of task names, or a table with `cmd` and/or `depends-on`'
A_DEP = 'a task name, { task = "name", args = [...] }, or a list of them'
AN_ARG = '["who", { arg = "greeting", default = "hi" }]'


@dataclass(frozen=True)
class TaskArg:
    name: str
    default: Optional[str] = None
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class DependsOn:
    task: str
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Task:
    name: str
    cmd: Optional[str] = None                 # None: an alias, only its dependencies run
    depends_on: tuple[DependsOn, ...] = ()
    cwd: Optional[str] = None
    env: dict[str, str] = field(default_factory=dict)
    args: Optional[tuple[TaskArg, ...]] = None  # None: undeclared, extra arguments are appended
    description: Optional[str] = None


@dataclass(frozen=True)
class Feature:
    name: str
    tasks: dict[str, Task] = field(default_factory=dict)
    activation_env: dict[str, str] = field(default_factory=dict)
    dependencies: tuple[str, ...] = ()        # conda package names the manifest asks for
    pypi_dependencies: tuple[str, ...] = ()


@dataclass(frozen=True)
class Environment:
    name: str
    features: tuple[str, ...]
    default_feature: bool = True


@dataclass
class PixiManifest:
    path: Path
    raw: dict[str, Any]
    features: dict[str, Feature]              # "default" is the manifest's top level
    environments: dict[str, Environment]      # "default" always present

    def features_of(self, env: str) -> list[Feature]:
        """The environment's features, the default feature first (pixi's order)."""
        e = self.environments[env]
        return ([self.features["default"]] if e.default_feature else []) + [self.features[f] for f in e.features]

    def tasks_of(self, env: str) -> dict[str, Task]:
        out: dict[str, Task] = {}
        for f in self.features_of(env):
            out.update(f.tasks)
        return out

    def activation_env(self, env: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for f in self.features_of(env):
            out.update(f.activation_env)
        return out

    def explicit(self, env: str) -> tuple[set[str], set[str]]:
        """(conda, pypi) package names the environment's manifest dependencies name."""
        feats = self.features_of(env) if env in self.environments else []
        return ({d for f in feats for d in f.dependencies}, {d for f in feats for d in f.pypi_dependencies})


# ---------------------------------------------------------------------------------------------
# Checking: each helper takes the value and its dotted key, and raises one line.

class _Check:
    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, value: Any, accepted: str, what: str = "") -> UserError:
        return UserError(what or f"got {_describe(value)}", file=self.path, field=where, accepted=accepted)

    def table(self, v: Any, where: str, accepted: str = "a table") -> dict[str, Any]:
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise self.fail(where, v, accepted)
        return v

    def string(self, v: Any, where: str, accepted: str = "a string") -> str:
        if not isinstance(v, str):
            raise self.fail(where, v, accepted)
        return v

    def strings(self, v: Any, where: str, accepted: str = "a list of strings", one_ok: bool = False) -> list[str]:
        if one_ok and isinstance(v, str):
            return [v]
        if not isinstance(v, list):
            raise self.fail(where, v, accepted)
        return [self.string(x, f"{where}[{i}]", accepted) for i, x in enumerate(v)]

    def str_table(self, v: Any, where: str) -> dict[str, str]:
        t = self.table(v, where, 'a table of strings: { NAME = "value" }')
        return {k: self.string(x, f"{where}.{k}", "a string value") for k, x in t.items()}

    def keys(self, t: dict[str, Any], where: str, allowed: tuple[str, ...]) -> None:
        for k in t:
            if k not in allowed:
                raise self.fail(f"{where}.{k}", None, ", ".join(allowed), what="unknown key")


def _describe(v: Any) -> str:
    kinds: list[tuple[type, str]] = [(bool, "a boolean"), (int, "an integer"), (float, "a number"),
                                     (str, "a string"), (list, "a list"), (dict, "a table")]
    kind = next((w for t, w in kinds if isinstance(v, t)), type(v).__name__)
    if isinstance(v, (bool, int, float)) or (isinstance(v, str) and len(v) <= 40):
        return f"{kind} ({v!r})"
    return kind


def _cmd(c: _Check, v: Any, where: str) -> str:
    if isinstance(v, list) and v:
        return " ".join(shlex.quote(x) for x in c.strings(v, where, "a string or a list of strings"))
    return c.string(v, where, "a string, or a non-empty list of strings")


def _depends_on(c: _Check, v: Any, where: str) -> tuple[DependsOn, ...]:
    items = v if isinstance(v, list) else [v]
    out = []
    for i, d in enumerate(items):
        w = f"{where}[{i}]" if isinstance(v, list) else where
        if isinstance(d, dict):
            c.keys(d, w, ("task", "args"))
            name = c.string(d.get("task"), f"{w}.task", A_DEP)
            out.append(DependsOn(name, tuple(c.strings(d.get("args", []), f"{w}.args"))))
        else:
            out.append(DependsOn(c.string(d, w, A_DEP)))
    return tuple(out)


def _arg(c: _Check, v: Any, where: str) -> TaskArg:
    if isinstance(v, str) and v:
        return TaskArg(v)
    if not isinstance(v, dict):
        raise c.fail(where, v, AN_ARG)
    c.keys(v, where, ("arg", "default", "choices"))
    name = c.string(v.get("arg"), f"{where}.arg", AN_ARG)
    default = c.string(v["default"], f"{where}.default") if "default" in v else None
    choices = tuple(c.strings(v.get("choices", []), f"{where}.choices"))
    return TaskArg(name, default, choices)


def _args(c: _Check, v: Any, where: str) -> tuple[TaskArg, ...]:
    if not isinstance(v, list):
        raise c.fail(where, v, AN_ARG)
    args = tuple(_arg(c, a, f"{where}[{i}]") for i, a in enumerate(v))
    names = [a.name for a in args]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise c.fail(where, None, AN_ARG, what=f"argument {dup!r} declared twice")
    return args


def _task(c: _Check, name: str, v: Any, where: str) -> Task:
    if isinstance(v, str):
        return Task(name, cmd=v)
    if isinstance(v, list):
        return Task(name, depends_on=_depends_on(c, v, where))
    if not isinstance(v, dict):
        raise c.fail(where, v, A_TASK)
    c.keys(v, where, TASK_KEYS)
    if "cmd" not in v and "depends-on" not in v and "depends_on" not in v:
        raise c.fail(where, None, A_TASK, what="a task needs `cmd` or `depends-on`")
    if v.get("clean-env"):
        raise c.fail(f"{where}.clean-env", None, "leave it out", what="clean-env is not supported by deepep-env task")
    for k in ("inputs", "outputs"):
        if k in v:
            c.strings(v[k], f"{where}.{k}")
    dkey = "depends-on" if "depends-on" in v else "depends_on"
    return Task(name, cmd=_cmd(c, v["cmd"], f"{where}.cmd") if "cmd" in v else None,
                depends_on=_depends_on(c, v[dkey], f"{where}.{dkey}") if dkey in v else (),
                cwd=c.string(v["cwd"], f"{where}.cwd") if "cwd" in v else None,
                env=c.str_table(v.get("env"), f"{where}.env"),
                args=_args(c, v["args"], f"{where}.args") if "args" in v else None,
                description=c.string(v["description"], f"{where}.description") if "description" in v else None)


A_SPEC = '"version" or a table of strings: { version = "...", build = "..." }'
A_CHANNEL = '"name-or-url" or { channel = "name-or-url", priority = 0 }'
A_PLATFORM = '"linux-64" or { platform = "linux-64", cuda = "12.9", glibc = "2.28" }'


def _names(c: _Check, t: Any, where: str, pypi: bool = False) -> tuple[str, ...]:
    """The package names of a dependency table; each spec a string or a table (of strings, for conda)."""
    deps = c.table(t, where, "a table: { name = spec }")
    for name, v in deps.items():
        if pypi and isinstance(v, dict):
            continue  # PyPI tables carry booleans (editable) and lists (extras)
        if not isinstance(v, dict):
            c.string(v, f"{where}.{name}", A_SPEC)
        else:
            for k, x in v.items():
                c.string(x, f"{where}.{name}.{k}", A_SPEC)
    return tuple(deps)


def _channels(c: _Check, v: Any, where: str) -> None:
    if not isinstance(v, list):
        raise c.fail(where, v, f"a list of {A_CHANNEL}")
    for i, x in enumerate(v):
        w = f"{where}[{i}]"
        if isinstance(x, dict):
            c.keys(x, w, ("channel", "priority"))
            c.string(x.get("channel"), f"{w}.channel", A_CHANNEL)
            if "priority" in x and (not isinstance(x["priority"], int) or isinstance(x["priority"], bool)):
                raise c.fail(f"{w}.priority", x["priority"], "an integer")
        else:
            c.string(x, w, A_CHANNEL)


def _platforms(c: _Check, v: Any, where: str, rich: bool) -> None:
    """A feature's platforms are names; the workspace's may be pixi's rich tables."""
    if not isinstance(v, list):
        raise c.fail(where, v, f"a list of {A_PLATFORM if rich else 'platform names'}")
    for i, x in enumerate(v):
        w = f"{where}[{i}]"
        if not (rich and isinstance(x, dict)):
            c.string(x, w, A_PLATFORM if rich else "a platform name")
            continue
        c.string(x.get("platform", x.get("name")), f"{w}.platform", A_PLATFORM)
        for k, val in x.items():
            if k == "cuda" and isinstance(val, dict):
                c.str_table(val, f"{w}.cuda")
            else:
                c.string(val, f"{w}.{k}", A_PLATFORM)


def _feature(c: _Check, name: str, t: dict[str, Any], where: str) -> Feature:
    tasks = c.table(t.get("tasks"), f"{where}tasks", "a table of tasks: [tasks] name = ...")
    activation = c.table(t.get("activation"), f"{where}activation", "a table: { env = {...}, scripts = [...] }")
    if "scripts" in activation:
        c.strings(activation["scripts"], f"{where}activation.scripts")
    if name != "default":  # the default feature's channels and platforms are the workspace's
        if "channels" in t:
            _channels(c, t["channels"], f"{where}channels")
        if "platforms" in t:
            _platforms(c, t["platforms"], f"{where}platforms", rich=False)
    return Feature(name, tasks={n: _task(c, n, x, f"{where}tasks.{n}") for n, x in tasks.items()},
                   activation_env=c.str_table(activation.get("env"), f"{where}activation.env"),
                   dependencies=_names(c, t.get("dependencies"), f"{where}dependencies"),
                   pypi_dependencies=_names(c, t.get("pypi-dependencies"), f"{where}pypi-dependencies", pypi=True))


def _environment(c: _Check, name: str, v: Any, features: dict[str, Feature]) -> Environment:
    where = f"environments.{name}"
    accepted = '["feature", ...] or { features = [...], solve-group = "...", no-default-feature = true }'
    if isinstance(v, list):
        feats, default = c.strings(v, where, accepted), True
    elif isinstance(v, dict):
        c.keys(v, where, ENV_KEYS)
        feats = c.strings(v.get("features", []), f"{where}.features")
        if "solve-group" in v:
            c.string(v["solve-group"], f"{where}.solve-group")
        default = v.get("no-default-feature", False)
        if not isinstance(default, bool):
            raise c.fail(f"{where}.no-default-feature", default, "true or false")
        default = not default
    else:
        raise c.fail(where, v, accepted)
    for f in feats:
        if f not in features:
            raise c.fail(where, None, ", ".join(sorted(set(features) - {"default"})) or "none defined",
                         what=f"names feature {f!r}, which [feature] does not define")
    return Environment(name, tuple(feats), default)


def parse_manifest(raw: dict[str, Any], path: Path) -> PixiManifest:
    c = _Check(path)
    ws = c.table(raw.get("workspace", raw.get("project")), "workspace")
    if "channels" in ws:
        _channels(c, ws["channels"], "workspace.channels")
    if "platforms" in ws:
        _platforms(c, ws["platforms"], "workspace.platforms", rich=True)
    feature_tables = c.table(raw.get("feature"), "feature", "a table: [feature.NAME]")
    features = {"default": _feature(c, "default", raw, "")}
    for n, t in feature_tables.items():
        features[n] = _feature(c, n, c.table(t, f"feature.{n}"), f"feature.{n}.")
    envs_raw = c.table(raw.get("environments"), "environments",
                       '[environments] NAME = ["feature", ...] or { features = [...] }')
    envs = {n: _environment(c, n, v, features) for n, v in envs_raw.items()}
    envs.setdefault("default", Environment("default", (), True))
    return PixiManifest(path, raw, features, envs)


__all__ = ["DependsOn", "Environment", "Feature", "PixiManifest", "Task", "TaskArg", "parse_manifest"]


PIXI_ACCEPTED = "a UTF-8 pixi.toml written by `deepep-env pixi sync`"


def load_manifest(path: Path) -> PixiManifest:
    """pixi.toml through the bounded reader (a regular UTF-8 file of sane size), its tasks, features
    and environments checked with pixi's rules before anything runs: the one reader of pixi.toml."""
    raw = read_toml(path, what="pixi.toml", accepted=PIXI_ACCEPTED, missing="no pixi.toml (run `deepep-env pixi sync`)")
    return parse_manifest(raw, Path(path))
