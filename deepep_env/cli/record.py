"""`deepep-env record ENV --test T --exit-code N [--log FILE] [-- ARGS]`: write the test record of a
test that ran outside `deepep-env task` (a rendered launch job's node)."""
from __future__ import annotations

from typing import List, Optional

import typer

from deepep_env.cli._common import JsonOpt, ProjectOpt, SignOpt, print_json, project, signer


def register(app: typer.Typer) -> None:
    @app.command("record", context_settings={"ignore_unknown_options": True})
    def record_cmd(
        env: str = typer.Argument(..., help="env name (env_specs/<ENV>.toml)"),
        args: Optional[List[str]] = typer.Argument(None, help="the test's arguments, after `--`"),
        test: str = typer.Option(..., "--test", help="the test that ran (intranode, internode, low-latency, …)"),
        exit_code: int = typer.Option(..., "--exit-code", help="its exit status"),
        log: Optional[str] = typer.Option(None, "--log", help="its output (figures are read from it; the last 8 MiB)"),
        root: Optional[str] = typer.Option(None, "--root", help="the host (default: $DEEPEP_ENV_HOST_ROOT, else /)"),
        platform: Optional[str] = typer.Option(None, "--platform", help="platform profile instead of the detected one"),
        prefix: Optional[str] = typer.Option(None, "--prefix", help="the env's prefix, whose activation the record keeps "
                                             "(default: $CONDA_PREFIX when it holds ENV, else the project's)"),
        sign: Optional[str] = SignOpt,
        project_dir: Optional[str] = ProjectOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Write verified/ENV/<time>-<test>-<node>.json: the result bound to the lock digest and this host."""
        import os

        from pathlib import Path

        from deepep_env.base.readfile import read_tail
        from deepep_env.verify.activation import activation_for
        from deepep_env.verify.records import (OUTPUT_TAIL_BYTES, build_record, check_inputs, host_root, record_prefix,
                                               short_test, write_record)

        proj = project(project_dir)
        check_inputs(proj, env, short_test(test), exit_code)   # before the log is read
        key = signer(sign)                                      # a bad key: refused before anything is written
        output = read_tail(Path(log), OUTPUT_TAIL_BYTES, accepted="a test's output log").decode("utf-8", "replace") if log else ""
        where = root or host_root()
        chosen = platform or os.environ.get("DEEPEP_ENV_PLATFORM") or None
        act = activation_for(record_prefix(proj, env, prefix), os.environ, root=where, platform=chosen)
        rec = build_record(proj, env, test, args or (), exit_code, output, root=where, platform=chosen, activation=act)
        path = write_record(proj, rec)
        signed = None
        if key is not None:
            from deepep_env.verify.attest import sign_record

            signed = sign_record(path, key, proj.pixi_lock)
        if as_json:
            print_json({**rec, "path": str(path), "attestation": str(signed) if signed else None})
        else:
            print(f"wrote {path} ({'pass' if rec['passed'] else 'fail'}: {rec['evidence']}; {rec['ranks'] or '?'} rank(s))"
                  + (f"; signed by {key.name}: {signed}" if signed else ""))
