"""Target ``k8s``: an Indexed Job (completion index = node rank) plus a headless Service, the way
seed 001 runs its 2-pod internode test on GKE by hand.

- ``completionMode: Indexed``, ``completions = parallelism = N``: one pod per index, all at once.
  ``RANK = $(JOB_COMPLETION_INDEX)``, which a ``fieldRef`` reads from the pod's
  ``batch.kubernetes.io/job-completion-index`` annotation; ``WORLD_SIZE = N``.
- The Job controller names each pod's hostname ``<job>-<index>``; with ``subdomain: <service>`` and a
  headless Service selecting the pods, rank 0 resolves as ``<job>-0.<service>`` from every pod: that
  is ``MASTER_ADDR`` (seed 001: ``MASTER_ADDR=deepep-job-0.deepep-service``).
  ``publishNotReadyAddresses`` publishes the record as soon as the pod has an IP.
- ``hostNetwork: true`` (seed 001) so the pod sees the node's RDMA NICs and GIDs as the host does;
  ``dnsPolicy: ClusterFirstWithHostNet`` keeps cluster DNS (the Service name) resolvable with it.
- Privileged by default: IBGDA has the GPU ring the NIC's doorbells through ``/dev/infiniband``
  verbs objects, GDRCopy needs ``/dev/gdrdrv``, and RDMA memory registration pins memory; a
  non-privileged container cannot open device nodes its device cgroup does not allow, whatever is
  mounted. ``--security capabilities`` instead adds IPC_LOCK (pin/register memory), SYS_RESOURCE
  (raise RLIMIT_MEMLOCK) and SYS_PTRACE (CUDA IPC handles via pidfd_getfd between the test's
  per-GPU processes), and relies on an RDMA device plugin to inject ``/dev/infiniband``.
- One pod per node: required podAntiAffinity on ``kubernetes.io/hostname`` (each pod takes all GPUs).
- ``env:`` holds only the launcher variables and the spec's own ``env``: the container runs
  ``deepep-env run``, which computes this node's overlay on the node (topology differs per node).
"""
from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

import yaml

from deepep_env.base.errors import UserError
from deepep_env.launch import checks
from deepep_env.launch.preflight import K8S_JOB_UID_FIELD, K8S_RUN_ID_VAR, K8S_SHARED_MOUNT
from deepep_env.launch.model import K8sOptions, LaunchPlan, Rendering
from deepep_env.launch.plan import header_lines

COMPLETION_INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
LAUNCH_LABEL = "deepep-env.io/launch"
CONTAINER = "deepep"

# NVIDIA network operator's k8s-rdma-shared-dev-plugin resource, the usual name on RoCE/IB
# clusters; GKE A4 needs none (its RDMA NICs come through multi-network, seed 001).
DEFAULT_RDMA_RESOURCE = "rdma/rdma_shared_device_a"
RDMA_PLATFORMS = ("gcp-b200", "gke-a4", "h20-roce")

# GKE A4 node pool (seed 001): drivers, CUDA and our libraries copied by a DaemonSet to
# /home/kubernetes/bin/nvidia, mounted as /usr/local/nvidia; Google's NCCL gIB plugin in
# /home/kubernetes/bin/gib, mounted as /usr/local/gib (seed 002: NCCL_TUNER_CONFIG_PATH there).
GKE_HOST_MOUNTS = (
    ("nvidia-install-dir-host", "/home/kubernetes/bin/nvidia", "/usr/local/nvidia"),
    ("gib", "/home/kubernetes/bin/gib", "/usr/local/gib"),
)
GKE_ACCELERATOR = {"gke-a4": "nvidia-b200"}
CAPABILITIES = ("IPC_LOCK", "SYS_RESOURCE", "SYS_PTRACE")
K8S_NAME_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def k8s_escape(word: str) -> str:
    """Kubernetes expands ``$(VAR)`` in ``command``/``args`` and turns ``$$`` into ``$``; double
    every ``$`` that starts either, so each word reaches the process exactly as written."""
    return re.sub(r"\$(?=[($])", "$$", word)


