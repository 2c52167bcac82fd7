"""`deepep-env overlay`: the host's environment overlay, rendered for a shell or a manifest."""
from __future__ import annotations

import sys
from typing import Optional

import typer

from deepep_env.cli._common import DemoHostOpt


def register(app: typer.Typer) -> None:
    @app.command("overlay")
    def overlay_cmd(
        platform: Optional[str] = typer.Option(None, "--platform", help="Platform profile; default: detected."),
        root: str = typer.Option("/", "--root", help="Read the host under this directory; default /."),
        prefix: Optional[str] = typer.Option(None, "--prefix", help="An installed env prefix (enables the NVSHMEM preload rule and its spec env)."),
        fmt: str = typer.Option("bash", "--format", "-f", help="bash, zsh, fish, json, dotenv, k8s, k8s-json."),
        as_json: bool = typer.Option(False, "--json", help="same as --format json"),
        demo_host: Optional[str] = DemoHostOpt,
    ) -> None:
        """Environment changes for this host, each with the rule and the fact behind it."""
        from deepep_env.host.context import overlay_context, read_host
        from deepep_env.base.errors import UserError
        from deepep_env.overlay.render import FORMATS, render

        if as_json:
            fmt = "json"
        if fmt not in FORMATS:
            raise UserError(f"unknown format {fmt!r}", field="--format", accepted=", ".join(FORMATS))
        from deepep_env.platform.demo import host_root

        with host_root(root, demo_host) as host_dir:
            ctx = overlay_context(read_host(host_dir, platform), prefix)
        for w in ctx.warnings:
            print(f"deepep-env: warning: {w}", file=sys.stderr)
        sys.stdout.write(render(ctx.overlay, fmt))
