"""Helpers shared by the thin command modules: JSON output and the project option."""
from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, Iterable, Optional

import typer

from deepep_env.base.project import Project, find_project

if TYPE_CHECKING:  # annotations only: rich loads on first use
    from rich.console import Console

ProjectOpt = typer.Option(None, "--project", help="project folder (default: nearest parent with env_specs/)")
JsonOpt = typer.Option(False, "--json", help="print JSON instead of a table")
DemoHostOpt = typer.Option(None, "--demo-host", help="use a bundled captured host (gcp-b200-demo, gke-a4-demo, h20-roce-demo, h200x8-nvlink) "
                           "instead of this machine; --root NAME works too")


def project(path: Optional[str]) -> Project:
    return find_project(path)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def print_warnings(warnings: Iterable[str]) -> None:
    """A library result's warnings, one line each on stderr (stdout stays the result, or its JSON)."""
    from deepep_env.base.channels.auth import redact
    from deepep_env.base.safetext import terminal

    for w in warnings:
        print(f"deepep-env: warning: {terminal(redact(w))}", file=sys.stderr)


def console() -> Console:
    from rich.console import Console

    import shutil

    width = max(shutil.get_terminal_size((160, 24)).columns, 120)
    return Console(highlight=False, width=width)