def service_name(plan: LaunchPlan) -> str:
    name = plan.options.k8s.service or plan.name
    if len(name) > 63 or not K8S_NAME_RE.match(name):
        raise UserError(f"not a Service name: {name!r}", field="--service",
                        accepted="a DNS-1035 label: lower-case letters, digits, '-', starting with a letter")
    return name


def master_addr(plan: LaunchPlan) -> str:
    return plan.master_addr or f"{plan.name}-0.{service_name(plan)}"


def rdma_resource(plan: LaunchPlan) -> str | None:
    r = plan.options.k8s.rdma_resource
    if r == "auto":
        if plan.platform == "gke-a4" or plan.platform not in RDMA_PLATFORMS:
            return None
        return DEFAULT_RDMA_RESOURCE
    if r in ("", "none"):
        return None
    return r


def gke_interfaces(o: K8sOptions) -> list[dict[str, str]]:
    ifaces = [{"interfaceName": "eth0", "network": o.gke_default_network}]
    nxt = 1
    if o.gke_gvnic_network:
        ifaces.append({"interfaceName": "eth1", "network": o.gke_gvnic_network})
        nxt = 2
    for i in range(o.gke_rdma_nics):
        ifaces.append({"interfaceName": f"eth{nxt + i}", "network": f"{o.gke_rdma_network_prefix}{i}"})
    return ifaces


def _labels(plan: LaunchPlan) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "deepep-env",
        "app.kubernetes.io/component": "launch",
        LAUNCH_LABEL: plan.name,
        "deepep-env.io/env": plan.env.name,
        "deepep-env.io/test": plan.test.name,
    }


def container_env(plan: LaunchPlan) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": "MASTER_ADDR", "value": master_addr(plan)},
        {"name": "MASTER_PORT", "value": str(plan.master_port)},
        {"name": "WORLD_SIZE", "value": str(plan.world_size)},
        # The completion index, read from the pod's annotation (the value Kubernetes also injects as
        # JOB_COMPLETION_INDEX on its own since 1.22; named here so the manifest says where RANK
        # comes from), then RANK = that index through Kubernetes' own $(VAR) expansion.
        {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_FIELD}}},
        {"name": "RANK", "value": "$(JOB_COMPLETION_INDEX)"},
    ]
    if plan.node_argv and plan.options.k8s.shared_pvc:   # the preflight's per-run folder: the Job's uid
        env.append({"name": K8S_RUN_ID_VAR, "valueFrom": {"fieldRef": {"fieldPath": K8S_JOB_UID_FIELD}}})
    # Literal values: no $(VAR) expansion surprises (k8s expands env values too).
    env += [{"name": k, "value": k8s_escape(v)} for k, v in plan.exports]
    return env


