"""`deepep-env pixi sync [--check]`: pixi.toml generated from env_specs/; `deepep-env pixi verdict`:
would pixi accept pixi.lock for pixi.toml without re-solving?"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from deepep_env.cli._common import JsonOpt, ProjectOpt, print_json, print_warnings, project
from deepep_env.base.errors import StaleError


def register(app: typer.Typer) -> None:
    pixi_app = typer.Typer(help="pixi.toml kept in step with env_specs/.", no_args_is_help=True)

    @pixi_app.command("sync")
    def sync_cmd(
        check: bool = typer.Option(False, "--check", help="write nothing; exit 1 when pixi.toml differs"),
        project_dir: Optional[str] = ProjectOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Write pixi.toml from the specs (one environment per spec, tasks for DeepEP's tests)."""
        # library imports stay local: main.build_app imports every command module on every run
        from deepep_env.lock.pixi import raise_if_stale, sync

        res = sync(project(project_dir), check=check)
        print_warnings(res.warnings)
        if as_json:
            print_json(res.to_dict())
            raise_if_stale(res)
            return
        if res.status == "stale":
            sys.stdout.write("\n".join(res.diff[:60]) + "\n")
            raise_if_stale(res)
        print(f"{res.path}: {res.status} ({len(res.environments)} environments: {', '.join(res.environments)})")

    @pixi_app.command("verdict")
    def verdict_cmd(
        manifest: Optional[str] = typer.Option(None, "--manifest", help="pixi.toml (default: the project's)"),
        lock: Optional[str] = typer.Option(None, "--lock", help="pixi.lock (default: beside the manifest)"),
        project_dir: Optional[str] = ProjectOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """pixi's satisfiability check of pixi.lock against pixi.toml, per environment (exit 1 when pixi
        would re-solve: `pixi install --locked` would refuse)."""
        # library imports stay local: main.build_app imports every command module on every run
        from deepep_env.lock.satisfy import verdict
        from deepep_env.lock.pixi_model import load_manifest
        from deepep_env.base.readfile import present

        mpath = Path(manifest) if manifest else project(project_dir).pixi_toml
        lpath = Path(lock) if lock else mpath.parent / "pixi.lock"
        pixi_manifest = load_manifest(mpath)  # first: a missing manifest is named, not its lock
        if not present(lpath):
            raise StaleError("no pixi.lock: pixi would solve every environment", file=lpath,
                             accepted="run `deepep-env lock ENV`")
        res = verdict(pixi_manifest.raw, lpath, mpath.parent.resolve())
        if as_json:
            print_json({"manifest": str(mpath), "lock": str(lpath), "environments": [v.to_dict() for v in res]})
        else:
            for v in res:
                print(f"{v.env}: {'satisfiable' if v.satisfiable else 'would re-solve'}")
                for r in v.reasons:
                    print(f"  {r}")
        bad = [v.env for v in res if not v.satisfiable]
        if bad:
            raise StaleError(f"pixi would re-solve {', '.join(bad)}", file=lpath,
                             accepted="run `deepep-env lock ENV` for each, then `deepep-env pixi sync`")

    app.add_typer(pixi_app, name="pixi")
