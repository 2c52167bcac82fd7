"""``deepep-env build``: build an env's packages (or every recipe under a folder) into the store
and the local channel, in dependency order, rebuilding only what changed."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Optional

import typer

from deepep_env.base.channels.auth import check_url_has_no_secret
from deepep_env.cli._common import JsonOpt, ProjectOpt, print_json
from deepep_env.base.errors import StaleError, UserError
from deepep_env.base.project import Project, find_project

if TYPE_CHECKING:  # annotations only: rich, pydantic, yaml load on first use (see build_cmd)
    from rich.console import Console

    from deepep_env.builder.build import BuildReport, Progress
    from deepep_env.builder.plan import BuildNode


PROGRESS_EVERY_S = 20.0


def progress_printer(console: Console) -> Progress:
    """Live status on a terminal; elsewhere (CI, a log file) timestamped lines: the start of each
    package, then its latest build-log line at most every PROGRESS_EVERY_S seconds."""
    import time

    state: dict[str, Any] = {"status": None, "last": 0.0}  # the rich status shown, the last progress line
    tty = console.is_terminal

    def line(text: str) -> None:
        console.print(f"{time.strftime('%H:%M:%S')} {text}", markup=False, highlight=False, soft_wrap=True)

    def cb(event: str, node: BuildNode, result: Any) -> None:  # result: a log line, a NodeResult
        if event == "start":
            if tty:
                state["status"] = console.status(f"[bold]{node.package}[/] {node.build_string}")
                state["status"].start()
            else:
                line(f"start  {node.package} {node.build_string}")
                state["last"] = time.monotonic()
        elif event == "log":
            if not tty and time.monotonic() - state["last"] >= PROGRESS_EVERY_S:
                state["last"] = time.monotonic()
                line(f"       {node.package}: {' '.join(str(result).split())[:200]}")
        elif event == "done":
            if state["status"] is not None:
                state["status"].stop()
                state["status"] = None
            colour = {"built": "green", "restored": "yellow"}.get(result.status, "dim")
            console.print(f"[{colour}]{result.status:6}[/] {node.package} {result.version} {node.build_string}"
                          f"  {result.seconds:.1f}s")
            for n in result.notes:
                console.print(f"note   {n}", markup=False, highlight=False)
        elif event == "check":
            console.print(f"[yellow]check [/] {node.package}: rebuilding to compare archives (sha256)")

    return cb


def _channel_url(c: str) -> str:
    # a folder given on the command line becomes a file:// URL; URLs and channel names pass as given.
    # A credential in the URL is refused as for a spec's channels: rattler-build records the channels
    # it read in the package (and logs them); credentials come from RATTLER_AUTH_FILE / keyring.
    check_url_has_no_secret(c, field="--extra-channel")
    p = Path(c)
    return p.resolve().as_uri() if "://" not in c and (p.is_dir() or c.startswith((".", "/"))) else c


def _recipes_report(recipes: Path, project: Optional[str], *, store: Optional[Path], channel: Optional[Path],
                    source_cache: Optional[Path], extra_channel: List[str], **kw: Any) -> BuildReport:
    """``--recipes DIR``: the graph of every recipe under DIR; state paths default to the project's,
    or to the current folder's when DIR is a bare folder of recipes (no project)."""
    from deepep_env.builder.build import build_recipes   # local: pydantic, yaml (see build_cmd)

    try:
        proj = find_project(project)
    except UserError:
        proj = Project(Path.cwd())  # a bare folder of recipes needs no project
    return build_recipes(recipes, store=store or proj.store, channel=channel or proj.channel,
                         source_cache=source_cache or proj.source_cache, state=None if store else proj.state,
                         extra_channels=[_channel_url(c) for c in extra_channel], **kw)


def _print_report(report: BuildReport) -> None:
    built = len(report.built)
    restored = sum(1 for n in report.nodes if n.status == "restored")
    also = f"{restored} restored (the channel's copy or its index was damaged: repaired from the store), " if restored else ""
    typer.echo(f"{built} built, {also}{len(report.nodes) - built - restored} cached; channel {report.channel}")
    for c in report.checks:
        verdict = "identical" if c.identical else f"{len(c.differences)} difference(s)"
        typer.echo(f"check {c.package}: {verdict}")
        for d in c.differences:
            typer.echo(f"  {d}")


def register(app: typer.Typer) -> None:
    @app.command("build")
    def build_cmd(
        env: Optional[str] = typer.Argument(None, help="env spec name (env_specs/<ENV>.toml)"),
        recipes: Optional[Path] = typer.Option(None, "--recipes", help="build every recipe folder under DIR instead"),
        store: Optional[Path] = typer.Option(None, "--store", help="build store folder"),
        channel: Optional[Path] = typer.Option(None, "--channel", help="local channel folder"),
        source_cache: Optional[Path] = typer.Option(None, "--source-cache", help="source cache folder"),
        offline: bool = typer.Option(False, "--offline", help="use only the source cache; never download"),
        check: bool = typer.Option(False, "--check", help="rebuild every package and compare the archives (sha256; differing members named)"),
        check_package: List[str] = typer.Option([], "--check-package", help="rebuild and compare only this package"),
        lock: Optional[Path] = typer.Option(None, "--lock", help="compare every package built (or cached) with "
                                            "the sha256 this lock records"),
        jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="parallel jobs inside a build (make -j), at least 1"),
        extra_channel: List[str] = typer.Option([], "--extra-channel", help="with --recipes: a channel (URL or "
                                                "folder) for requirements no recipe of DIR builds; repeatable"),
        project: Optional[str] = ProjectOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Build packages keyed by build id: an id already in the store is not rebuilt."""
        # local: rich, pydantic, yaml, and main.build_app imports every command module on every run
        from rich.console import Console

        from deepep_env.base.atomic import output_dir
        from deepep_env.builder.build import build_env, check_against_lock
        from deepep_env.base.readfile import present

        if lock is not None and not present(lock):
            raise UserError("--lock names no file", file=lock, accepted="a pixi.lock written by `deepep-env lock`")
        for flag, folder in (("--store", store), ("--channel", channel), ("--source-cache", source_cache)):
            if folder is not None:
                output_dir(folder, field=flag)

        console = Console(stderr=True)
        progress = progress_printer(console)
        check_arg = list(check_package) if check_package else check
        if recipes is not None:
            if env:
                raise UserError("give an ENV or --recipes DIR, not both", field="ENV")
            report = _recipes_report(recipes, project, store=store, channel=channel, source_cache=source_cache,
                                     extra_channel=extra_channel, offline=offline, check=check_arg, jobs=jobs,
                                     progress=progress)
        else:
            if extra_channel:
                raise UserError("--extra-channel goes with --recipes DIR (an env's channels come from its spec)",
                                field="--extra-channel")
            if not env:
                raise UserError("name an env (or pass --recipes DIR)", field="ENV")
            report = build_env(env, find_project(project), store=store, channel=channel, source_cache=source_cache,
                               offline=offline, check=check_arg, jobs=jobs, progress=progress)
        if lock is not None:
            report.checks += check_against_lock(report, lock, env)
        if as_json:
            print_json(report.to_json())
        else:
            _print_report(report)
        if not report.reproducible:
            bad = [c for c in report.checks if not c.identical]
            raise StaleError(f"--check: {', '.join(c.package for c in bad)} did not build identically "
                             f"({sum(len(c.differences) for c in bad)} differing files listed above)")
