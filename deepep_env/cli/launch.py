"""`deepep-env launch ENV TEST --nodes N [--target k8s|slurm|shell] [-- TEST_ARGS…]`."""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, List, Literal, Optional

import typer

from deepep_env.base.atomic import write_output
from deepep_env.cli._common import JsonOpt, ProjectOpt, print_json, print_warnings, project
from deepep_env.base.errors import UserError

if TYPE_CHECKING:  # annotations only: no import at run time
    from deepep_env.launch.model import Rendering


def _pairs(values: Optional[List[str]], flag: str) -> tuple[tuple[str, str], ...]:
    out = []
    for v in values or []:
        key, sep, value = v.partition("=")
        if not sep or not key:
            raise UserError(f"expected KEY=VALUE, got {v!r}", field=flag)
        out.append((key, value))
    return tuple(out)


def _output_path(output: str, filename: str) -> Path:
    p = Path(output)
    if output.endswith("/") or p.is_dir():
        return p / filename
    return p


def _emit(rendering: Rendering, output: Optional[str], as_json: bool) -> None:
    """Write the rendering to --output (if given), then print it, the path written, or JSON."""
    written = None
    if output is not None:
        written = write_output(_output_path(output, rendering.filename) if output else output, rendering.text,
                               field="--output")
    if as_json:
        data = rendering.to_dict()
        data["written"] = str(written) if written else None
        print_json(data)
    elif written:
        typer.echo(f"wrote {written}")
        for note in rendering.notes:
            typer.echo(f"note: {note}", err=True)
    else:
        typer.echo(rendering.text, nl=False)


