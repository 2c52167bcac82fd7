"""`deepep-env plan ENV`: the main job's dry run."""
from __future__ import annotations

from typing import Optional

import typer

from deepep_env.cli._common import JsonOpt, ProjectOpt, TrustOpt, console, print_json, project, trust


def register(app: typer.Typer) -> None:
    @app.command("plan")
    def plan_cmd(
        name: str = typer.Argument(..., help="env name (env_specs/<name>.toml)"),
        root: Optional[str] = typer.Option(None, "--root", help="read the host under this root instead of /"),
        demo_host: Optional[str] = typer.Option(
            None, "--demo-host",
            help="use a bundled captured host (gcp-b200-demo, gke-a4-demo, h20-roce-demo, h200x8-nvlink) instead of this machine",
        ),
        platform: Optional[str] = typer.Option(None, "--platform", help="override the detected platform"),
        trust_file: Optional[str] = TrustOpt,
        project_dir: Optional[str] = ProjectOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Resolved pins, build graph with ids and store status, lock status, overlay and doctor findings."""
        from deepep_env.views.planning import make_plan

        data = make_plan(name, project(project_dir), root=root, demo_host=demo_host, platform=platform,
                         trust=trust(trust_file))
        if as_json:
            print_json(data)
            return
        from deepep_env.cli.render_plan import render_plan

        render_plan(console(), data)
