"""Probes: pure functions from a root directory to :class:`~deepep_env.platform.facts.HostFacts`.

Every read goes through :class:`~deepep_env.platform.rootfs.RootFS`, so ``--root DIR`` sees DIR
exactly as Linux would see ``/`` (relative sysfs symlinks followed inside DIR, never out of it).
Nothing here runs a program or loads NVML: the sysfs path must work alone (issue 3), on a live
host as on a captured one.

A path that is missing or unreadable never raises: the fact is left empty and a line goes to
``warnings`` ("partial facts"). Only a root that is not a host tree at all (neither ``sys/`` nor
``proc/``) is a :class:`~deepep_env.base.errors.UserError`.

The probes are split by what they read: GPUs and the driver (:mod:`~deepep_env.platform.probes_gpu`),
RDMA NICs and OFED (:mod:`~deepep_env.platform.probes_rdma`), and here the system and its markers
(modules, DMI, os-release, Kubernetes, library copies, watched paths) and :func:`probe_host`, which
reads them all in one pass (:class:`~deepep_env.platform.probing.Probe`).
"""
from __future__ import annotations

import os
from typing import Mapping, Optional

from deepep_env.base.errors import UserError
from deepep_env.platform.facts import HostFacts, Kubernetes
from deepep_env.platform.libraries import LIBRARY_DIRS, library_copies
from deepep_env.platform.probes_gpu import probe_driver, probe_gpus
from deepep_env.platform.probes_rdma import probe_nics, probe_ofed
from deepep_env.platform.probing import Probe
from deepep_env.platform.rootfs import RootFS
from deepep_env.platform.topology import gid_index, gpu_nic_affinity, without_unnamed

# Host paths the overlay rules ask "does it exist?" about. Recorded in HostFacts.paths so the rules
# stay pure functions of the facts (and `detect --json` shows what they saw).
WATCHED_PATHS = (
    "/usr/local/nvidia",
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
    "/usr/local/gib",
    "/usr/local/gib/lib64",
    "/usr/local/gib/configs/tuner_config_a4.txtpb",
    "/home/kubernetes/bin/nvidia",
    "/var/run/secrets/kubernetes.io/serviceaccount",
    "/opt/amazon/efa/lib",
    "/opt/amazon/ofi-nccl/lib",
)


# -- modules, system, markers ------------------------------------------------------------------
def probe_modules(p: Probe) -> tuple[str, ...]:
    try:
        text = p.fs.read_text("proc/modules")
    except OSError as exc:
        p.warn(f"proc/modules: {exc.strerror or exc}; loaded modules unknown")
        return ()
    return tuple(sorted({line.split(None, 1)[0] for line in text.splitlines() if line.strip()}))


def probe_dmi(p: Probe) -> dict[str, str]:
    out = {}
    for key in ("sys_vendor", "product_name", "board_vendor", "board_name", "product_version"):
        v = p.fs.read_attr(f"sys/class/dmi/id/{key}")
        if v:
            out[key] = v
    if not out and p.fs.is_dir("sys"):
        p.warn("sys/class/dmi/id: absent or unreadable (a VM without DMI?); vendor unknown")
    return out


def probe_os_release(p: Probe) -> dict[str, str]:
    out: dict[str, str] = {}
    text = None
    for rel in ("etc/os-release", "usr/lib/os-release"):
        try:
            text = p.fs.read_text(rel)
            break
        except OSError:
            continue
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key in ("ID", "VERSION_ID", "PRETTY_NAME", "ID_LIKE"):
            out[key] = value.strip().strip('"')
    return out


def probe_kubernetes(p: Probe, environ: Mapping[str, str]) -> Kubernetes:
    fs = p.fs
    markers = []
    in_pod = False
    gke = False
    if fs.is_dir("var/run/secrets/kubernetes.io/serviceaccount") or fs.is_dir("run/secrets/kubernetes.io/serviceaccount"):
        markers.append("service account mounted at /var/run/secrets/kubernetes.io/serviceaccount")
        in_pod = True
    if environ.get("KUBERNETES_SERVICE_HOST"):
        markers.append("KUBERNETES_SERVICE_HOST is set")
        in_pod = True
    if fs.is_dir("home/kubernetes/bin/nvidia"):
        markers.append("GKE driver install dir /home/kubernetes/bin/nvidia (node view)")
        gke = True
    if fs.is_dir("usr/local/nvidia/lib64"):
        # GKE mounts the node's /home/kubernetes/bin/nvidia here in GPU pods (seed 002). NVIDIA's
        # container images create the directory too, so alone it is not GKE: only inside a pod.
        markers.append("/usr/local/nvidia/lib64 present (GKE's GPU driver mount in a pod)")
        gke = gke or in_pod
    return Kubernetes(in_pod=in_pod, gke=gke, markers=tuple(markers))


