"""`deepep-env prove ENV...`: install each env from its lock, compare its bytes with the lock, run its tests
on the host's GPUs (records written), one table; `--follow` attaches to a run still going."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from deepep_env.cli._common import JsonOpt, ProjectOpt, SignOpt, print_json, project, signer


def register(app: typer.Typer) -> None:
    @app.command("prove")
    def prove_cmd(
        envs: Optional[List[str]] = typer.Argument(None, help="env names"),
        reinstall: bool = typer.Option(False, "--reinstall", help="install again from nothing but the lock"),
        relock: bool = typer.Option(False, "--relock", help="build and lock each env here first"),
        ranks: str = typer.Option("all", "--ranks", help="--num-processes of each test: all (every GPU) or N"),
        tests: Optional[List[str]] = typer.Option(None, "--test", help="only these tests (intranode, low-latency, ...)"),
        offline: bool = typer.Option(False, "--offline", help="--relock: build from the source cache only"),
        from_carry: Optional[Path] = typer.Option(None, "--from-carry", help="install from a `deepep-env carry` "
                                                  "archive (no network)"),
        follow: bool = typer.Option(False, "--follow", help="follow the latest run (its progress, then its table)"),
        timeout: Optional[float] = typer.Option(None, "--timeout", help="--follow: stop following after S seconds "
                                                "(exit 3 while the run goes on)"),
        detach: bool = typer.Option(False, "--detach", help="start the run in the background and print its folder "
                                    "(then `prove --follow`)"),
        run_dir: Optional[str] = typer.Option(None, "--run-dir", hidden=True, help="the run folder (--detach's)"),
        jobs: int = typer.Option(1, "--jobs", "-j", min=1, max=64, help="install (build) this many envs at once "
                                 "before the tests run env by env (not with --relock)"),
        sign: Optional[str] = SignOpt,
        project_dir: Optional[str] = ProjectOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Prove ENV...: byte-identical from the lock, and every test passing on the host's GPUs."""
        from deepep_env.base.errors import UserError
        from deepep_env.views import prove as pv

        proj = project(project_dir)
        if follow:
            if envs or reinstall or relock:
                raise UserError("--follow takes no ENV, --reinstall or --relock: it attaches to the latest run",
                                field="--follow", accepted="deepep-env prove --follow")
            data = pv.follow(pv.latest_run(proj), sys.stderr, timeout_s=timeout)
        elif relock and jobs > 1:
            raise UserError("--jobs installs envs from their lock at once; --relock builds and locks each in turn",
                            field="--jobs", accepted="--jobs with --reinstall or no mode, or --relock alone")
        elif detach and relock and from_carry:
            raise UserError("--relock makes a new lock, which no carry holds", field="--from-carry",
                            accepted="--from-carry with --reinstall, or --relock alone")
        elif detach:
            argv = [*(envs or []), *(["--reinstall"] if reinstall else []), *(["--relock"] if relock else []),
                    "--ranks", ranks, *[a for t in tests or () for a in ("--test", t)], *(["--offline"] if offline else []),
                    *(["--from-carry", str(from_carry.resolve())] if from_carry else []),
                    *(["--sign", str(Path(sign).resolve())] if sign else []), "--jobs", str(jobs)]
            print(pv.detach(argv, proj, envs=envs or [], mode="relock" if relock else "reinstall" if reinstall else "lock",
                            ranks=ranks))
            return
        else:
            if reinstall and relock:
                raise UserError("give one of --reinstall, --relock", field="--relock", accepted="one of them")
            if relock and from_carry:
                raise UserError("--relock makes a new lock, which no carry holds", field="--from-carry",
                                accepted="--from-carry with --reinstall, or --relock alone")
            mode = "relock" if relock else "reinstall" if reinstall else "lock"
            data = pv.prove(envs or [], proj, mode=mode, ranks=ranks, tests=tests or (), echo=sys.stderr,
                            offline=offline, run=Path(run_dir) if run_dir else None, carry=from_carry,
                            signer=signer(sign), jobs=jobs).to_dict()
        if as_json:
            print_json(data)
        else:
            for line in pv.table(data):
                print(line)
        if not data.get("ok"):
            raise typer.Exit(1)
