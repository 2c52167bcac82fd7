"""`deepep-env doctor [ENV] [--root DIR] [--prefix DIR] [--platform P] [--json] [--strict] [--traffic -- CMD…]`.

Exit status: 0 nothing wrong, 1 warnings only (with --strict), 2 errors (issue 7).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import typer

from deepep_env.cli._common import DemoHostOpt
from typer.core import TyperCommand

from deepep_env.base.project import DEFAULT_PREFIX

if TYPE_CHECKING:  # the Context TyperCommand.parse_args takes (the click that typer vendors)
    from typer._click.core import Context as ClickContext

CMD_KEY = "deepep_env.doctor.cmd"


class _DoctorCommand(TyperCommand):
    """Everything after ``--`` is the --traffic command, never ENV (click would bind its first word)."""

    def parse_args(self, ctx: ClickContext, args: list[str]) -> list[str]:
        if "--" in args:
            i = args.index("--")
            ctx.meta[CMD_KEY] = list(args[i + 1 :])
            args = list(args[:i])
        return super().parse_args(ctx, args)


def _read_env_file(path: str) -> dict[str, str]:
    from deepep_env.base.readfile import MAX_CONFIG_BYTES, read_text

    text = read_text(path, what="--env-file", accepted="a KEY=VALUE file such as a captured host's env.txt",
                     limit=MAX_CONFIG_BYTES)
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[7:].lstrip()
        k, sep, v = line.partition("=")
        if sep and k.strip():
            v = v.strip()
            if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
                v = v[1:-1]
            out[k.strip()] = v
    return out


def register(app: typer.Typer) -> None:
    @app.command("doctor", cls=_DoctorCommand)
    def doctor_cmd(
        ctx: typer.Context,
        env: Optional[str] = typer.Argument(None, metavar="[ENV]", help="installed env to check (env_specs/<ENV>.toml); omit for host-only checks"),
        root: str = typer.Option("/", "--root", help="read the host under this directory instead of /"),
        prefix: Optional[str] = typer.Option(None, "--prefix", help=f"the env's prefix (default: $DEEPEP_ENV_PREFIX, else the project's {DEFAULT_PREFIX})"),
        platform: Optional[str] = typer.Option(None, "--platform", help="platform profile instead of the detected one"),
        project_dir: Optional[str] = typer.Option(None, "--project", help="project folder (default: nearest parent with env_specs/)"),
        env_file: Optional[str] = typer.Option(None, "--env-file", help="check this KEY=VALUE file as the current environment (e.g. a captured host's env.txt)"),
        traffic: bool = typer.Option(False, "--traffic", help="run the command after `--` and report NICs whose port_xmit_data did not grow"),
        as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
        strict: bool = typer.Option(False, "--strict", help="exit 1 on warnings"),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="print notes too"),
        demo_host: Optional[str] = DemoHostOpt,
    ) -> None:
        """Find the failures the seeds record, before a test runs: each with its evidence and fix."""
        from deepep_env.base.errors import UserError

        cmd = ctx.meta.get(CMD_KEY)
        if traffic and not cmd:
            raise UserError("--traffic needs a command after `--`", field="--traffic", accepted="deepep-env doctor [ENV] --traffic -- CMD [ARGS…]")
        if cmd and not traffic:
            raise UserError("a command after `--` is only run with --traffic", field="CMD", accepted="deepep-env doctor [ENV] --traffic -- CMD [ARGS…]")
        environ = _read_env_file(env_file) if env_file else None
        from deepep_env.doctor import render_text, run_doctor
        from deepep_env.platform.demo import demo_name, host_root

        with host_root(root, demo_host) as host_dir:
            report = run_doctor(env, root=host_dir, prefix=prefix, platform=platform, environ=environ,
                                project=project_dir, traffic=cmd if traffic else None)
        demo = demo_name(root, demo_host)
        if demo:  # the temporary tree is gone: name the capture instead
            import dataclasses

            report = dataclasses.replace(report, root=f"bundled capture {demo}")
        if as_json:
            from deepep_env.cli._common import print_json

            print_json(report.to_dict(strict=strict))
        else:
            import sys

            sys.stdout.write(render_text(report, strict=strict, verbose=verbose))
        code = report.exit_code(strict)
        if code:
            # SystemExit, not typer.Exit: cli/main.py returns SystemExit's code (typer.Exit's is lost there).
            raise SystemExit(code)
