"""``deepep-env task NAME [-e ENV] [-- ARGS]``: run a task of ``pixi.toml`` the way ``pixi run`` does.

pixi cannot be installed on these machines (field notes §5), so this runner reads the *same* task
definitions from the *same* file and does what ``pixi run`` does: install the environment from
``pixi.lock`` into pixi's own prefix ``.pixi/envs/ENV`` (``deepep-env install``: sha256-verified, a
no-op when up to date), activate it as pixi does (``PIXI_*``, ``CONDA_PREFIX``, ``PATH`` with the
prefix's ``bin`` first, the features' ``activation.env``, ``DEEPEP_ENV_PYTHON`` (the spec's host
interpreter, from the install marker), then the prefix's ``etc/conda/activate.d``
scripts — the deepep-env package's applies the host overlay), then run the task's ``cmd``
(``depends-on``, ``env``, ``cwd``, ``args``).

Commands run in ``bash -c`` (pixi uses deno_task_shell; generated commands keep to the syntax both
share: words, quotes, ``$VAR``, ``--``). Planning is data (:class:`TaskPlan`), running is separate.
"""
from __future__ import annotations

import collections
import contextlib
import io
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence, TextIO

from deepep_env.base.channels.auth import redact
from deepep_env.base.errors import UserError
from deepep_env.install.installer import install_env
from deepep_env.lock.workspace import Workspace, workspace
from deepep_env.overlay.activation import source_activation_scripts, spec_python
from deepep_env.formats.prefix import has_marker, read_prefix_meta
from deepep_env.lock.pixi_model import DependsOn, PixiManifest, Task, TaskArg, load_manifest
from deepep_env.base.project import pixi_env_name
from deepep_env.verify.activation import activation_of
from deepep_env.verify.attest import sign_record
from deepep_env.verify.records import build_record, host_root, write_record

if TYPE_CHECKING:  # annotations only: no import at run time
    from deepep_env.base.project import Project
    from deepep_env.verify.keys import Signer


RECORDED_PREFIX = "deepep-test-"


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
    args: list[str] = field(default_factory=list)   # the extra arguments given to the task itself

    @property
    def records(self) -> bool:
        """A DeepEP test (``deepep-test-*``): its run writes a test record (``verified/``)."""
        return self.task.startswith(RECORDED_PREFIX)

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "environment": self.environment, "spec": self.spec, "prefix": self.prefix,
                "steps": [s.to_dict() for s in self.steps]}


def _environment(manifest: PixiManifest, env: str) -> str:
    if env not in manifest.environments:
        raise UserError(f"unknown pixi environment {env!r}", field="-e",
                        accepted=", ".join(sorted(manifest.environments)) or "none")
    return env


def list_tasks(manifest: PixiManifest) -> dict[str, list[str]]:
    """environment → task names (the environments pixi.toml defines)."""
    envs = sorted(e for e in manifest.environments if e in (manifest.raw.get("environments") or {}))
    return {e: sorted(manifest.tasks_of(e)) for e in envs}


def _spec_for_env(project: Project, env: str) -> str:
    for name in project.spec_names():
        if pixi_env_name(name) == env:
            return name
    return env


def plan_task(project: Project, name: str, *, environment: Optional[str] = None, args: Sequence[str] = (),
              manifest_path: Optional[Path] = None) -> TaskPlan:
    """Resolve ``name`` (and what it depends on) in ``pixi.toml`` into steps to run, in order."""
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
    tasks = manifest.tasks_of(_environment(manifest, environment))
    if name not in tasks:
        raise UserError(f"environment {environment!r} has no task {name!r}", field="NAME",
                        accepted=", ".join(sorted(tasks)) or "no tasks")
    plan = TaskPlan(task=name, environment=environment, spec=_spec_for_env(project, environment),
                    prefix=str(project.prefix_for(environment)), args=list(args))
    for t, given in _run_order(tasks, DependsOn(name, tuple(args)), path):
        step = _step(project, tasks[t], given, path)
        if step is not None:
            plan.steps.append(step)
    return plan


