"""``deepep-env task NAME [-e ENV] [-- ARGS]``: run a task of ``pixi.toml`` the way ``pixi run`` does.

pixi cannot be installed on these machines (field notes §5), so this runner reads the *same* task
definitions from the *same* file: the environment's features, their ``tasks`` (``cmd``,
``depends-on``, ``env``, ``cwd``, ``args`` appended), and the variables pixi sets for a task
(``PIXI_PROJECT_ROOT``, ``PIXI_ENVIRONMENT_NAME``, ``CONDA_PREFIX``, ``PATH`` with the prefix's
``bin`` first). The prefix is the one ``deepep-env install`` makes (``Project.prefix_for``),
exported as ``DEEPEP_ENV_PREFIX`` so the ``deepep-env run`` inside a task finds it.

Commands run in ``bash -c`` (pixi uses deno_task_shell; generated commands keep to the syntax both
share: words, quotes, ``$VAR``, ``--``). Planning is data (:class:`TaskPlan`), running is separate.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from deepep_env.errors import UserError


@dataclass
class TaskStep:
    name: str
    cmd: str
    cwd: str
    env: dict[str, str]               # variables the task sets on top of the caller's environment

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "cmd": self.cmd, "cwd": self.cwd, "env": self.env}


@dataclass
class TaskPlan:
    task: str
    environment: str                  # pixi environment name
    spec: str                         # deepep-env spec name
    prefix: str
    steps: list[TaskStep] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "environment": self.environment, "spec": self.spec, "prefix": self.prefix,
                "steps": [s.to_dict() for s in self.steps]}


def _env_features(manifest: dict[str, Any], env: str) -> tuple[list[str], bool]:
    envs = manifest.get("environments") or {}
    spec = envs.get(env)
    if spec is None:
        if env == "default":
            return [], True
        raise UserError(f"unknown pixi environment {env!r}", field="-e", accepted=", ".join(sorted(envs)) or "none")
    if isinstance(spec, list):
        return list(spec), True
    return list(spec.get("features") or []), not spec.get("no-default-feature", False)


def _tasks_of(manifest: dict[str, Any], env: str) -> dict[str, Any]:
    feats, default = _env_features(manifest, env)
    out: dict[str, Any] = {}
    if default:
        out.update(manifest.get("tasks") or {})
    for f in feats:
        out.update(((manifest.get("feature") or {}).get(f) or {}).get("tasks") or {})
    return out


def list_tasks(manifest: dict[str, Any]) -> dict[str, list[str]]:
    """environment → task names."""
    envs = sorted((manifest.get("environments") or {}).keys())
    return {e: sorted(_tasks_of(manifest, e)) for e in envs}


def _spec_for_env(project, env: str) -> str:
    from deepep_env.pixi import pixi_env_name

    for name in project.spec_names():
        if pixi_env_name(name) == env:
            return name
    return env


def _norm(task: Any, name: str) -> dict[str, Any]:
    if isinstance(task, str):
        return {"cmd": task}
    if isinstance(task, list):  # a list of DependsOn tables: an alias
        return {"depends-on": task}
    if isinstance(task, dict):
        return task
    raise UserError(f"unsupported task definition for {name!r}", field=f"tasks.{name}")


def _dep_names(task: dict[str, Any]) -> list[str]:
    deps = task.get("depends-on", task.get("depends_on", []))
    if isinstance(deps, (str, dict)):
        deps = [deps]
    out = []
    for d in deps:
        out.append(d["task"] if isinstance(d, dict) else d)
    return out


def plan_task(project, name: str, *, environment: Optional[str] = None, args: Sequence[str] = (),
              manifest_path: Optional[Path] = None) -> TaskPlan:
    """Resolve ``name`` (and what it depends on) in ``pixi.toml`` into steps to run, in order."""
    from deepep_env.pixi import load_manifest

    path = Path(manifest_path) if manifest_path else project.pixi_toml
    manifest = load_manifest(path)
    per_env = list_tasks(manifest)
    if environment is None:
        having = [e for e, ts in per_env.items() if name in ts]
        if not having:
            raise UserError(f"no task {name!r} in {path.name}", field="NAME",
                            accepted=", ".join(sorted({t for ts in per_env.values() for t in ts})) or "no tasks")
        if len(having) > 1:
            raise UserError(f"task {name!r} exists in several environments; choose one with -e", field="-e",
                            accepted=", ".join(having))
        environment = having[0]
    tasks = _tasks_of(manifest, environment)
    if name not in tasks:
        raise UserError(f"environment {environment!r} has no task {name!r}", field="NAME",
                        accepted=", ".join(sorted(tasks)) or "no tasks")
    spec = _spec_for_env(project, environment)
    prefix = project.prefix_for(spec)

    order: list[str] = []
    visiting: set[str] = set()

    def visit(t: str) -> None:
        if t in order:
            return
        if t in visiting:
            raise UserError(f"task dependency cycle through {t!r}", file=path, field=f"tasks.{t}.depends-on")
        if t not in tasks:
            raise UserError(f"task depends on unknown task {t!r}", file=path, field="depends-on",
                            accepted=", ".join(sorted(tasks)))
        visiting.add(t)
        for d in _dep_names(_norm(tasks[t], t)):
            visit(d)
        visiting.discard(t)
        order.append(t)

    visit(name)
    plan = TaskPlan(task=name, environment=environment, spec=spec, prefix=str(prefix))
    for t in order:
        td = _norm(tasks[t], t)
        cmd = td.get("cmd")
        if cmd is None:
            continue  # an alias: only its dependencies run
        if isinstance(cmd, list):
            cmd = " ".join(shlex.quote(c) for c in cmd)
        given = list(args) if t == name else []
        if td.get("args"):  # pixi renders declared args into `{{ name }}` placeholders (MiniJinja)
            cmd = render_task_args(cmd, td["args"], given, task=t, path=path)
        elif given:
            cmd = cmd + " " + " ".join(shlex.quote(a) for a in given)  # pixi appends extra arguments
        cwd = str((project.root / td["cwd"]).resolve()) if td.get("cwd") else str(project.root)
        plan.steps.append(TaskStep(name=t, cmd=cmd, cwd=cwd, env={str(k): str(v) for k, v in (td.get("env") or {}).items()}))
    return plan


_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def render_task_args(cmd: str, declared: Sequence[Any], given: Sequence[str], *, task: str, path: Path) -> str:
    """pixi's task ``args``: names (or ``{arg, default}`` tables) filled from the command line in order,
    defaults for the rest, substituted where the command says ``{{ name }}``."""
    names: list[str] = []
    defaults: dict[str, str] = {}
    for a in declared:
        n = a.get("arg") if isinstance(a, dict) else a
        if not isinstance(n, str) or not n:
            raise UserError(f"task {task!r}: an `args` entry is neither a name nor {{arg, default}}", file=path,
                            field=f"tasks.{task}.args", accepted='["who", { arg = "greeting", default = "hi" }]')
        names.append(n)
        if isinstance(a, dict) and "default" in a:
            defaults[n] = str(a["default"])
    if len(given) > len(names):
        raise UserError(f"task {task!r} takes {len(names)} argument(s) ({', '.join(names)}), got {len(given)}",
                        field="ARGS", accepted=" ".join(f"<{n}>" for n in names))
    values = dict(zip(names, given))
    for n in names[len(given):]:
        if n not in defaults:
            raise UserError(f"task {task!r}: argument {n!r} has no default and was not given", field="ARGS",
                            accepted=" ".join(f"<{x}>" for x in names))
        values[n] = defaults[n]

    def sub(m: "re.Match[str]") -> str:
        if m.group(1) not in values:
            raise UserError(f"task {task!r} uses {{{{ {m.group(1)} }}}} but declares no such argument", file=path,
                            field=f"tasks.{task}.cmd", accepted=", ".join(names))
        return values[m.group(1)]

    return _PLACEHOLDER.sub(sub, cmd)


_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def _expand(value: str, env: dict[str, str]) -> str:
    """``$VAR``/``${VAR}`` from the task's own environment (not this process's)."""
    return _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), ""), value)


def _shim_dir() -> Optional[Path]:
    """A ``deepep-env`` executable for commands when this install has none on PATH (a source
    checkout run as ``python -m deepep_env.cli.main``): the nested call uses this very code."""
    if shutil.which("deepep-env"):
        return None
    pkg_parent = str(Path(__file__).resolve().parent.parent)
    d = Path(tempfile.mkdtemp(prefix="deepep-env-shim-"))
    script = d / "deepep-env"
    code = f"import sys; sys.path.insert(0, {pkg_parent!r}); from deepep_env.cli.main import main; sys.exit(main())"
    script.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -c {shlex.quote(code)} \"$@\"\n")
    script.chmod(0o755)
    return d


def task_environment(project, plan: TaskPlan, base: Optional[dict[str, str]] = None) -> dict[str, str]:
    """What pixi would export for a task of ``plan.environment`` (plus DEEPEP_ENV_PREFIX)."""
    env = dict(os.environ if base is None else base)
    prefix = plan.prefix
    env.update({
        "PIXI_PROJECT_ROOT": str(project.root),
        "PIXI_PROJECT_NAME": "deepep-env",
        "PIXI_PROJECT_MANIFEST": str(project.pixi_toml),
        "PIXI_ENVIRONMENT_NAME": plan.environment,
        "CONDA_PREFIX": prefix,
        "CONDA_DEFAULT_ENV": plan.spec,
        "DEEPEP_ENV_PREFIX": prefix,
        "DEEPEP_ENV_PROJECT": str(project.root),
    })
    env["PATH"] = os.pathsep.join([str(Path(prefix) / "bin"), env.get("PATH", os.defpath)])
    return env


def run_task(project, plan: TaskPlan, *, base_env: Optional[dict[str, str]] = None) -> int:
    """Run the steps in order; stop at the first failure and return its exit status."""
    env = task_environment(project, plan, base_env)
    shim = _shim_dir()
    if shim is not None:
        env["PATH"] = env["PATH"] + os.pathsep + str(shim)
    shell = shutil.which("bash") or "/bin/sh"
    try:
        for step in plan.steps:
            step_env = dict(env)
            for k, v in step.env.items():
                step_env[k] = _expand(v, step_env)
            print(f"deepep-env task: {step.name} ({plan.environment}): {step.cmd}", file=sys.stderr, flush=True)
            try:
                rc = subprocess.run([shell, "-c", step.cmd], cwd=step.cwd, env=step_env, check=False).returncode
            except OSError as exc:
                raise UserError(f"cannot run task {step.name!r}: {exc}", field="cmd") from None
            if rc != 0:
                print(f"deepep-env task: {step.name} failed (exit {rc})", file=sys.stderr, flush=True)
                return rc
    finally:
        if shim is not None:
            shutil.rmtree(shim, ignore_errors=True)
    return 0
