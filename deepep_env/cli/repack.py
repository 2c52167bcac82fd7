"""`deepep-env repack OUT`: this machine's Python, PyTorch and CUDA toolkit as a conda channel (builder/repack_host.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from deepep_env.cli._common import JsonOpt, print_json


def register(app: typer.Typer) -> None:
    @app.command("repack")
    def repack_cmd(
        out: Path = typer.Argument(..., metavar="OUT", help="the channel folder to write (replaces an earlier repack there)"),
        cuda: Path = typer.Option(Path("/usr/local/cuda"), "--cuda", help="the CUDA toolkit to repack"),
        venv_site: Path = typer.Option(Path("/opt/torch/.venv/lib/python3.12/site-packages"), "--venv-site",
                                       help="the site-packages holding PyTorch and its pip closure"),
        rdma: Path = typer.Option(Path("/usr"), "--rdma", help="rdma-core's usr folder (include/infiniband, "
                                  "lib/x86_64-linux-gnu), e.g. Debian's debs unpacked with dpkg -x"),
        gcc_bin: Path = typer.Option(Path("/usr/bin"), "--gcc-bin", help="the folder holding gcc and g++ (wrapped, not copied)"),
        wheels: Optional[Path] = typer.Option(None, "--wheels", help="pip/setuptools wheels to use when the venv lacks them"),
        as_json: bool = JsonOpt,
    ) -> None:
        """Repack this machine's Python, PyTorch and CUDA toolkit as a conda channel (for sites with no conda channel)."""
        from deepep_env.builder.repack_host import repack_host

        r = repack_host(out, cuda=cuda, venv_site=venv_site, rdma=rdma, gcc_bin=gcc_bin, wheels=wheels,
                        log=lambda m: typer.echo(m, err=True))
        if as_json:
            print_json({"channel": str(r.out), "packages": r.packages, "megabytes": r.megabytes, "patchelf": r.patchelf})
            return
        print(f"repack: {r.packages} packages, {r.megabytes:.0f} MB in {r.out} (indexed; patchelf {r.patchelf or 'missing'})")
