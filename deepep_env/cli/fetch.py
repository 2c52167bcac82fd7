"""``deepep-env fetch``: download (or import with ``--from``) and verify every source and patch."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from deepep_env.cli._common import JsonOpt, ProjectOpt, QuietOpt, print_json, transfer_bars
from deepep_env.base.errors import UserError
from deepep_env.base.project import Project, find_project


def register(app: typer.Typer) -> None:
    @app.command("fetch")
    def fetch_cmd(
        env: Optional[str] = typer.Argument(None, help="env spec name (env_specs/<ENV>.toml)"),
        recipes: Optional[Path] = typer.Option(None, "--recipes", help="fetch for every recipe folder under DIR instead"),
        source_cache: Optional[Path] = typer.Option(None, "--source-cache", help="source cache folder"),
        from_dir: Optional[Path] = typer.Option(None, "--from", help="local upstream copies (tarballs, trees, patches)"),
        offline: bool = typer.Option(False, "--offline", help="no network: only the cache and --from"),
        project: Optional[str] = ProjectOpt,
        as_json: bool = JsonOpt,
        quiet: bool = QuietOpt,
    ) -> None:
        """Fill the source cache; every source and patch is verified by content hash."""
        # library imports stay local: main.build_app imports every command module on every run
        from deepep_env.base.atomic import output_dir
        from deepep_env.builder.fetch_env import fetch_sources

        if source_cache is not None:
            output_dir(source_cache, field="--source-cache")

        try:
            proj = find_project(project)
        except UserError:
            if recipes is None or project is not None:
                raise
            proj = Project(Path.cwd())  # a bare folder of recipes needs no project
        with transfer_bars("downloaded", quiet):
            report = fetch_sources(env, proj, recipes_dir=recipes, cache=source_cache, offline=offline,
                                   from_dir=from_dir)
        if as_json:
            print_json(report.to_json())
            return
        for item in report.items:
            w = item.want
            typer.echo(f"{item.status:9} {w.package}: {w.kind} {w.name} {item.digest or ''}")
        for item in report.recorded:
            w = item.want
            key = "tree_sha256" if w.kind == "source" else "sha256"
            checked = f" (its archive has the pinned archive_sha256 {w.archive})" if w.archive else ""
            typer.echo(f"unpinned: {w.package}: {w.kind} {w.name} hashes to {item.digest}{checked}; review it and "
                       f"record it in {w.catalog} as {key} = \"{item.digest}\"", err=True)
        if report.ignored:
            typer.echo(f"ignored (matched no pin): {', '.join(report.ignored)}", err=True)
