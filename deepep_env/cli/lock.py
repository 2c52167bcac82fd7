"""`deepep-env lock ENV [--check]`: solve the spec into the project's pixi.lock, or say why it is stale."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from deepep_env.cli._common import JsonOpt, ProjectOpt, print_json, print_warnings, project
from deepep_env.base.errors import StaleError

if TYPE_CHECKING:  # annotations only: no import at run time
    from deepep_env.base.project import Project


def register(app: typer.Typer) -> None:
    @app.command("lock")
    def lock_cmd(
        env: str = typer.Argument(..., help="env name (env_specs/<name>.toml)"),
        channel: Optional[str] = typer.Option(None, "--channel", help="the local channel folder (default <state>/channel)"),
        check: bool = typer.Option(False, "--check", help="do not solve: exit 1 when the lock no longer satisfies the spec"),
        output: Optional[str] = typer.Option(None, "--output", "-o", help="lock path (default: the project's pixi.lock)"),
        only: Optional[str] = typer.Option(None, "--only", help="re-lock one package in place, every other record kept: "
                                           "deepep-env (this checkout's build of the tool; ENV 'all' = every environment)"),
        from_: Optional[str] = typer.Option(None, "--from", help="take ENV's lock from this pixi.lock (or folder) "
                                            "written elsewhere, e.g. on its GPU machine; checked against this checkout"),
        prune: bool = typer.Option(False, "--prune", help="with ENV 'all': leave out of pixi.lock every environment "
                                   "whose spec is gone (a renamed or removed env_specs/ENV.toml), as pixi does"),
        project_dir: Optional[str] = ProjectOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Solve ENV's packages with rattler and write a pixi.lock (v7); --check explains staleness."""
        proj = project(project_dir)
        if output is not None and not check and from_ is None:   # a lock to write: checked before the solve
            from deepep_env.base.atomic import output_file

            output_file(output, field="--output")
        if prune:
            _prune(proj, env, given=[k for k, v in {"--check": check, "--only": only, "--from": from_,
                                                    "--output": output, "--channel": channel}.items() if v])
            return
        if from_ is not None:
            _from(proj, env, from_, others={"--channel": channel, "--check": check or None, "--output": output,
                                            "--only": only})
            return
        # library imports stay local: main.build_app imports every command module on every run
        from deepep_env.lock import check_lock, lock_env
        from deepep_env.lock.render import check_text

        if only is not None:
            _only(proj, env, only, check=check, output=output)
            return
        if check and env == "all":
            _check_all(proj, channel=channel, output=output, as_json=as_json)
            return
        if check:
            checked = check_lock(env, proj, channel=channel, lock_path=output)
            data = checked.to_dict()
            if as_json:
                print_json(data)
            else:
                print(check_text(data))
            if not checked.fresh:
                raise StaleError(f"lock is stale ({len(checked.reasons)} reason(s): "
                                 f"{', '.join(sorted({r.kind for r in checked.reasons}))})", file=checked.path,
                                 accepted=f"run `deepep-env lock {env}`")
            return
        res = lock_env(env, proj, channel=channel, output=output)
        data = res.to_dict()
        print_warnings(data["warnings"])
        if as_json:
            print_json(data)
            return
        n = sum(len(v) for v in res.packages.values())
        state = "written" if res.changed else "unchanged"
        print(f"{res.env}: {res.path} {state} ({n} packages, {', '.join(res.platforms)})")
        for sub, pkgs in res.packages.items():
            for p in pkgs:
                print(f"  {sub}  {p['name']} {p['version']} {p['build']}")


