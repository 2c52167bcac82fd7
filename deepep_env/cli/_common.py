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


SignOpt = typer.Option(None, "--sign", metavar="KEY",
                       help="sign the record with this ed25519 key (`deepep-env key new`): an in-toto attestation "
                       "beside it (default: $DEEPEP_ENV_SIGNING_KEY)")
TrustOpt = typer.Option(None, "--trust", metavar="FILE",
                        help="a trust file (public keys, one a line; a .pub file is one): a record verifies only when "
                        "one of its keys signed it (default: the spec's [verify] trust)")


def signer(path: Optional[str]) -> Any:
    """The signing key of ``--sign`` (else ``$DEEPEP_ENV_SIGNING_KEY``), loaded and checked before any work;
    None when neither names one."""
    import os
    from pathlib import Path

    from deepep_env.verify.keys import load_signer

    path = path or os.environ.get("DEEPEP_ENV_SIGNING_KEY") or None
    return load_signer(Path(path)) if path else None


def trust(path: Optional[str]) -> Any:
    """The trust policy of ``--trust FILE`` (None when not given)."""
    from pathlib import Path

    from deepep_env.verify.keys import load_trust

    return load_trust(Path(path)) if path else None
