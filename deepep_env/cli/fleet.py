"""`deepep-env fleet report DIR [--json] [--html FILE] [--expect N]`: N nodes' doctor reports as one."""
from __future__ import annotations

from typing import Optional

import typer

from deepep_env.cli._common import JsonOpt, print_json


def register(app: typer.Typer) -> None:
    fleet = typer.Typer(help="Fleet preflight: every node's doctor report merged into one.", no_args_is_help=True)
    app.add_typer(fleet, name="fleet")

    @fleet.command("report")
    def report_cmd(
        folder: str = typer.Argument(..., metavar="DIR", help="one `deepep-env doctor ENV --json` output per node (*.json)"),
        expect: Optional[int] = typer.Option(None, "--expect", help="the number of nodes the job needs (fewer reports fail)"),
        html: Optional[str] = typer.Option(None, "--html", help="also write a self-contained page to FILE"),
        as_json: bool = JsonOpt,
    ) -> None:
        """One line per node, the facts that differ (majority and odd nodes), the first node that would
        break the job. Exit 1 when a node has doctor errors or the fleet is not uniform."""
        from deepep_env.fleet.report import fleet_report, render_text

        rep = fleet_report(folder, expect)
        if html is not None:
            from deepep_env.base.atomic import write_output
            from deepep_env.fleet.html import render_html

            write_output(html, render_html(rep), field="--html")
        if as_json:
            print_json(rep)
        else:
            import sys

            sys.stdout.write(render_text(rep))
        if not rep["ok"]:
            raise SystemExit(1)
