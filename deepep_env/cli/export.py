"""`deepep-env export ENV | --all [--check]`: pixi.lock's environments as conda-lock files in lockfiles/."""
from __future__ import annotations

from typing import Optional

import typer

from deepep_env.cli._common import JsonOpt, ProjectOpt, print_json, project
from deepep_env.base.errors import UserError


def _refuse_bad_combination(env: Optional[str], all_envs: bool, fmt: str, platform: Optional[str]) -> None:
    if fmt != "conda-lock":
        raise UserError(f"unknown format {fmt!r}", field="--format", accepted="conda-lock")
    if bool(env) == all_envs:
        raise UserError("give one environment or --all", field="ENV", accepted="`export ENV` or `export --all`")
    if all_envs and platform:
        raise UserError("--platform picks one environment's platform", field="--platform",
                        accepted="`export ENV --platform P` (without --all)")


def register(app: typer.Typer) -> None:
    @app.command("export")
    def export_cmd(
        env: Optional[str] = typer.Argument(None, help="env name (or --all)"),
        all_envs: bool = typer.Option(False, "--all", help="every environment of pixi.lock, into lockfiles/"),
        check: bool = typer.Option(False, "--check", help="write nothing; exit 1 naming the first file that differs"),
        fmt: str = typer.Option("conda-lock", "--format", "-f", help="conda-lock"),
        output: Optional[str] = typer.Option(None, "--output", "-o",
                                             help="output file (ENV) or folder (--all); default lockfiles/"),
        lock: Optional[str] = typer.Option(None, "--lock", help="pixi lock to read (default: the project's pixi.lock)"),
        platform: Optional[str] = typer.Option(None, "--platform", help="the lock platform to export when several share a subdir"),
        project_dir: Optional[str] = ProjectOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Write pixi.lock's environments as conda-lock v1 files (conda-lock install, micromamba), each
        with the environment.yml it names as its source; pixi.lock stays the one source of truth."""
        # library imports stay local: main.build_app imports every command module on every run
        from deepep_env.lock.export import export_conda_lock
        from deepep_env.lock.exports import sync_exports

        _refuse_bad_combination(env, all_envs, fmt, platform)
        if output is not None and not check:   # checked before the lock is read
            from deepep_env.base.atomic import output_dir, output_file

            (output_dir if all_envs else output_file)(output, field="--output")
        if all_envs:
            res = sync_exports(project(project_dir), lock_path=lock, folder=output, check=check)
            if as_json:
                print_json(res.to_dict())
            else:
                print(f"{res.folder}: {res.status} ({len(res.files)} files: {', '.join(res.environments)})")
                for p in res.removed:
                    print(f"  removed {p}")
            return
        one = export_conda_lock(str(env), project(project_dir), lock_path=lock, output=output, platform=platform,
                                check=check)
        if as_json:
            print_json(one.to_dict())
        else:
            print(f"{one.env}: {one.status} {one.path} ({one.packages} packages, {', '.join(one.platforms)})")
