"""`deepep-env spec validate FILE…` and `deepep-env spec show NAME`."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from deepep_env.cli._common import JsonOpt, ProjectOpt, console, print_json, project


def register(app: typer.Typer) -> None:
    spec_app = typer.Typer(help="Validate and show env specs.", no_args_is_help=True)

    @spec_app.command("validate")
    def validate(files: List[Path] = typer.Argument(..., help="spec files (env_specs/*.toml)"),
                 project_dir: Optional[str] = ProjectOpt, as_json: bool = JsonOpt) -> None:
        """Load, check and resolve each spec; exit 2 on the first bad one."""
        # local: pydantic, and main.build_app imports every command module on every run
        from deepep_env.envspec.load import load_spec_file
        from deepep_env.envspec.resolve import resolve

        proj = project(project_dir)
        results = []
        for f in files:
            spec = load_spec_file(f)
            r = resolve(spec, proj, file=f)
            results.append({"file": str(f), "name": r.name, "version": r.version, "ok": True})
        if as_json:
            print_json(results)
        else:
            for res in results:
                console().print(f"[green]ok[/green] {res['file']} ({res['name']} {res['version']})")

    @spec_app.command("show")
    def show(name: str = typer.Argument(..., help="env name or spec path"),
             project_dir: Optional[str] = ProjectOpt, as_json: bool = JsonOpt) -> None:
        """The resolved spec with each package's build id."""
        # local: pydantic, yaml (and rich below), and main.build_app imports every command module on every run
        from deepep_env.cli.render_plan import render_resolved
        from deepep_env.views.planning import resolved_with_builds

        data = resolved_with_builds(name, project(project_dir))
        if as_json:
            print_json(data)
            return
        render_resolved(console(), data)

    app.add_typer(spec_app, name="spec")
