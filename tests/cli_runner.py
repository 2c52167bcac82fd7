"""The one way the tests run the `deepep-env` CLI, in one of two modes.

``cli_in_process(capsys, *args)``
    Calls ``deepep_env.cli.main.main`` in this interpreter (what the console script's ``entry``
    calls), with pytest's ``capsys`` capturing its output. Fast; the default choice.

``cli_subprocess(*args, env=None, cwd=None, timeout=300, check=False)``
    A fresh interpreter running ``python -m deepep_env.cli.main``, i.e. the console script's
    ``entry`` (child watchdog for build/publish/fetch/install/task, exit through ``os._exit``).
    For what needs a real, separate process: exec (``run``), signals and killed children, an
    environment of its own (the probes read this process's environment; ``activate`` prints it),
    exit statuses as the shell sees them, a probe that could block (bounded by ``timeout``), and
    py-rattler's runtime, which can abort the interpreter at shutdown (see tests/conftest.py).

Both return a :class:`CliResult`: a ``subprocess.CompletedProcess`` (``returncode``, ``stdout``,
``stderr``, ``args``) that also unpacks as ``code, out, err``.

``cli_argv(*args)`` and ``cli_env(...)`` give the command line and environment of the subprocess
mode, for a test that starts the CLI itself (``Popen``: to kill it) or writes a wrapper script.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator, Mapping, Optional

REPO = Path(__file__).resolve().parents[1]
CLI_MODULE = "deepep_env.cli.main"


class CliResult(subprocess.CompletedProcess):
    """A finished CLI run. As ``subprocess.CompletedProcess``; unpacks (and indexes) as
    ``(returncode, stdout, stderr)``."""

    def __iter__(self) -> Iterator:
        return iter((self.returncode, self.stdout, self.stderr))

    def __getitem__(self, index):
        return tuple(self)[index]


def cli_in_process(capsys, *args) -> CliResult:
    """`deepep-env ARGS…` in this interpreter: ``main(args)``, its exit status and what it printed
    (output printed before the call is dropped)."""
    from deepep_env.cli.main import main

    argv = [str(a) for a in args]
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    return CliResult(["deepep-env", *argv], code, out, err)


def cli_argv(*args) -> list[str]:
    """The command line of `deepep-env ARGS…` as the console script runs it, in this interpreter."""
    return [sys.executable, "-m", CLI_MODULE, *map(str, args)]


def cli_env(base: Optional[Mapping[str, str]] = None, **extra: str) -> dict[str, str]:
    """``base`` (default: this process's environment) plus ``extra``, with this checkout first on
    PYTHONPATH (unless it is on it already), so the child imports this tree's ``deepep_env``."""
    env = dict(os.environ if base is None else base)
    env.update(extra)
    path = env.get("PYTHONPATH", "")
    if str(REPO) not in path.split(os.pathsep):
        env["PYTHONPATH"] = str(REPO) + (os.pathsep + path if path else "")
    return env


def cli_subprocess(*args, env: Optional[Mapping[str, str]] = None, cwd: Optional[Path] = None,
                   timeout: float = 300, check: bool = False, repo_on_pythonpath: bool = True) -> CliResult:
    """`deepep-env ARGS…` in a fresh interpreter (see :func:`cli_argv`).

    ``env``: the child's environment (default: this process's), with this checkout put on
    PYTHONPATH (:func:`cli_env`) unless ``repo_on_pythonpath`` is false: then ``env`` is passed
    exactly as given. ``cwd`` defaults to the checkout. ``timeout`` bounds the run (a probe that
    blocks fails the test instead of hanging the suite: ``subprocess.TimeoutExpired``). ``check``:
    a non-zero exit fails the test with the command's output."""
    child_env = cli_env(env) if repo_on_pythonpath else dict(env if env is not None else os.environ)
    argv = cli_argv(*args)
    res = subprocess.run(argv, capture_output=True, text=True, env=child_env, cwd=cwd or REPO, timeout=timeout)
    if check and res.returncode != 0:
        raise AssertionError(f"deepep-env {' '.join(argv[3:])} → {res.returncode}\n{res.stdout}\n{res.stderr}")
    return CliResult(res.args, res.returncode, res.stdout, res.stderr)
