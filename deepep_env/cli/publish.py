"""`deepep-env publish ENV --to URL`: upload an env's built packages to a team channel."""
from __future__ import annotations

from typing import List, Optional

import typer

from deepep_env.cli._common import JsonOpt, ProjectOpt, QuietOpt, print_json, transfer_bars
from deepep_env.base.errors import UserError


def register(app: typer.Typer) -> None:
    @app.command("publish")
    def publish_cmd(
        env: Optional[str] = typer.Argument(
            None, help="env name whose build manifest (<state>/builds/ENV.json) lists the packages"),
        to: Optional[str] = typer.Option(
            None, "--to", help="channel: file:///dir, https://host/chan (WebDAV PUT), artifactory+https://…, "
            "s3://bucket/prefix, quetz+https://host/CHANNEL, prefix://CHANNEL (default: the spec's publish_url)"),
        package: Optional[List[str]] = typer.Option(
            None, "--package", help="publish this package file instead of the manifest's (repeatable)"),
        state: Optional[str] = typer.Option(None, "--state", help="tool state dir (default: .deepep-env)"),
        project_dir: Optional[str] = ProjectOpt,
        as_json: bool = JsonOpt,
        quiet: bool = QuietOpt,
    ) -> None:
        """Upload packages and leave the channel indexed. Credentials: DEEPEP_ENV_CHANNEL_TOKEN or
        DEEPEP_ENV_CHANNEL_USER/_PASSWORD, RATTLER_AUTH_FILE, keyring; S3: AWS_* variables."""
        # library imports stay local: main.build_app imports every command module on every run
        from deepep_env.base.channels.auth import install_log_redaction, redact
        from deepep_env.views.publishing import publish_env

        install_log_redaction()
        try:
            with transfer_bars("uploaded", quiet):
                report = publish_env(env, to, packages=package or (), state=state, project=project_dir)
        except UserError as err:
            # Re-raised with the message scrubbed: main.py prints str(err) as the one error line.
            err.args = (redact(str(err)),)
            err.message = redact(err.message)
            err.file = redact(err.file) if err.file else None
            raise
        if as_json:
            print_json(report.to_json())
            return
        for line in report.lines():
            typer.echo(line)
