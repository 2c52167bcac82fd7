"""`deepep-env task NAME [-e ENV] [-- ARGS]`: run a pixi.toml task without pixi."""
from __future__ import annotations

from typing import List, Optional

import typer

from deepep_env.cli._common import JsonOpt, ProjectOpt, SignOpt, print_json, project, signer
from deepep_env.base.errors import UserError


def register(app: typer.Typer) -> None:
    @app.command("task", context_settings={"ignore_unknown_options": True})
    def task_cmd(
        name: Optional[str] = typer.Argument(None, help="task name (omit to list tasks)"),
        args: Optional[List[str]] = typer.Argument(None, help="extra arguments, after `--`"),
        environment: Optional[str] = typer.Option(None, "--environment", "-e", help="pixi environment"),
        dry_run: bool = typer.Option(False, "--dry-run", help="print the steps, run nothing"),
        record: bool = typer.Option(True, "--record/--no-record", help="deepep-test-* tasks: write a test record under verified/ENV/"),
        sign: Optional[str] = SignOpt,
        project_dir: Optional[str] = ProjectOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Run the same task `pixi run -e ENV NAME` runs (same definitions, same environment)."""
        # library imports stay local: main.build_app imports every command module on every run
        from deepep_env.lock.pixi_model import load_manifest
        from deepep_env.views.tasks import list_tasks, plan_task, run_task

        proj = project(project_dir)
        if name is None:
            tasks = list_tasks(load_manifest(proj.pixi_toml))
            if as_json:
                print_json(tasks)
            else:
                for env, names in tasks.items():
                    print(f"{env}: {', '.join(names) or '-'}")
            return
        plan = plan_task(proj, name, environment=environment, args=args or ())
        if dry_run or as_json:
            if as_json:
                print_json(plan.to_dict())
            else:
                for s in plan.steps:
                    print(f"{s.name}: {s.cmd}")
            return
        key = signer(sign) if record and plan.records else None   # refused before the test runs
        rc = run_task(proj, plan, record=record, signer=key)
        if rc:
            raise UserError(f"task {plan.task!r} failed (exit {rc})", field=plan.environment, exit_code=rc)
