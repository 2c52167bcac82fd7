"""`deepep-env lock ENV [--check]`: solve the spec into the project's pixi.lock, or say why it is stale."""
from __future__ import annotations

from typing import Optional

import typer

from deepep_env.cli._common import JsonOpt, ProjectOpt, print_json, print_warnings, project
from deepep_env.errors import StaleError


def register(app: typer.Typer) -> None:
    @app.command("lock")
    def lock_cmd(
        env: str = typer.Argument(..., help="env name (env_specs/<name>.toml)"),
        channel: Optional[str] = typer.Option(None, "--channel", help="the local channel folder (default <state>/channel)"),
        check: bool = typer.Option(False, "--check", help="do not solve: exit 1 when the lock no longer satisfies the spec"),
        output: Optional[str] = typer.Option(None, "--output", "-o", help="lock path (default: the project's pixi.lock)"),
        project_dir: Optional[str] = ProjectOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Solve ENV's packages with rattler and write a pixi.lock (v7); --check explains staleness."""
        proj = project(project_dir)
        # library imports stay local: main.build_app imports every command module on every run
        from deepep_env.lock import check_lock, lock_env
        from deepep_env.lock.render import check_text

        if check:
            checked = check_lock(env, proj, channel=channel, lock_path=output)
            data = checked.to_dict()
            if as_json:
                print_json(data)
            else:
                print(check_text(data))
            if not checked.fresh:
                raise StaleError(f"lock is stale ({len(checked.reasons)} reason(s): "
                                 f"{', '.join(sorted({r.kind for r in checked.reasons}))})", file=checked.path,
                                 accepted=f"run `deepep-env lock {env}`")
            return
        res = lock_env(env, proj, channel=channel, output=output)
        data = res.to_dict()
        print_warnings(data["warnings"])
        if as_json:
            print_json(data)
            return
        n = sum(len(v) for v in res.packages.values())
        state = "written" if res.changed else "unchanged"
        print(f"{res.env}: {res.path} {state} ({n} packages, {', '.join(res.platforms)})")
        for sub, pkgs in res.packages.items():
            for p in pkgs:
                print(f"  {sub}  {p['name']} {p['version']} {p['build']}")