def _run_order(tasks: dict[str, Task], top: DependsOn, path: Path) -> list[tuple[str, tuple[str, ...]]]:
    """(task, its arguments) in the order they run: dependencies first, each once."""
    order: list[tuple[str, tuple[str, ...]]] = []
    visiting: set[str] = set()

    def visit(d: DependsOn) -> None:
        if (d.task, d.args) in order:
            return
        if d.task in visiting:
            raise UserError(f"task dependency cycle through {d.task!r}", file=path, field=f"tasks.{d.task}.depends-on")
        if d.task not in tasks:
            raise UserError(f"task depends on unknown task {d.task!r}", file=path, field="depends-on",
                            accepted=", ".join(sorted(tasks)))
        visiting.add(d.task)
        for dep in tasks[d.task].depends_on:
            visit(dep)
        visiting.discard(d.task)
        order.append((d.task, d.args))

    visit(top)
    return order


def _step(project: Project, task: Task, given: Sequence[str], path: Path) -> Optional[TaskStep]:
    cwd = str((project.root / task.cwd).resolve()) if task.cwd else str(project.root)
    cmd = task.cmd
    if cmd is None:  # an alias: only its dependencies run
        if given:
            raise UserError(f"task {task.name!r} has no command to pass arguments to", field="ARGS",
                            accepted="no arguments")
        return None
    if task.args:  # pixi renders declared args into `{{ name }}` placeholders (MiniJinja)
        cmd = render_task_args(cmd, task.args, given, task=task.name, path=path)
    elif given:
        cmd = cmd + " " + " ".join(shlex.quote(a) for a in given)  # pixi appends extra arguments
    return TaskStep(name=task.name, cmd=cmd, cwd=cwd, env=dict(task.env))


_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def render_task_args(cmd: str, declared: Sequence[TaskArg], given: Sequence[str], *, task: str, path: Path) -> str:
    """pixi's task ``args``: names (or ``{arg, default}`` tables) filled from the command line in order,
    defaults for the rest, substituted where the command says ``{{ name }}``. A value is data, never
    code: each is quoted for the shell where it lands (:func:`quote_in`)."""
    values = _arg_values(declared, given, task)

    def sub(m: "re.Match[str]") -> str:
        if m.group(1) not in values:
            raise UserError(f"task {task!r} uses {{{{ {m.group(1)} }}}} but declares no such argument", file=path,
                            field=f"tasks.{task}.cmd", accepted=", ".join(a.name for a in declared))
        return quote_in(*_quote_state(cmd[: m.start()]), values[m.group(1)])

    return _PLACEHOLDER.sub(sub, cmd)


def _arg_values(declared: Sequence[TaskArg], given: Sequence[str], task: str) -> dict[str, str]:
    names = [a.name for a in declared]
    usage = " ".join(f"<{n}>" for n in names)
    if len(given) > len(names):
        raise UserError(f"task {task!r} takes {len(names)} argument(s) ({', '.join(names)}), got {len(given)}",
                        field="ARGS", accepted=usage)
    values = dict(zip(names, given))
    for a in declared[len(given):]:
        if a.default is None:
            raise UserError(f"task {task!r}: argument {a.name!r} has no default and was not given", field="ARGS",
                            accepted=usage)
        values[a.name] = a.default
    for a in declared:
        if a.choices and values[a.name] not in a.choices:
            raise UserError(f"task {task!r}: argument {a.name!r} is not one of its choices", field="ARGS",
                            accepted=", ".join(a.choices))
    return values


