"""`deepep-env export ENV --format conda-lock`: the lock as conda-lock.yml."""
from __future__ import annotations

from typing import Optional

import typer

from deepep_env.cli._common import JsonOpt, ProjectOpt, print_json, project
from deepep_env.errors import UserError


def register(app: typer.Typer) -> None:
    @app.command("export")
    def export_cmd(
        env: str = typer.Argument(..., help="env name"),
        fmt: str = typer.Option("conda-lock", "--format", "-f", help="conda-lock"),
        output: Optional[str] = typer.Option(None, "--output", "-o", help="output file (default <ENV>.conda-lock.yml in the project)"),
        lock: Optional[str] = typer.Option(None, "--lock", help="pixi lock to read (default: the project's pixi.lock)"),
        platform: Optional[str] = typer.Option(None, "--platform", help="the lock platform to export when several share a subdir"),
        project_dir: Optional[str] = ProjectOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Write ENV's lock in another lock format (conda-lock v1 file, through conda-lock's models)."""
        # library imports stay local: main.build_app imports every command module on every run
        from deepep_env.lock import export_conda_lock

        if fmt != "conda-lock":
            raise UserError(f"unknown format {fmt!r}", field="--format", accepted="conda-lock")
        res = export_conda_lock(env, project(project_dir), lock_path=lock, output=output, platform=platform)
        if as_json:
            print_json(res.to_dict())
        else:
            print(f"{res.env}: wrote {res.path} ({res.packages} packages, {', '.join(res.platforms)})")