def _service(p: LaunchPlan, meta: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    """The headless Service that gives every pod a stable DNS name (rank 0's is MASTER_ADDR)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {**meta, "name": service_name(p), "labels": labels},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {LAUNCH_LABEL: p.name},
            "ports": [{"name": "rendezvous", "port": p.master_port, "targetPort": p.master_port, "protocol": "TCP"}],
        },
    }


@dataclass
class _PodParts:
    """What the platform adds to the pod: mounts and volumes, pod annotations, node selector."""

    mounts: list[dict[str, Any]]
    volumes: list[dict[str, Any]]
    annotations: dict[str, str]
    node_selector: dict[str, str]


def _pod_parts(p: LaunchPlan) -> _PodParts:
    o = p.options.k8s
    parts = _PodParts(mounts=[{"name": "dshm", "mountPath": "/dev/shm"}],
                      volumes=[{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
                      annotations={"deepep-env.io/env-version": p.env.version},
                      node_selector=dict(o.node_selector))
    if p.node_argv and o.shared_pvc:
        parts.mounts.append({"name": "deepep-env-shared", "mountPath": K8S_SHARED_MOUNT})
        parts.volumes.append({"name": "deepep-env-shared", "persistentVolumeClaim": {"claimName": o.shared_pvc}})
    if p.platform == "gke-a4":
        # The interfaces GKE attaches when the pod is on its own network (--no-host-network); kept
        # with hostNetwork too, so the one manifest names the node pool's networks either way.
        for vol, host, path in GKE_HOST_MOUNTS:
            parts.mounts.append({"name": vol, "mountPath": path})
            parts.volumes.append({"name": vol, "hostPath": {"path": host, "type": "Directory"}})
        parts.annotations["networking.gke.io/default-interface"] = "eth0"
        parts.annotations["networking.gke.io/interfaces"] = (
            "[\n" + ",\n".join("  " + json.dumps(i, separators=(",", ":")) for i in gke_interfaces(o)) + "\n]\n"
        )
        parts.node_selector.setdefault("cloud.google.com/gke-accelerator", GKE_ACCELERATOR["gke-a4"])
    return parts


def _container(p: LaunchPlan, mounts: list[dict[str, Any]]) -> dict[str, Any]:
    o = p.options.k8s
    limits: dict[str, Any] = {"nvidia.com/gpu": p.gpus_per_node}
    rdma = rdma_resource(p)
    if rdma:
        limits[rdma] = 1
    security: dict[str, Any]
    if o.security == "privileged":
        security = {"privileged": True}
    else:
        security = {"capabilities": {"add": list(CAPABILITIES)}}
    return {
        "name": CONTAINER,
        "image": o.image or default_image(p),
        "imagePullPolicy": "IfNotPresent",
        "command": [k8s_escape(w) for w in p.command],
        "env": container_env(p),
        "resources": {"limits": limits},
        "securityContext": security,
        "volumeMounts": mounts,
    }


def _pod_spec(p: LaunchPlan, parts: _PodParts) -> dict[str, Any]:
    o = p.options.k8s
    pod_spec: dict[str, Any] = {
        "subdomain": service_name(p),
        "hostNetwork": o.host_network,
        "dnsPolicy": "ClusterFirstWithHostNet" if o.host_network else "ClusterFirst",
        "restartPolicy": "Never",
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {LAUNCH_LABEL: p.name}}, "topologyKey": "kubernetes.io/hostname"},
        ]}},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [_container(p, parts.mounts)],
        "volumes": parts.volumes,
    }
    if parts.node_selector:
        pod_spec["nodeSelector"] = dict(sorted(parts.node_selector.items()))
    return pod_spec


def render_manifests(plan: LaunchPlan) -> list[dict[str, Any]]:
    """The headless Service and the Indexed Job (one pod per node, completion index = rank)."""
    p, n = plan, plan.nodes
    meta: dict[str, Any] = {"name": p.name}
    if p.options.k8s.namespace:
        meta["namespace"] = p.options.k8s.namespace
    labels = _labels(p)
    parts = _pod_parts(p)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {**meta, "labels": labels},
        "spec": {
            "completionMode": "Indexed",
            "completions": n,
            "parallelism": n,
            # A rerun of one index would join peers that have already failed or finished: retry the
            # whole Job instead (delete and apply again).
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": labels, "annotations": parts.annotations},
                "spec": _pod_spec(p, parts),
            },
        },
    }
    return [_service(p, meta, labels), job]


def default_image(plan: LaunchPlan) -> str:
    return f"deepep-env:{plan.env.name}-{plan.env.version}"


class _Dumper(yaml.SafeDumper):
    """Block style for multi-line strings (the GKE interfaces list), plain otherwise; no anchors
    (the Job and its pod template share a labels dict, and `&id001` helps no reader)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str)


def to_yaml(manifests: list[dict[str, Any]]) -> str:
    return yaml.dump_all(manifests, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=4096,
                         explicit_start=True)


