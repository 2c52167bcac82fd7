"""Helpers shared by the thin command modules: JSON output and the project option."""
from __future__ import annotations

import contextlib
import json
import sys
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Optional

import typer

from deepep_env.base.project import Project, find_project

if TYPE_CHECKING:  # annotations only: rich loads on first use
    from rich.console import Console
    from rich.progress import Progress, TaskID

ProjectOpt = typer.Option(None, "--project", help="project folder (default: nearest parent with env_specs/)")
JsonOpt = typer.Option(False, "--json", help="print JSON instead of a table")
QuietOpt = typer.Option(False, "--quiet", "-q", help="no progress bars (shown only when stdout and stderr are a terminal)")
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


class _Bars:
    """base/progress.Transfers as rich progress bars on stderr: one bar per file while it moves, and
    the total of every file so far."""

    def __init__(self, bars: Progress, verb: str) -> None:
        self.bars = bars
        self.tasks: dict[str, TaskID] = {}
        self.total = bars.add_task(f"{verb} (total)", total=0)

    def start(self, label: str, total: Optional[int]) -> None:
        self.tasks[label] = self.bars.add_task(label, total=total)
        if total:
            t = self.bars.tasks[self.total].total or 0
            self.bars.update(self.total, total=t + total)

    def advance(self, label: str, nbytes: int) -> None:
        if label in self.tasks:
            self.bars.advance(self.tasks[label], nbytes)
        self.bars.advance(self.total, nbytes)

    def finish(self, label: str) -> None:
        task = self.tasks.pop(label, None)
        if task is not None:
            self.bars.update(task, visible=False)


@contextlib.contextmanager
def transfer_bars(verb: str, quiet: bool = False) -> Iterator[None]:
    """Progress bars for the transfers the library reports inside the block (base/progress.py), on a
    terminal only: nothing when stdout or stderr is not a TTY (a log, a pipe, `--json > f`) or with --quiet."""
    if quiet or not (sys.stdout.isatty() and sys.stderr.isatty()):
        yield
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    from deepep_env.base.progress import reporting

    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  console=Console(stderr=True), transient=True) as bars, reporting(_Bars(bars, verb)):
        yield
