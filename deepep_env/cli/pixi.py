"""`deepep-env pixi sync [--check]`: pixi.toml generated from env_specs/."""
from __future__ import annotations

import sys
from typing import Optional

import typer

from deepep_env.cli._common import JsonOpt, ProjectOpt, print_json, project


def register(app: typer.Typer) -> None:
    pixi_app = typer.Typer(help="pixi.toml kept in step with env_specs/.", no_args_is_help=True)

    @pixi_app.command("sync")
    def sync_cmd(
        check: bool = typer.Option(False, "--check", help="write nothing; exit 1 when pixi.toml differs"),
        project_dir: Optional[str] = ProjectOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Write pixi.toml from the specs (one environment per spec, tasks for DeepEP's tests)."""
        from deepep_env.pixi import raise_if_stale, sync

        res = sync(project(project_dir), check=check)
        for w in res.warnings:
            print(f"deepep-env: warning: {w}", file=sys.stderr)
        if as_json:
            print_json(res.to_dict())
            raise_if_stale(res)
            return
        if res.status == "stale":
            sys.stdout.write("\n".join(res.diff[:60]) + "\n")
            raise_if_stale(res)
        print(f"{res.path}: {res.status} ({len(res.environments)} environments: {', '.join(res.environments)})")

    app.add_typer(pixi_app, name="pixi")
