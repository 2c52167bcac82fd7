"""`deepep-env diff [OLD [NEW]] [-e ENV]`: what changed between two locks (paths or REV:path);
by default the committed pixi.lock against the working tree's, per environment."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from deepep_env.cli._common import console, print_warnings
from deepep_env.base.errors import UserError

if TYPE_CHECKING:  # annotations only: no import at run time
    from deepep_env.lock.diff import LockDiff


def register(app: typer.Typer) -> None:
    @app.command("diff")
    def diff_cmd(
        old: str = typer.Argument("HEAD:pixi.lock", help="old lock: a path or REV:path (git)"),
        new: str = typer.Argument("pixi.lock", help="new lock: a path or REV:path (git)"),
        env: Optional[list[str]] = typer.Option(None, "--env", "-e", help="only these environments (repeatable)"),
        fmt: str = typer.Option("table", "--format", "-f", help="table, markdown, json, or pixi-json (the `pixi update --json` shape)"),
        as_json: bool = typer.Option(False, "--json", help="same as --format json"),
        manifest: Optional[str] = typer.Option(None, "--manifest", help="pixi.toml whose dependencies are `explicit` "
                                               "in pixi-json (default: the one beside NEW)"),
    ) -> None:
        """Added, removed and changed packages (pinned components first) and changed build ids."""
        # library imports stay local: main.build_app imports every command module on every run
        from deepep_env.lock import diff_locks, render
        from deepep_env.lock.diff import manifest_beside, manifest_explicit, pixi_update_json
        from deepep_env.base.readfile import present

        if as_json:
            fmt = "json"
        if fmt not in ("table", "markdown", "json", "pixi-json"):
            raise UserError(f"unknown format {fmt!r}", field="--format", accepted="table, markdown, json, pixi-json")
        d = diff_locks(old, new, envs=env)
        dropped = _dropped(d, env)
        moved = _activation_line(d)
        if fmt == "pixi-json":
            mpath = Path(manifest) if manifest else manifest_beside(new)
            if manifest or present(mpath):
                explicit = manifest_explicit(mpath)
            else:
                explicit = None
                print_warnings([f"no pixi.toml at {mpath}: `explicit` left out (pixi sets it from the "
                                "manifest's dependencies; pass --manifest)"])
            sys.stdout.write(json.dumps(pixi_update_json(d, explicit), indent=2) + "\n")
        elif fmt == "json":
            data = json.loads(render.diff_json(d))
            if dropped is not None:
                data["verified_dropped"] = dropped
            sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        elif fmt == "markdown":
            sys.stdout.write(render.diff_markdown(d))
            if moved:
                sys.stdout.write("\n" + moved + "\n")
            if dropped:
                sys.stdout.write("\n" + _dropped_line(dropped) + "\n")
        else:
            render.diff_table(d, console())
            if moved:
                print(moved)
            if dropped:
                print(_dropped_line(dropped))


def _dropped(d: LockDiff, envs: Optional[list[str]]) -> Optional[list[dict]]:
    """The passing test records (verified/) this change invalidates, or None outside a project."""
    from deepep_env.base.project import find_project
    from deepep_env.verify.matrix import dropped_records

    try:
        proj = find_project()
    except UserError:
        return None
    return [{"path": str(r.path.relative_to(proj.root)), "env": r.data["env"], "test": r.data["test"],
             "platform": r.data["host"].get("platform"), "node": r.data["host"].get("node"),
             "digest": r.data.get("digest")}
            for r in dropped_records(proj, d.digests_old, d.digests_new, envs)]


def _activation_line(d: LockDiff) -> str:
    """Where the change moves an env's activation (the code its tests run under), or nothing."""
    moved = d.activation_moved()
    if not moved:
        return ""
    envs = ", ".join(sorted({m["env"] for m in moved}))
    m = moved[0]
    return (f"this change moves the activation of {envs} (deepep-env {m['old']} -> {m['new']}): "
            "the overlay those environments' tests run under is computed by other code, so their records go stale")


def _dropped_line(dropped: list[dict]) -> str:
    """The records a lock change drops; what came from the records printed as data (controls escaped)."""
    from deepep_env.base.safetext import terminal

    n = len(dropped)
    lines = [f"this change drops {n} verified record{'s' if n != 1 else ''}:"]
    lines += [terminal(f"  - {r['path']} ({r['test']} on {r['platform']}, {r['node']})") for r in dropped]
    return "\n".join(lines)
