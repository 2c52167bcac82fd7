"""`deepep-env admit ENV [--tests T,…] [--ranks N] [--json] [-- ARGS]` on a node, or
`deepep-env admit ENV --test T --log FILE [--json] [-- ARGS]` for a captured run: a node's DeepEP
figures, per rank, against the floors of the env's verified records (docs/admit.md).

Exit status: 0 admitted, 1 refused, 2 bad input or a doctor error, 3 no floor to compare with."""
from __future__ import annotations

from typing import List, Optional

import typer

from deepep_env.cli._common import JsonOpt, ProjectOpt, print_json, project


def register(app: typer.Typer) -> None:
    @app.command("admit", context_settings={"ignore_unknown_options": True})
    def admit_cmd(
        env: str = typer.Argument(..., help="env name (env_specs/<ENV>.toml)"),
        args: Optional[List[str]] = typer.Argument(None, help="the test's arguments, after `--`"),
        test: Optional[str] = typer.Option(None, "--test", help="with --log: the test that ran (intranode, low-latency, elastic-ep)"),
        log: Optional[str] = typer.Option(None, "--log", help="judge this captured output instead of running the tests"),
        tests: Optional[str] = typer.Option(None, "--tests", help="on a node: the tests to run, comma-separated (default: the env's engine tests)"),
        ranks: Optional[int] = typer.Option(None, "--ranks", min=1, help="ranks (default: --num-processes, the output, the spec's verify.ranks, the GPUs)"),
        exit_code: int = typer.Option(0, "--exit-code", help="with --log: the run's exit status"),
        timeout: float = typer.Option(300.0, "--timeout", min=1, help="on a node: seconds before a run is a hang"),
        attempts: int = typer.Option(3, "--attempts", min=1, max=10, help="on a node: runs before a refusal"),
        valid_hours: float = typer.Option(24.0, "--valid-hours", min=0.1, help="how long the admission holds"),
        doctor: bool = typer.Option(True, "--doctor/--no-doctor", help="on a node: doctor first (an error stops admit)"),
        write: bool = typer.Option(True, "--write/--no-write", help="write the admission record under verified/ENV/admissions/"),
        root: Optional[str] = typer.Option(None, "--root", help="the host (default: $DEEPEP_ENV_HOST_ROOT, else /)"),
        platform: Optional[str] = typer.Option(None, "--platform", help="platform profile instead of the detected one"),
        project_dir: Optional[str] = ProjectOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Admit or refuse this node: each figure of each rank against the floors of the env's records."""
        import os
        import sys
        from pathlib import Path

        from deepep_env.base.errors import UserError
        from deepep_env.base.readfile import read_tail
        from deepep_env.verify.records import OUTPUT_TAIL_BYTES, host_root
        from deepep_env.views.admit import admit_log, admit_node, render_text

        proj = project(project_dir)
        host = root or host_root()
        plat = platform or os.environ.get("DEEPEP_ENV_PLATFORM") or None
        if log is not None:
            if not test:
                raise UserError("--log needs --test", field="--test", accepted="intranode, low-latency, elastic-ep")
            output = read_tail(Path(log), OUTPUT_TAIL_BYTES, accepted="a test's output log").decode("utf-8", "replace")
            rec = admit_log(proj, env, test, output, args or (), root=host, platform=plat, ranks=ranks,
                            exit_code=exit_code, source=f"log {log}", valid_hours=valid_hours, write=write)
        else:
            if test:
                raise UserError("--test is for --log; on a node name the tests with --tests", field="--test",
                                accepted="--tests intranode,low-latency")
            names = [t.strip() for t in (tests or "").split(",") if t.strip()]
            rec = admit_node(proj, env, names, root=host, platform=plat, ranks=ranks, args=args or (),
                             timeout=timeout, attempts=attempts, valid_hours=valid_hours, write=write,
                             doctor=doctor)
        if as_json:
            print_json(rec)
        else:
            sys.stdout.write(render_text(rec))
        if not rec["admitted"]:
            raise SystemExit(1)
