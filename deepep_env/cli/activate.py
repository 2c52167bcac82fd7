"""`deepep-env activate ENV` and `deepep-env run ENV -- CMD…`.

`activate` normally never reaches typer: cli/main.py routes it to cli/fast_activate.py (argparse,
no typer/pydantic imports) because shells run it on every new terminal. The typer command here
exists so that `deepep-env --help` lists it, and does the same thing.
"""
from __future__ import annotations

import os
import sys
from typing import List, Optional

import typer

from deepep_env.base.project import DEFAULT_PREFIX
from deepep_env.cli._common import DemoHostOpt


def register(app: typer.Typer) -> None:
    @app.command("activate")
    def activate_cmd(
        env: str = typer.Argument(..., help="Installed env name."),
        root: str = typer.Option("/", "--root", help="Read the host under this directory; default /."),
        shell: Optional[str] = typer.Option(None, "--shell", help="bash, zsh, fish or json; default from $SHELL."),
        prefix: Optional[str] = typer.Option(None, "--prefix", help=f"The env's prefix; default $DEEPEP_ENV_PREFIX, else the project's {DEFAULT_PREFIX}."),
        platform: Optional[str] = typer.Option(None, "--platform", help="Platform profile; default: detected."),
        demo_host: Optional[str] = DemoHostOpt,
        as_json: bool = typer.Option(False, "--json", help="same as --shell json"),
    ) -> None:
        """Print a script for `eval`: the env's prefix activation plus the host overlay."""
        from deepep_env.cli.fast_activate import run_activate
        from deepep_env.cli.main import tool_activation

        code = run_activate(env, root=root, shell="json" if as_json else shell, prefix=prefix, platform=platform,
                            demo_host=demo_host, tool=tool_activation())
        if code:
            raise typer.Exit(code)

    @app.command(
        "run",
        context_settings={"ignore_unknown_options": True},
    )
    def run_cmd(
        env: str = typer.Argument(..., help="Installed env name."),
        cmd: Optional[List[str]] = typer.Argument(None, help="The command, after `--`."),
        root: str = typer.Option("/", "--root", help="Read the host under this directory; default /."),
        prefix: Optional[str] = typer.Option(None, "--prefix", help="The env's prefix."),
        platform: Optional[str] = typer.Option(None, "--platform", help="Platform profile; default: detected."),
    ) -> None:
        """Run CMD inside ENV: `deepep-env run ENV -- python tests/test_intranode.py`."""
        from deepep_env.host.context import activation_context
        from deepep_env.install.prefixes import find_meta
        from deepep_env.overlay.activation import exec_in_env, run_environment

        act = activation_context(env, root=root, platform=platform, meta=find_meta(env, prefix))
        for w in act.warnings:
            print(f"deepep-env: warning: {w}", file=sys.stderr)
        sys.stderr.flush()
        sys.stdout.flush()
        exec_in_env(cmd or [], run_environment(act.overlay, os.environ))