def check_options(o: K8sOptions) -> None:
    if o.namespace is not None and (len(o.namespace) > 63 or not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", o.namespace)):
        raise UserError(f"not a namespace name: {o.namespace!r}", field="--namespace",
                        accepted="a DNS-1123 label: lower-case letters, digits and '-'")
    if o.image is not None and (not o.image or any(c.isspace() or not c.isprintable() for c in o.image)):
        raise UserError(f"not an image reference: {o.image!r}", field="--image", accepted="e.g. us-docker.pkg.dev/p/r/deepep:1")
    if not 0 <= o.gke_rdma_nics <= 16:
        raise UserError(f"not a NIC count: {o.gke_rdma_nics}", field="--gke-rdma-nics", accepted="0..16 (8 on a4-highgpu-8g)")
    if o.security not in ("privileged", "capabilities"):
        raise UserError(f"unknown security mode {o.security!r}", field="--security", accepted="privileged, capabilities")
    r = o.rdma_resource
    if r not in ("auto", "none", "") and not re.match(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", r):
        raise UserError(f"not a resource name: {r!r}", field="--rdma-resource",
                        accepted="e.g. rdma/rdma_shared_device_a, nvidia.com/hostdev, none, auto")
    for k, v in o.node_selector:
        if not re.match(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", k):
            raise UserError(f"not a label key: {k!r}", field="--node-selector", accepted="KEY=VALUE, e.g. cloud.google.com/gke-nodepool=a4")
        checks.check("--node-selector", v, what=f"label value of {k}")
    checks.check("--shared-pvc", o.shared_pvc, what="claim name")
    checks.check("--gke-gvnic-network", o.gke_gvnic_network, what="network name")
    checks.check("--gke-rdma-network-prefix", o.gke_rdma_network_prefix, what="network name prefix")


def render_k8s(plan: LaunchPlan) -> Rendering:
    p, o = plan, plan.options.k8s
    check_options(o)
    manifests = render_manifests(p)
    addr = master_addr(p)
    ns = f" -n {o.namespace}" if o.namespace else ""
    notes: list[str] = []
    if not o.image:
        notes.append(f"--image not given: using {default_image(p)!r}, an image with deepep-env and env "
                     f"{p.env.name!r} installed; pass --image to name yours")
    rdma = rdma_resource(p)
    if o.security == "capabilities" and not rdma:
        notes.append("--security capabilities without an RDMA resource: nothing gives the pod /dev/infiniband")
    if p.node_argv and not p.options.k8s.shared_pvc:
        notes.append("preflight without --shared-pvc: each pod checks itself alone (its doctor must pass); give a "
                     "ReadWriteMany claim to compare the nodes with `fleet report` before the test")
    how = "\n".join([
        "",
        f"Apply with: kubectl apply{ns} -f {p.name}.yaml   (delete and apply again to rerun)",
        f"Logs: kubectl logs{ns} -l {LAUNCH_LABEL}={p.name} --prefix",
        f"Indexed Job {p.name}: the pod of completion index i is node rank i (RANK), WORLD_SIZE={p.nodes}.",
        f"MASTER_ADDR = {addr}: rank 0's pod, published by the headless Service {service_name(p)}.",
        f"GPUs per pod: {p.gpus_per_node}; RDMA resource: {rdma or 'none'}; security: {o.security}; "
        f"hostNetwork: {str(o.host_network).lower()}.",
        *[f"NOTE: {x}" for x in notes],
    ])
    header = "".join(("# " + line if line else "#") + "\n" for line in header_lines(p, how))
    text = header + to_yaml(manifests)
    nodes = tuple(
        {"rank": r, "pod_hostname": f"{p.name}-{r}",
         "variables": {"MASTER_ADDR": addr, "MASTER_PORT": str(p.master_port), "WORLD_SIZE": str(p.nodes),
                       "RANK": str(r), **dict(p.exports)},
         "command": shlex.join(p.command)}
        for r in range(p.nodes)
    )
    return Rendering(plan=p, filename=f"{p.name}.yaml", text=text, notes=tuple(notes),
                     manifests=tuple(manifests), nodes=nodes)