def register(app: typer.Typer) -> None:
    @app.command("launch", context_settings={"help_option_names": ["-h", "--help"]})
    def launch_cmd(
        env: str = typer.Argument(..., help="env name (env_specs/<ENV>.toml) or spec path"),
        test: str = typer.Argument(..., help="DeepEP test: internode, low-latency or intranode"),
        test_args: Optional[List[str]] = typer.Argument(None, help="after --: passed to the test verbatim"),
        nodes: int = typer.Option(..., "--nodes", "-n", help="number of nodes (WORLD_SIZE)"),
        target: str = typer.Option("shell", "--target", "-t", help="k8s, slurm or shell"),
        master_addr: Optional[str] = typer.Option(None, "--master-addr", help="node 0's address (default: k8s Service DNS name / first Slurm host / required on each node for shell)"),
        master_port: int = typer.Option(8361, "--master-port", help="rendezvous TCP port (DeepEP's default 8361)"),
        gpus_per_node: int = typer.Option(8, "--gpus-per-node", help="GPUs per node (DeepEP spawns one process per GPU)"),
        name: Optional[str] = typer.Option(None, "--name", help="job name (default deepep-<env>-<test>)"),
        platform: Optional[str] = typer.Option(None, "--platform", help="one of the spec's platforms (default: its first)"),
        export: Optional[List[str]] = typer.Option(None, "--export", help="KEY=VALUE set on every node (repeatable)"),
        image: Optional[str] = typer.Option(None, "--image", help="k8s: container image with deepep-env and the env installed"),
        namespace: Optional[str] = typer.Option(None, "--namespace", help="k8s: namespace"),
        service: Optional[str] = typer.Option(None, "--service", help="k8s: headless Service name (default: the job name)"),
        rdma_resource: str = typer.Option("auto", "--rdma-resource", help="k8s: RDMA device-plugin resource, 'none', or 'auto' (none on gke-a4, rdma/rdma_shared_device_a on other RDMA platforms)"),
        security: str = typer.Option("privileged", "--security", help="k8s: privileged or capabilities"),
        host_network: bool = typer.Option(True, "--host-network/--no-host-network", help="k8s: use the node's network (seed 001)"),
        node_selector: Optional[List[str]] = typer.Option(None, "--node-selector", help="k8s: KEY=VALUE (repeatable)"),
        gke_gvnic_network: str = typer.Option("gvnic-1", "--gke-gvnic-network", help="gke-a4: network of eth1, or 'none'"),
        gke_rdma_network_prefix: str = typer.Option("rdma-", "--gke-rdma-network-prefix", help="gke-a4: RDMA networks are PREFIX0..PREFIX<n-1>"),
        gke_rdma_nics: int = typer.Option(8, "--gke-rdma-nics", help="gke-a4: number of RDMA NICs"),
        partition: Optional[str] = typer.Option(None, "--partition", help="slurm: partition"),
        account: Optional[str] = typer.Option(None, "--account", help="slurm: account"),
        time_limit: Optional[str] = typer.Option(None, "--time", help="slurm: time limit"),
        preflight: bool = typer.Option(True, "--preflight/--no-preflight", help="before the test: doctor on every node into a shared folder, then `fleet report`; the test only if the fleet passes; a test record after it"),
        shared_dir: Optional[str] = typer.Option(None, "--shared-dir", help="preflight folder every node sees (default: shell ./deepep-preflight, slurm $SLURM_SUBMIT_DIR/deepep-preflight; one sub-folder per run)"),
        shared_pvc: Optional[str] = typer.Option(None, "--shared-pvc", help="k8s: ReadWriteMany PersistentVolumeClaim for the preflight folder (without it each pod checks itself alone)"),
        admit: bool = typer.Option(True, "--admit/--no-admit", help="with the preflight: `deepep-env admit` on every node first (a short DeepEP run against the floors of the env's records); the test only if every node is admitted"),
        preflight_timeout: int = typer.Option(600, "--preflight-timeout", help="seconds a node waits for every node's doctor report"),
        tool: Optional[str] = typer.Option(None, "--tool", hidden=True, help="how nodes call deepep-env (a stand-in for tests)"),
        output: Optional[str] = typer.Option(None, "--output", "-o", help="write to FILE, or into DIR under the default name"),
        runner: Optional[str] = typer.Option(None, "--runner", hidden=True, help="words before the program ('' = none; {env} = env name)"),
        python: str = typer.Option("python", "--python", hidden=True, help="interpreter running the test"),
        program: Optional[str] = typer.Option(None, "--program", hidden=True, help="test program path (a stand-in)"),
        strict: bool = typer.Option(False, "--strict", help="refuse (exit 2) an env this checkout cannot install "
                                    "(not locked); without it, a warning"),
        project_dir: Optional[str] = ProjectOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Render a multi-node launch of one of DeepEP's tests (Kubernetes, Slurm or per-node shell)."""
        # local: pydantic, yaml, and main.build_app imports every command module on every run
        from deepep_env.launch import K8sOptions, LaunchOptions, SlurmOptions, launch, not_installable

        if security not in ("privileged", "capabilities"):
            raise UserError(f"unknown security mode {security!r}", field="--security", accepted="privileged, capabilities")
        mode: Literal["privileged", "capabilities"] = "privileged" if security == "privileged" else "capabilities"
        options = LaunchOptions(
            test=test, nodes=nodes, target=target, master_addr=master_addr, master_port=master_port,
            gpus_per_node=gpus_per_node, name=name, platform=platform, test_args=tuple(test_args or ()),
            exports=_pairs(export, "--export"),
            runner=None if runner is None else tuple(shlex.split(runner)), python=python, program=program,
            k8s=K8sOptions(
                image=image, namespace=namespace, service=service, rdma_resource=rdma_resource, security=mode,
                host_network=host_network, node_selector=_pairs(node_selector, "--node-selector"),
                gke_gvnic_network=None if gke_gvnic_network in ("", "none") else gke_gvnic_network,
                gke_rdma_network_prefix=gke_rdma_network_prefix, gke_rdma_nics=gke_rdma_nics, shared_pvc=shared_pvc,
            ),
            preflight=preflight, shared_dir=shared_dir, preflight_timeout=preflight_timeout, admit=admit,
            tool=tuple(shlex.split(tool)) if tool else ("deepep-env",),
            slurm=SlurmOptions(partition=partition, account=account, time=time_limit),
        )
        proj = project(project_dir)
        rendering = launch(env, options, proj)
        why = not_installable(env, proj)
        if why and strict:
            raise UserError(why, field="ENV", accepted="an env this checkout has locked, or drop --strict")
        if why:
            print_warnings([why])
        _emit(rendering, output, as_json)