def probe_libraries(p: Probe) -> tuple:
    """libibverbs/libmlx5 copies and mlx5 providers in LIBRARY_DIRS (name rules: platform/libraries.py)."""
    fs = p.fs
    out = []
    for d in LIBRARY_DIRS:
        rel = d.lstrip("/")
        if fs.is_dir(rel):
            out += library_copies(d, fs.listdir(rel), lambda name: _link_target(fs, rel, name), fs.listdir(f"{rel}/libibverbs"))
    return tuple(out)


def _link_target(fs: RootFS, rel: str, name: str) -> Optional[str]:
    if not fs.is_symlink(f"{rel}/{name}"):
        return None
    try:
        return os.readlink(fs.local_path(rel) + "/" + name)  # type: ignore[operator]
    except OSError:
        return None


def probe_paths(p: Probe) -> dict[str, bool]:
    return {path: p.fs.exists(path.lstrip("/")) for path in WATCHED_PATHS}


# -- the whole host ---------------------------------------------------------------------------
def check_root(root: str | os.PathLike[str]) -> RootFS:
    """A RootFS for ``root``, or UserError (exit 2) when it is not a host tree at all."""
    path = os.fspath(root)
    if not os.path.isdir(path):
        raise UserError("not a directory", field="--root", file=path,
                        accepted="a host root such as / or a captured tree with sys/ and proc/, "
                        "or a bundled capture: --demo-host gcp-b200-demo, gke-a4-demo, h20-roce-demo or h200x8-nvlink")
    fs = RootFS(path)
    if not (fs.is_dir("sys") or fs.is_dir("proc")):
        raise UserError(
            "not a host tree: neither sys/ nor proc/ under it",
            file=path,
            field="--root",
            accepted="/ or a captured host tree with sys/ and proc/",
        )
    return fs


def probe_host(root: str | os.PathLike[str] = "/", environ: Optional[Mapping[str, str]] = None) -> HostFacts:
    """Read every fact under ``root``. ``environ`` feeds the Kubernetes markers; by default the
    process environment when ``root`` is ``/`` and nothing otherwise (a captured tree's env is
    not ours)."""
    fs = check_root(root)
    if environ is None:
        environ = os.environ if fs.live else {}
    p = Probe(fs)
    if not fs.is_dir("sys"):
        p.warn("sys/: absent; no PCI, RDMA or DMI facts")
    if not fs.is_dir("proc"):
        p.warn("proc/: absent; no driver, module or kernel facts")
    gpus = probe_gpus(p)
    nics = probe_nics(p)
    driver = probe_driver(p, bool(gpus))
    modules = probe_modules(p)
    kernel = fs.read_attr("proc/sys/kernel/osrelease")
    if kernel is None and fs.is_dir("proc"):
        p.warn("proc/sys/kernel/osrelease: unreadable; kernel release unknown")
    affinity, matrix, aff_warnings = gpu_nic_affinity(gpus, nics)
    for w in aff_warnings:
        p.find(w)
    affinity, notes = without_unnamed(gpus, affinity, nics, p.unnamed)
    for w in notes:
        p.warn(w)
    gid = gid_index(nics, affinity)
    return HostFacts(
        root=fs.root,
        gpus=gpus,
        nics=nics,
        driver=driver,
        modules=modules,
        dmi=probe_dmi(p),
        kernel=kernel,
        os_release=probe_os_release(p),
        kubernetes=probe_kubernetes(p, environ),
        libraries=probe_libraries(p),
        ofed=probe_ofed(p),
        affinity=affinity,
        gid=gid,
        topology=matrix,
        paths=probe_paths(p),
        findings=tuple(p.findings),
        warnings=tuple(p.warnings),
    )


__all__ = [
    "probe_host",
    "check_root",
    "WATCHED_PATHS",
]