def _quote_state(text: str) -> tuple[str, int]:
    """The shell quoting in force at the end of ``text``: "" (none), "'", '"' or "$'" (ANSI-C), and
    how many backquotes enclose it. A command substitution (``$(…)``, backquotes) starts afresh
    inside any quoting but single quotes."""
    stack: list[str] = []
    state, i = "", 0
    while i < len(text):
        c, two = text[i], text[i:i + 2]
        if c == "\\" and state != "'":
            i += 2
            continue
        if state in ("", '"') and (two == "$(" or c == "`" and not (stack and stack[-1].endswith("`"))):
            stack.append(state + ("`" if c == "`" else ""))
            state, i = "", i + (1 if c == "`" else 2)
            continue
        if state == "" and stack and (c == ")" and not stack[-1].endswith("`") or c == "`"):
            state = stack.pop().rstrip("`")
        elif state == "" and two == "$'":
            state, i = "$'", i + 1
        elif state == "" and c in "'\"":
            state = c
        elif state and c == state[-1]:
            state = ""
        i += 1
    return state, sum(1 for x in stack if x.endswith("`"))


def quote_in(state: str, ticks: int, value: str) -> str:
    """``value`` as one literal word where the shell is in quoting ``state`` inside ``ticks``
    backquotes (see :func:`_quote_state`): the backquotes strip one level of ``\\`` escapes each."""
    if state == "'":
        word = value.replace("'", "'\\''")
    elif state == '"':
        word = re.sub(r'([\\"$`])', r"\\\1", value)
    elif state == "$'":
        word = re.sub(r"([\\'])", r"\\\1", value)
    else:
        word = shlex.quote(value)
    for _ in range(ticks):
        word = re.sub(r"([\\`$])", r"\\\1", word)
    return word


_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def _expand(value: str, env: dict[str, str]) -> str:
    """``$VAR``/``${VAR}`` from the task's own environment (not this process's)."""
    return _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), ""), value)


def task_environment(project: Project, plan: TaskPlan, base: Optional[dict[str, str]] = None,
                     manifest: Optional[PixiManifest] = None) -> dict[str, str]:
    """What pixi exports for a task of ``plan.environment``: its variables, the features'
    ``activation.env``, then the prefix's ``activate.d`` ``*.sh`` scripts sourced in order (as
    ``pixi run`` runs them) — the deepep-env package's applies the host overlay."""
    return source_activation_scripts(plan.prefix, pre_activation(project, plan, base, manifest))


def pre_activation(project: Project, plan: TaskPlan, base: Optional[dict[str, str]] = None,
                   manifest: Optional[PixiManifest] = None) -> dict[str, str]:
    """The environment the prefix's ``activate.d`` scripts start from: the caller's, pixi's variables,
    the features' ``activation.env`` and ``DEEPEP_ENV_PYTHON``."""
    env = dict(os.environ if base is None else base)
    prefix = plan.prefix
    env.update({
        "PIXI_PROJECT_ROOT": str(project.root),
        "PIXI_PROJECT_NAME": "deepep-env",
        "PIXI_PROJECT_MANIFEST": str(project.pixi_toml),
        "PIXI_ENVIRONMENT_NAME": plan.environment,
        "PIXI_IN_SHELL": "1",
        "CONDA_PREFIX": prefix,
        "CONDA_DEFAULT_ENV": plan.environment,
        "DEEPEP_ENV_PREFIX": prefix,
        "DEEPEP_ENV_PROJECT": str(project.root),
    })
    env["PATH"] = os.pathsep.join([str(Path(prefix) / "bin"), env.get("PATH", os.defpath)])
    if manifest is not None and plan.environment in manifest.environments:
        env.update(manifest.activation_env(plan.environment))  # the features' activation.env, in order
    env.update(_spec_python(prefix))
    return env


def _spec_python(prefix: str) -> dict[str, str]:
    """``DEEPEP_ENV_PYTHON`` from the install marker, as activation sets it (the deepep-env package's
    hook sets it too; this keeps it when ``DEEPEP_ENV_NO_OVERLAY`` turns the hook off)."""
    py = spec_python(read_prefix_meta(prefix)) if has_marker(prefix) else None
    return {py.name: py.value} if py is not None else {}


