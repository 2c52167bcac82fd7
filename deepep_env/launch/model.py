"""What a multi-node launch is, as data: the DeepEP test, the nodes, the rendezvous, the per-node command.

A :class:`LaunchPlan` is built once (:func:`deepep_env.launch.plan.plan_launch`) and every target
(Kubernetes, Slurm, shell) renders the same plan, so the three agree on the one thing that matters:
DeepEP's own meaning of the launcher variables (field notes §3, DeepEP ``tests/utils.py::init_dist``):

- ``MASTER_ADDR``/``MASTER_PORT`` (default 8361): node 0's rendezvous address;
- ``WORLD_SIZE`` = the number of **nodes**, ``RANK`` = the **node** index;
- each test spawns one process per GPU itself (``torch.multiprocessing.spawn``) and derives the
  global rank as ``RANK * num_local_ranks + local_rank``.

These are *not* torchrun's meanings (there ``WORLD_SIZE`` counts processes): a launcher that starts
one process per GPU or counts GPUs in ``WORLD_SIZE`` breaks every DeepEP test.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Optional

from deepep_env.formats.stamps import LAUNCH_PLAN

if TYPE_CHECKING:  # annotations only: no import at run time
    from deepep_env.envspec.resolved import ResolvedSpec

Target = Literal["k8s", "slurm", "shell"]
TARGETS: tuple[str, ...] = ("k8s", "slurm", "shell")

DEFAULT_MASTER_PORT = 8361  # DeepEP tests/utils.py: int(os.getenv('MASTER_PORT', '8361'))
DEFAULT_GPUS_PER_NODE = 8
# Where our deep-ep package installs DeepEP's tests; `deepep-env run` sets CONDA_PREFIX to the env.
DEFAULT_TESTS_DIR = "${CONDA_PREFIX:?not set: run this through deepep-env run}/share/deep-ep/tests"
DEFAULT_RUNNER = ("deepep-env", "run", "{env}", "--")


@dataclass(frozen=True)
class DeepEPTest:
    """One of DeepEP's tests and how many nodes it can run on (from its own asserts)."""

    name: str
    script: str
    min_nodes: int
    max_nodes: Optional[int]
    why: str


TESTS: dict[str, DeepEPTest] = {
    t.name: t
    for t in (
        # test_internode.py asserts `num_local_ranks == 8 and num_ranks > 8`: two nodes at least.
        DeepEPTest("internode", "test_internode.py", 2, None,
                   "test_internode.py asserts num_ranks > 8 (at least 2 nodes of 8 GPUs)"),
        DeepEPTest("low-latency", "test_low_latency.py", 1, None, "any number of nodes"),
        # Intranode kernels use NVLink peers only; the whole world must be one node.
        DeepEPTest("intranode", "test_intranode.py", 1, 1,
                   "test_intranode.py runs NVLink kernels within one node"),
    )
}


@dataclass(frozen=True)
class EnvInfo:
    """The part of a resolved spec a launch needs (kept small so renderers stay pure)."""

    name: str
    version: str
    platforms: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_resolved(cls, spec: ResolvedSpec) -> "EnvInfo":
        return cls(name=spec.name, version=spec.version, platforms=tuple(spec.platforms),
                   env=tuple(sorted(spec.env.items())))


@dataclass(frozen=True)
class K8sOptions:
    image: Optional[str] = None
    namespace: Optional[str] = None
    service: Optional[str] = None
    # "auto": none on gke-a4 (its RDMA NICs arrive through multi-network, not a device plugin),
    # `rdma/rdma_shared_device_a` (NVIDIA network operator's shared-device plugin) elsewhere with RDMA.
    rdma_resource: str = "auto"
    security: Literal["privileged", "capabilities"] = "privileged"
    host_network: bool = True
    node_selector: tuple[tuple[str, str], ...] = ()
    # GKE multi-network (platform gke-a4): eth0 -> default, eth1 -> gvnic, eth2.. -> rdma networks.
    gke_default_network: str = "default"
    gke_gvnic_network: Optional[str] = "gvnic-1"
    gke_rdma_network_prefix: str = "rdma-"
    gke_rdma_nics: int = 8
    shared_pvc: Optional[str] = None   # a ReadWriteMany claim every pod mounts: the preflight's shared folder


