"""`deepep-env install ENV`: exactly the locked packages, sha256-verified, into a prefix."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from deepep_env.cli._common import JsonOpt, ProjectOpt, TrustOpt, print_json, print_warnings, project, trust
from deepep_env.base.project import DEFAULT_PREFIX


def register(app: typer.Typer) -> None:
    @app.command("install")
    def install_cmd(
        env: str = typer.Argument(..., help="env name (env_specs/<name>.toml)"),
        prefix: Optional[str] = typer.Option(None, "--prefix", help=f"target prefix (default: the project's {DEFAULT_PREFIX})"),
        lock: Optional[str] = typer.Option(None, "--lock", help="lock file (default: the project's pixi.lock)"),
        mirror: Optional[List[str]] = typer.Option(None, "--mirror", help="URL=DIR: take packages the lock names under URL from DIR"),
        force: bool = typer.Option(False, "--force", help="reinstall even when the prefix is up to date"),
        require_verified: bool = typer.Option(False, "--require-verified", help="refuse, before touching the prefix, "
                                              "an env with no passing test record for the lock's digest (signed by a "
                                              "trusted key, under --trust or the spec's [verify] trust)"),
        trust_file: Optional[str] = TrustOpt,
        from_carry: Optional[str] = typer.Option(None, "--from-carry", help="install from a `deepep-env carry` "
                                                 "archive, no network: every channel served by it"),
        project_dir: Optional[str] = ProjectOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Install ENV from its lock; a second run is a no-op."""
        # library imports stay local: main.build_app imports every command module on every run
        from rich.console import Console

        from deepep_env.cli.build import progress_printer
        from deepep_env.install.installer import install_env

        # a package no channel serves is rebuilt from its recipe: the same progress as `build` (stderr)
        progress = progress_printer(Console(stderr=True))
        proj = project(project_dir)
        if trust_file and not require_verified:
            from deepep_env.base.errors import UserError

            raise UserError("--trust is a policy for --require-verified", field="--trust",
                            accepted="--require-verified --trust FILE")
        if require_verified:
            from deepep_env.verify.matrix import require_verified as gate

            gate(proj, env, trust(trust_file), Path(lock) if lock else None)
        if from_carry is not None:
            from deepep_env.base.errors import UserError
            from deepep_env.install.carry import install_from_carry

            if lock is not None:
                raise UserError("--from-carry installs from the project's lock; --lock is not taken with it",
                                field="--lock", accepted="one of --lock, --from-carry")
            _, res = install_from_carry(env, proj, Path(from_carry), prefix=prefix,
                                        mirrors=mirror or (), force=force, progress=progress)
        else:
            res = install_env(env, proj, prefix=prefix, lock_path=lock, mirrors=mirror or (),
                              force=force, progress=progress)
        data = res.to_dict()
        print_warnings(data["warnings"])
        if as_json:
            print_json(data)
            return
        for n in res.notes:
            print(f"{res.env}: {n}")
        if res.status == "up-to-date":
            print(f"{res.env}: {res.prefix} is up to date ({len(res.packages)} packages)")
        else:
            print(f"{res.env}: installed {len(res.packages)} packages into {res.prefix} "
                  f"({res.verified} sha256-verified, {res.downloaded} downloaded, {res.seconds:.1f} s)")