def ensure_installed(project: Project, plan: TaskPlan, ws: Optional[Workspace] = None) -> None:
    """pixi installs the locked environment before it runs a task: so does this runner."""
    res = install_env(plan.spec, project, ws=ws)
    for w in res.warnings:
        print(f"deepep-env task: warning: {w}", file=sys.stderr, flush=True)
    if res.status != "up-to-date":
        print(f"deepep-env task: {plan.environment} {res.status} at {res.prefix} ({len(res.packages)} packages)",
              file=sys.stderr, flush=True)


def _pump(src: io.BufferedIOBase, dst: TextIO, keep: "collections.deque[bytes]", limit: int) -> None:
    """Copy ``src`` to the text stream ``dst`` as it comes (its binary buffer when it has one),
    keeping the last ``limit`` bytes in ``keep``."""
    size = 0
    raw = getattr(dst, "buffer", None)
    for chunk in iter(lambda: src.read1(65536), b""):
        if raw is not None:
            raw.write(chunk)
            raw.flush()
        else:
            dst.write(chunk.decode("utf-8", "replace"))
            dst.flush()
        keep.append(chunk)
        size += len(chunk)
        while size > limit and len(keep) > 1:
            size -= len(keep.popleft())
    src.close()


TIMED_OUT = 124      # run_teed's status for a run it killed at its timeout (as timeout(1) exits)


def run_teed(argv: list[str], *, cwd: str, env: dict[str, str], limit: int = 8 << 20,
             timeout: Optional[float] = None, to_stderr: bool = False) -> tuple[int, str]:
    """Run ``argv`` with its stdout and stderr passed through as they come, and return its exit
    status with the last ``limit`` bytes of each (for the figures a test prints). ``timeout``: after
    that many seconds the run's whole process group (it runs in a session of its own, so DeepEP's
    spawned ranks go too) is killed and the status is :data:`TIMED_OUT`. ``to_stderr``: both streams
    pass through to this process's stderr (its stdout is kept for a report, ``admit --json``)."""
    sys.stdout.flush()
    sys.stderr.flush()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=timeout is not None)
    outs: list[collections.deque[bytes]] = [collections.deque(), collections.deque()]
    pumps = [threading.Thread(target=_pump, args=(pipe, dst, keep, limit), daemon=True)
             for pipe, dst, keep in ((proc.stdout, sys.stderr if to_stderr else sys.stdout, outs[0]),
                                     (proc.stderr, sys.stderr, outs[1]))]
    for t in pumps:
        t.start()
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        rc = TIMED_OUT
    for t in pumps:
        t.join(timeout=None if rc != TIMED_OUT else 10)
    return rc, "\n".join(b"".join(list(k)).decode("utf-8", "replace") for k in outs)


def write_task_record(project: Project, plan: TaskPlan, rc: int, output: str, env: dict[str, str],
                      activation: Optional[dict[str, Any]] = None, signer: Optional[Signer] = None) -> None:
    """The test record of a finished ``deepep-test-*`` task, with the activation it ran under, signed when
    ``signer`` is given (its attestation beside it); one that cannot be written is a warning."""
    try:
        rec = build_record(project, plan.spec, plan.task, plan.args, rc, output, root=host_root(env),
                           platform=env.get("DEEPEP_ENV_PLATFORM") or None, activation=activation)
        path = write_record(project, rec)
        if signer is not None:
            sign_record(path, signer, project.pixi_lock)
    except (UserError, OSError) as exc:
        print(f"deepep-env task: warning: no test record written: {redact(exc)}", file=sys.stderr, flush=True)
        return
    try:
        shown = path.relative_to(project.root)
    except ValueError:
        shown = path
    verdict = f"{'pass' if rec['passed'] else 'fail'}: {rec['evidence']}; {rec['ranks'] or '?'} rank(s)"
    signed = f"; signed by {signer.name}" if signer is not None else ""
    print(f"deepep-env task: record {shown} ({verdict}{signed})", file=sys.stderr, flush=True)