def _check_all(proj: Project, *, channel: Optional[str], output: Optional[str], as_json: bool) -> None:
    """``lock all --check``: the check of every environment the lock holds (pixi.toml's environments); a spec
    that is not locked yet is named as such and is no failure (pixi checks its manifest's environments,
    and pixi.toml has only locked specs); a lock environment whose spec is gone is stale (``--prune``).
    Exit 1 when any is stale or cannot be checked here."""
    from deepep_env.base.errors import UserError
    from deepep_env.base.project import pixi_env_name
    from deepep_env.formats.lockfile import env_sections
    from deepep_env.lock import check_lock
    from deepep_env.lock.prune import orphans
    from deepep_env.lock.render import check_text
    from deepep_env.lock.workspace import workspace

    path = Path(output) if output else proj.pixi_lock
    locked = set(env_sections(path)) if path.is_file() else set()
    ws = workspace(proj, None)
    docs: list[dict[str, Any]] = []
    for e in proj.spec_names():
        if pixi_env_name(e) not in locked:
            docs.append({"env": e, "fresh": True, "locked": False})
            continue
        try:
            docs.append(check_lock(e, proj, channel=channel, lock_path=output, ws=ws).to_dict())
        except UserError as err:
            docs.append({"env": e, "fresh": False, "error": str(err)})
    docs += [{"env": e, "fresh": False, "error": f"no spec makes it (`deepep-env lock all --prune` drops it)"}
             for e in orphans(proj)]
    if as_json:
        print_json(docs)
    else:
        print("\n".join(f"{d['env']}: not locked (a spec only: not part of the check)" if d.get("locked") is False
                        else f"{d['env']}: cannot check: {d['error']}" if "error" in d else check_text(d) for d in docs))
    stale = [d["env"] for d in docs if not d["fresh"]]
    if stale:
        checked = [d for d in docs if d.get("locked") is not False]
        raise StaleError(f"{len(stale)} of {len(checked)} locked environment(s) stale or not checkable: {', '.join(stale)}",
                         accepted="run `deepep-env lock ENV` for each (or the step its line names)")


def _from(proj: Project, env: str, source: str, *, others: dict[str, object]) -> None:
    """``--from PATH``: ENV's records, metadata and build-inputs record taken from a lock made elsewhere."""
    from pathlib import Path

    from deepep_env.base.errors import UserError
    from deepep_env.lock.adopt import adopt_env
    from deepep_env.lock.request import workspace_platforms

    given = [k for k, v in others.items() if v]
    if given:
        raise UserError(f"--from takes ENV as it was locked elsewhere; it does not combine with {given[0]}",
                        field="--from", accepted=f"`deepep-env lock {env} --from PATH` alone")
    if env == "all":
        raise UserError("--from takes one environment", field="ENV", accepted="an environment name")
    res = adopt_env(proj, env, Path(source), platforms=workspace_platforms(proj))
    print(f"{res.env}: taken from {res.source} ({'written' if res.changed else 'unchanged'}; lock {env} --check: fresh)")
    for note in res.notes:
        print(f"  note: {note}")


def _prune(proj: Project, env: str, given: list[str]) -> None:
    """``lock all --prune``: the environments whose spec is gone, left out of the lock."""
    from deepep_env.base.errors import UserError
    from deepep_env.lock.prune import prune

    if env != "all" or given:
        raise UserError("--prune works on the whole lock and alone", field="--prune", accepted="deepep-env lock all --prune")
    gone = prune(proj)
    print(f"pruned from {proj.pixi_lock.name}: {', '.join(gone)} (no spec makes them)" if gone
          else f"{proj.pixi_lock.name}: every environment has its spec")


def _only(proj: Project, env: str, only: str, *, check: bool, output: Optional[str]) -> None:
    """``--only deepep-env``: the tool package this checkout builds, swapped into the lock (or, with
    --check, exit 1 when the lock names another build of it)."""
    from pathlib import Path

    from deepep_env.base.errors import UserError
    from deepep_env.lock.tool import TOOL, relock_tool, this_checkout_tool, tool_status

    if only != TOOL:
        raise UserError(f"--only {only}: only {TOOL} can be re-locked in place (the other packages are built on "
                        "their GPU image: build and lock the environment)", field="--only", accepted=TOOL)
    path = Path(output) if output else proj.pixi_lock
    envs = None if env == "all" else [env]
    if check:
        node = this_checkout_tool(proj)
        locked = tool_status(proj, path)
        stale = sorted(e for e, b in locked.items() if (envs is None or e in envs) and node and b != node.build_string)
        if stale:
            raise StaleError(f"{', '.join(stale)} lock(s) {TOOL} {locked[stale[0]]}, this checkout builds "
                             f"{node.build_string if node else '?'}: a fresh clone could not rebuild the locked one",
                             file=path, accepted=f"run `deepep-env lock all --only {TOOL}` and commit pixi.lock")
        print(f"{TOOL}: every environment locks this checkout's build")
        return
    res = relock_tool(proj, envs, lock=path)
    for e in res.changed:
        print(f"{e}: {TOOL} re-locked at {res.build}")
    for e in res.current:
        print(f"{e}: {TOOL} {res.build} already locked")