@dataclass(frozen=True)
class SlurmOptions:
    partition: Optional[str] = None
    account: Optional[str] = None
    time: Optional[str] = None


@dataclass(frozen=True)
class LaunchOptions:
    """Everything the user chose; :func:`plan_launch` checks it and fills defaults."""

    test: str
    nodes: int
    target: str = "shell"
    master_addr: Optional[str] = None
    master_port: int = DEFAULT_MASTER_PORT
    gpus_per_node: int = DEFAULT_GPUS_PER_NODE
    name: Optional[str] = None
    platform: Optional[str] = None
    test_args: tuple[str, ...] = ()
    exports: tuple[tuple[str, str], ...] = ()
    # Substitutable for tests and for hosts without `deepep-env run`: the words put before the
    # program (None = DEFAULT_RUNNER, () = none), the interpreter, and the program path itself.
    runner: Optional[tuple[str, ...]] = None
    python: str = "python"
    program: Optional[str] = None
    k8s: K8sOptions = field(default_factory=K8sOptions)
    slurm: SlurmOptions = field(default_factory=SlurmOptions)
    # The preflight (launch/preflight.py): doctor on every node into a shared folder, the fleet
    # report, the test only if the fleet passes, then its test record. The CLI turns it on.
    preflight: bool = False
    shared_dir: Optional[str] = None
    preflight_timeout: int = 600
    admit: bool = True      # with the preflight: `deepep-env admit` on every node first (docs/admit.md)
    tool: tuple[str, ...] = ("deepep-env",)   # how nodes call deepep-env (substitutable for tests)


@dataclass(frozen=True)
class LaunchPlan:
    """A checked launch: the same for every target; renderers only change how it is expressed."""

    env: EnvInfo
    test: DeepEPTest
    target: str
    nodes: int
    name: str                          # job name: DNS-1123 label, deterministic
    platform: Optional[str]
    master_addr: Optional[str]         # None: each target supplies its own (DNS, scontrol, required)
    master_port: int
    gpus_per_node: int
    exports: tuple[tuple[str, str], ...]  # spec env + --export, in order; never the host overlay
    argv: tuple[str, ...]              # the per-node command, identical on every node
    program: str                       # shell expression of the test program (for notes)
    options: LaunchOptions
    node_argv: tuple[str, ...] = ()    # argv wrapped in the preflight (launch/preflight.py), when on

    @property
    def world_size(self) -> int:
        return self.nodes

    @property
    def command(self) -> tuple[str, ...]:
        """What each node runs: the preflight around the test, or the test alone."""
        return self.node_argv or self.argv


@dataclass(frozen=True)
class Rendering:
    """A rendered launch: one file's text plus the structured data behind it."""

    plan: LaunchPlan
    filename: str
    text: str
    notes: tuple[str, ...] = ()
    manifests: tuple[dict, ...] = ()   # k8s only
    nodes: tuple[dict, ...] = ()       # per node: rank, variables, command

    def to_dict(self) -> dict:
        p = self.plan
        out = {
            "format": LAUNCH_PLAN.version,   # a bare version (formats/stamps.py, convention 3)
            "target": p.target,
            "env": p.env.name,
            "env_version": p.env.version,
            "platform": p.platform,
            "test": p.test.name,
            "script": p.test.script,
            "nodes": p.nodes,
            "world_size": p.world_size,
            "gpus_per_node": p.gpus_per_node,
            "master_port": p.master_port,
            "name": p.name,
            "argv": list(p.argv),
            "preflight": bool(p.node_argv),
            "command": list(p.command),
            "exports": dict(p.exports),
            "per_node": [dict(n) for n in self.nodes],
            "filename": self.filename,
            "notes": list(self.notes),
            "text": self.text,
        }
        if self.manifests:
            out["manifests"] = [dict(m) for m in self.manifests]
        return out