def run_task(project: Project, plan: TaskPlan, *, base_env: Optional[dict[str, str]] = None, install: bool = True,
             record: bool = True, ws: Optional[Workspace] = None, signer: Optional[Signer] = None) -> int:
    """Install (unless told not to), activate, run the steps in order; stop at the first failure and
    return its exit status. A ``deepep-test-*`` task's own step is teed and, when ``record``, its
    result written as a test record (``verified/ENV/``) whether it passed or failed, signed by ``signer``
    when given (the key's path never reaches the test: ``DEEPEP_ENV_SIGNING_KEY`` is dropped)."""
    if install:
        ensure_installed(project, plan, workspace(project, ws))
    pre = pre_activation(project, plan, base_env, load_manifest(project.pixi_toml))
    env = source_activation_scripts(plan.prefix, pre)
    activation = activation_of(plan.prefix, pre) if record and plan.records else None
    shell = shutil.which("bash") or "/bin/sh"
    for step in plan.steps:
        step_env = dict(env)
        step_env.pop("DEEPEP_ENV_SIGNING_KEY", None)
        for k, v in step.env.items():
            step_env[k] = _expand(v, step_env)
        print(f"deepep-env task: {step.name} ({plan.environment}): {step.cmd}", file=sys.stderr, flush=True)
        teed = record and plan.records and step.name == plan.task
        try:
            if teed:
                rc, output = run_teed([shell, "-c", step.cmd], cwd=step.cwd, env=step_env)
            else:
                rc = subprocess.run([shell, "-c", step.cmd], cwd=step.cwd, env=step_env, check=False).returncode
        except OSError as exc:
            raise UserError(f"cannot run task {step.name!r}: {exc}", field="cmd") from None
        if teed:
            write_task_record(project, plan, rc, output, dict(os.environ if base_env is None else base_env),
                              activation, signer)
        if rc != 0:
            print(f"deepep-env task: {step.name} failed (exit {rc})", file=sys.stderr, flush=True)
            return rc
    return 0


def _stderr_fd() -> Optional[int]:
    """This process's stderr as a descriptor for a child's stdout; None (inherit) when it has none."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):    # io.UnsupportedOperation is both
        return None


def run_test_captured(project: Project, plan: TaskPlan, *, timeout: float, base_env: Optional[dict[str, str]] = None,
                      install: bool = True, ws: Optional[Workspace] = None) -> tuple[int, str]:
    """A ``deepep-test-*`` task run as :func:`run_task` runs it (installed, activated, its
    dependencies first), its own step teed and killed after ``timeout`` seconds (status
    :data:`TIMED_OUT`); no test record; what they print goes to stderr. Returns the step's status and output (``""`` when a
    dependency failed first)."""
    if install:
        ensure_installed(project, plan, workspace(project, ws))
    env = task_environment(project, plan, base_env, load_manifest(project.pixi_toml))
    shell = shutil.which("bash") or "/bin/sh"
    for step in plan.steps:
        step_env = dict(env)
        for k, v in step.env.items():
            step_env[k] = _expand(v, step_env)
        print(f"deepep-env admit: {step.name} ({plan.environment}): {step.cmd}", file=sys.stderr, flush=True)
        try:
            if step.name == plan.task:
                return run_teed([shell, "-c", step.cmd], cwd=step.cwd, env=step_env, timeout=timeout, to_stderr=True)
            rc = subprocess.run([shell, "-c", step.cmd], cwd=step.cwd, env=step_env, check=False,
                                stdout=_stderr_fd()).returncode
        except OSError as exc:
            raise UserError(f"cannot run task {step.name!r}: {exc}", field="cmd") from None
        if rc != 0:
            return rc, ""
    return 0, ""
