"""`deepep-env detect`: probe the host (or a captured tree) and name its platform, with evidence."""
from __future__ import annotations

import json
from typing import Optional

import typer

from deepep_env.cli._common import DemoHostOpt


def register(app: typer.Typer) -> None:
    @app.command("detect")
    def detect_cmd(
        root: str = typer.Option("/", "--root", help="Read the host under this directory (a captured tree); default /."),
        platform: Optional[str] = typer.Option(None, "--platform", help="Use this platform profile instead of the detected one."),
        as_json: bool = typer.Option(False, "--json", help="Print every fact as JSON (docs/overlay.md)."),
        demo_host: Optional[str] = DemoHostOpt,
        svg: Optional[str] = typer.Option(None, "--svg", help="Also draw the topology to FILE: GPUs, NICs, PCIe switches, the GPU→NIC mapping the overlay chose, its evidence."),
    ) -> None:
        """Detect GPUs, RDMA NICs, PCIe topology, driver and platform from sysfs/procfs."""
        from deepep_env.platform import detect
        from deepep_env.platform.demo import host_root

        if svg is not None:   # checked before the probes: `--svg ''` wrote nothing and said nothing
            from deepep_env.base.atomic import output_file

            output_file(svg, field="--svg")
        with host_root(root, demo_host) as host_dir:
            det = detect(host_dir, platform)
            if svg is not None:
                from deepep_env.base.atomic import write_output
                from deepep_env.host.context import overlay_context, read_host
                from deepep_env.platform.svg import render_svg

                host = read_host(host_dir, platform)
                write_output(svg, render_svg(host.facts, host.platform, overlay_context(host).overlay), field="--svg")
        if as_json:
            typer.echo(json.dumps(det.to_dict(), indent=2))
        else:
            from deepep_env.platform.report import format_detection

            typer.echo(format_detection(det), nl=False)
