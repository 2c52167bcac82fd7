"""`deepep-env carry`: environments packed into one deterministic archive for a machine without network;
`--check FILE` verifies one, `--unpack FILE` puts it where `install` reads it (install --from-carry)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from deepep_env.cli._common import JsonOpt, ProjectOpt, print_json, project


def register(app: typer.Typer) -> None:
    @app.command("carry")
    def carry_cmd(
        envs: Optional[List[str]] = typer.Argument(None, help="env names (their lock sections are carried)"),
        to: Optional[Path] = typer.Option(None, "--to", help="the archive to write (e.g. envs.carry.tgz)"),
        check: Optional[Path] = typer.Option(None, "--check", help="verify FILE against its manifest"),
        unpack: Optional[Path] = typer.Option(None, "--unpack", help="check FILE, then put its packages under the "
                                              "state folder and its sources into the source cache"),
        wheels: Optional[Path] = typer.Option(None, "--wheels", help="take the pinned wheels from DIR (default: "
                                              "pip download into the state folder)"),
        no_wheels: bool = typer.Option(False, "--no-wheels", help="carry no python wheels but deepep-env's own"),
        host_debs: bool = typer.Option(False, "--host-debs", help="carry rdma-core's headers (the .debs data/carry-host.txt "
                                       "pins; apt-get download into the state folder)"),
        debs: Optional[Path] = typer.Option(None, "--debs", help="--host-debs, the .debs taken from DIR"),
        sources: bool = typer.Option(False, "--sources", help="carry deepep-env's own builds as their pinned sources, "
                                     "not as packages (smaller; the offline machine rebuilds each and checks it "
                                     "against the lock)"),
        made_here: Optional[List[str]] = typer.Option(None, "--made-here", help="CHANNEL (URL or name): its packages "
                                                      "are not carried; the offline machine makes them (`deepep-env "
                                                      "repack`) and serves them with DEEPEP_ENV_MIRRORS"),
        source_here: Optional[List[str]] = typer.Option(None, "--source-here", help="SOURCE (name or sha256: digest): "
                                                        "not carried; the offline machine fetches it into its source "
                                                        "cache (`deepep-env fetch ENV --from DIR`)"),
        prefer_built: Optional[List[str]] = typer.Option(None, "--prefer-built", help="PACKAGE: with --sources, carried "
                                                         "as built wherever this machine has the lock's bytes"),
        project_dir: Optional[str] = ProjectOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Pack ENV... for an offline machine (--to FILE), or check (--check) or unpack (--unpack) a carry."""
        from deepep_env.base.errors import UserError
        from deepep_env.install.carry import check_carry, make_carry, unpack_carry

        modes = [m for m, v in (("--to", to), ("--check", check), ("--unpack", unpack)) if v is not None]
        if len(modes) != 1:
            raise UserError(f"give exactly one of --to, --check, --unpack (got {', '.join(modes) or 'none'})",
                            field="carry", accepted="carry ENV... --to FILE | carry --check FILE | carry --unpack FILE")
        if check is not None:
            c = check_carry(check)
            n = len(c.doc.get("members") or {})
            print_json({"carry": str(check), "ok": True, "members": n, "envs": c.doc.get("envs")}) if as_json \
                else typer.echo(f"{check}: ok ({n} members; {', '.join(sorted(c.doc.get('envs') or {}))})")
            return
        if unpack is not None:
            up = unpack_carry(unpack, project(project_dir))
            print_json({"packages_dir": str(up.root), "packages": up.packages, "sources": up.sources,
                        "envs": up.envs, "rdma_core": str(up.rdma_core) if up.rdma_core else None}) if as_json \
                else typer.echo(f"{unpack}: {up.packages} packages in {up.root}, {up.sources} sources in the cache"
                                + (f"; rdma-core's headers: export DEEPEP_ENV_RDMA_CORE={up.rdma_core}" if up.rdma_core
                                   else ""))
            return
        assert to is not None
        if not envs:
            raise UserError("name at least one environment to carry", field="ENV", accepted="env names of the lock")
        cp, sha = make_carry(envs, project(project_dir), to, wheels=not no_wheels, wheels_dir=wheels,
                             debs=host_debs, debs_dir=debs, sources=sources, made_here=made_here or (),
                             source_here=source_here or (), prefer_built=prefer_built or ())
        if as_json:
            print_json({"carry": str(to), "sha256": sha, "envs": cp.envs, "packages": len(cp.packages),
                        "rebuild": cp.rebuild, "wheels": cp.wheels, "made_here": cp.made_here, "sources_here": cp.sources_here})
            return
        typer.echo(f"{to}: {sha}")
        typer.echo(f"  {len(set(cp.packages))} packages ({', '.join(sorted({Path(n).name for n in cp.packages})) or 'none'}), "
                   f"{len(cp.wheels)} wheels"
                   + (f"; carried as sources to rebuild: {', '.join(cp.rebuild)}" if cp.rebuild else ""))
        for url, n in sorted(cp.made_here.items()):
            typer.echo(f"  {n} packages of {url} left to the offline machine (serve them there with DEEPEP_ENV_MIRRORS)")
        for digest, label in sorted(cp.sources_here.items()):
            typer.echo(f"  {label} ({digest[:23]}…) left to the offline machine (`deepep-env fetch ENV --from DIR` there)")
