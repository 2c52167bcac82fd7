"""The host a record was made on, and the per-node facts a fleet must agree on, from the host probe.

One reading (:func:`deepep_env.host.context.read_host`) → one flat dict of plain strings and numbers.
Test records keep it (``host``); doctor's JSON carries it (``context.host``), so ``fleet report``
compares nodes on the same names. Never an environment variable's value, never a credential:
only what sysfs/procfs under the root say about hardware, drivers and the platform choice.
"""
from __future__ import annotations

import os
import socket
from collections import Counter
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:  # annotations only: no import at run time
    from deepep_env.host.context import HostContext

# The CUDA version a Linux driver branch supports at most (NVIDIA's CUDA toolkit release notes, table 3).
_CUDA_FOR_DRIVER = ((580, "13.0"), (575, "12.9"), (570, "12.8"), (565, "12.7"), (560, "12.6"), (555, "12.5"),
                    (550, "12.4"), (545, "12.3"), (535, "12.2"), (530, "12.1"), (525, "12.0"), (520, "11.8"),
                    (515, "11.7"), (510, "11.6"), (495, "11.5"), (470, "11.4"), (465, "11.3"), (460, "11.2"),
                    (455, "11.1"), (450, "11.0"))


def cuda_for_driver(version: Optional[str]) -> Optional[str]:
    """The newest CUDA the driver ``version`` (``580.126.09``) runs, or None when unknown."""
    try:
        major = int(str(version).split(".", 1)[0])
    except ValueError:
        return None
    return next((cuda for branch, cuda in _CUDA_FOR_DRIVER if major >= branch), None)


def _counted(items: list[str]) -> str:
    return ", ".join(f"{n} x {v}" for v, n in sorted(Counter(items).items())) or "none"


def node_name(root: str, live: bool) -> str:
    """The node's name: ``etc/hostname`` under a host tree, the machine's name on the live host."""
    if live:
        return socket.gethostname()
    try:
        with open(os.path.join(root, "etc", "hostname"), encoding="utf-8", errors="replace") as fh:
            name = fh.read(256).strip().splitlines()
    except OSError:
        name = []
    return name[0] if name else os.path.basename(os.path.normpath(root)) or "host"


def host_fingerprint(host: HostContext) -> dict[str, Any]:
    """The host's facts and platform choice as one flat dict."""
    f = host.facts
    gpus = [g.model or g.device_id or "unknown" for g in f.gpus]
    nics = [n for n in f.nics if n.bdf]
    ofed = f.ofed
    ibverbs = sorted({lib.dir for lib in f.libraries if lib.kind == "libibverbs"})   # two dirs: two libibverbs
    rdma_core = ofed.packages.get("rdma-core") or ofed.packages.get("libibverbs1") or ofed.packages.get("ibverbs-providers")
    return {
        "node": node_name(host.root, host.live),
        "gpus": _counted(gpus),
        "gpu_count": len(gpus),
        "driver": f.driver.version,
        "cuda_driver": cuda_for_driver(f.driver.version),
        "kernel": f.kernel,
        "nics": _counted([f"{n.hca_type or '?'} fw {n.fw_ver or '?'}" for n in nics]),
        "nic_count": len(nics),
        "active_nics": len(f.usable_nics()),
        "ofed": ofed.doca_ofed or ofed.mlx5_core_version or None,
        "rdma_core": rdma_core,
        "libibverbs": ", ".join(ibverbs) or None,
        "gid_index": f.gid.index if f.gid.status == "ok" else f.gid.status,
        "gpu_hca": ",".join(f"{a.cuda_index}:{a.hca}" for a in f.affinity if a.hca) or None,
        "peermem": "nvidia_peermem" in f.modules,
        "platform": host.platform.name,
        "platform_source": host.platform.source,
    }
