"""Platform profiles: which overlay rules apply where. Data only — a new platform is a new entry.

- ``rules``: names from deepep_env/overlay/rules.py (RULES); each fires or stays quiet from host facts.
- ``env``: static variables (names are checked against deepep_env/overlay/known_vars.py).
- ``status``: "supported" (a seed or a real run stands behind it) or "stub" (a starting point).
- ``sources``: where each profile"s knowledge comes from.
- ``gpu_models``: the GPUs it is for, names of deepep_env/platform/gpus.py ``GPUS``; empty = any NVIDIA
  GPU. They decide: ``select_platform`` (profiles.py) matches a host only when one of its GPUs is one of these.
- ``match``: how the profile is detected, all conditions at once (profiles.py ``MATCH_KEYS``):
  ``precedence`` (the highest matching profile wins; ties go to the earlier entry), ``gpus``
  (``"any"``, the default, or ``"none"``: no NVIDIA GPU), ``fabric`` (``"none"``: no RDMA NIC with an
  ACTIVE port; ``"rdma"``: some; ``"efa"``: AWS EFA devices; ``"infiniband"``: every active port is
  InfiniBand), ``cloud`` (``"gce"``: Google DMI; ``"gke"``: a GKE pod/node), ``why`` (the evidence line
  that says it was chosen). A profile without ``match`` is chosen only with ``--platform``.

A Python literal rather than TOML: `deepep-env activate` reads it on every new shell, and tomllib
plus its datetime import cost several ms there (the activation benchmark, docs/benchmarks.md).
"""
from __future__ import annotations

PROFILES: dict = {
    "gcp-b200": {
        "description": "GCP A4 VMs (a4-highgpu-8g, bare): 8x B200, 8x mlx5 RoCE 400 Gb/s behind 4 PCIe switches",
        "status": "supported",
        "sources": ["seed 000 unified-env.sh", "field notes §1"],
        "gpu_models": ["B200"],
        "match": {"precedence": 50, "fabric": "rdma", "cloud": "gce", "why": "B200 on a Google Compute Engine VM → gcp-b200"},
        "rules": [
            "ibgda-transport",
            "nic-handler-gpu",
            "hca-prefix",
            "cuda-vmm-off",
            "nic-pe-mapping",
            "device-hca-mapping",
            "gid-index",
            "nvshmem-preload",
            "nccl-preload",
            "no-gin-transport",
            "deepep-jit-cache",
        ],
        "env": {
            "NVSHMEM_IBGDA_NUM_DCI": "4",  # seed 000 "performance settings"
        },
    },
    "gke-a4": {
        "description": "GKE A4 node pool (a4-highgpu-8g): 8x B200, RDMA VPCs, driver and libraries under /usr/local/nvidia, Google's gIB NCCL plugin",
        "status": "supported",
        "sources": ["seed 001 GKE install guide", "seed 002 GKE troubleshooting", "seed 000 (same VM shape)"],
        "gpu_models": ["B200"],
        "match": {"precedence": 60, "fabric": "rdma", "cloud": "gke", "why": "B200 in a GKE pod/node (driver under /usr/local/nvidia) → gke-a4"},
        # gib-nccl first: each prepend goes in front, so LD_LIBRARY_PATH ends up in seed 002"s order
        # /usr/local/nvidia/lib64:/usr/local/nvidia/lib:/usr/local/gib/lib64; rdmav-drivers reads that order.
        "rules": [
            "gib-nccl",
            "gke-library-paths",
            "rdmav-drivers",
            "unset-comm-nonblocking",
            "ibgda-transport",
            "nic-handler-gpu",
            "hca-prefix",
            "cuda-vmm-off",
            "nic-pe-mapping",
            "device-hca-mapping",
            "gid-index",
            "nvshmem-preload",
            "nccl-preload",
            "no-gin-transport",
            "deepep-jit-cache",
        ],
    },
    "h20-roce": {
        "description": "H20 clusters over RoCE: IBGDA needs the driver keys EnableStreamMemOPs=1 and PeerMappingOverride=1",
        "status": "supported",
        "sources": ["seed 003 H20 NVSHMEM guide", "field notes §1 failure mode 7"],
        "gpu_models": ["H20"],
        "match": {"precedence": 40, "fabric": "rdma", "why": "H20 GPUs with RDMA NICs → h20-roce"},
        "rules": [
            "driver-keys",
            "ibgda-transport",
            "hca-prefix",
            "nic-pe-mapping",
            "device-hca-mapping",
            "gid-index",
            "nvshmem-preload",
            "nccl-preload",
            "no-gin-transport",
            "deepep-jit-cache",
        ],
    },
    "nvlink": {
        "description": "One node, NVLink only, no RDMA NIC: no remote transport",
        "status": "supported",
        "sources": ["field notes §3 (8x H200 measured)", "hosts/h200x8-nvlink"],
        "gpu_models": [],
        "match": {"precedence": 100, "fabric": "none"},
        "rules": [
            "no-remote-transport",
            "nvshmem-preload",
            "nccl-preload",
            "no-gin-transport",
            "deepep-jit-cache",
        ],
    },
    "h100-ib": {
        "description": "H100/H200/H800 clusters over InfiniBand (stub): IBGDA, topology mapping; no GID index on IB",
        "status": "stub",
        "sources": ["field notes §2"],
        "gpu_models": ["H100", "H200", "H800"],
        "match": {"precedence": 30, "fabric": "infiniband", "why": "Hopper GPUs with InfiniBand NICs → h100-ib"},
        "rules": [
            "driver-keys",
            "ibgda-transport",
            "hca-prefix",
            "nic-pe-mapping",
            "device-hca-mapping",
            "gid-index",
            "nvshmem-preload",
            "nccl-preload",
            "no-gin-transport",
            "deepep-jit-cache",
        ],
    },
    "b300": {
        "description": "B300 nodes (stub): like gcp-b200 without the GCP-only CUDA VMM setting",
        "status": "stub",
        "sources": ["field notes §1 (mlx5_4..11 naming elsewhere)"],
        "gpu_models": ["B300"],
        "match": {"precedence": 70, "fabric": "rdma", "why": "B300 GPUs → b300"},
        "rules": [
            "ibgda-transport",
            "nic-handler-gpu",
            "hca-prefix",
            "nic-pe-mapping",
            "device-hca-mapping",
            "gid-index",
            "nvshmem-preload",
            "nccl-preload",
            "no-gin-transport",
            "deepep-jit-cache",
        ],
    },
    "gb200": {
        "description": "GB200 NVL72 (stub): multi-node NVLink; RDMA rules as for B300",
        "status": "stub",
        "sources": [],
        "gpu_models": ["GB200"],
        "match": {"precedence": 80, "fabric": "rdma", "why": "GB200 GPUs → gb200"},
        "rules": [
            "ibgda-transport",
            "hca-prefix",
            "nic-pe-mapping",
            "device-hca-mapping",
            "gid-index",
            "nvshmem-preload",
            "nccl-preload",
            "no-gin-transport",
            "deepep-jit-cache",
        ],
    },
    "aws-efa": {
        "description": "AWS p5/p5en/p6 (EFA): DeepEP V2 over NCCL Gin through aws-ofi-nccl (GIN type 5); no IBGDA, no mlx5",
        "status": "stub",
        "sources": ["shared/research/2026-11-landscape.md §1.2, §3.7 (awslabs/awsome-distributed-ai PR #1234, "
                    "amazon-contributing/DeepEP)", "tests/fixtures/hosts aws-p5en (public facts)"],
        # Any GPU behind EFA (p5: H100, p5e/p5en: H200, p6: B200/B300): the EFA devices decide, as they always did.
        "gpu_models": [],
        "match": {"precedence": 90, "fabric": "efa", "why": "EFA RDMA devices → aws-efa"},
        "rules": [
            "efa-gin",
            "nvshmem-preload",
            "nccl-preload",
            "no-gin-transport",
            "deepep-jit-cache",
        ],
    },
    "rdma-generic": {
        "description": "GPUs with RDMA NICs on no known platform: only the rules every RDMA host needs",
        "status": "supported",
        "sources": ["issue 3"],
        "gpu_models": [],
        "match": {"precedence": 0, "fabric": "rdma", "why": "no known platform matches → rdma-generic (only the rules every RDMA host needs)"},
        "rules": [
            "ibgda-transport",
            "hca-prefix",
            "nic-pe-mapping",
            "device-hca-mapping",
            "gid-index",
            "nvshmem-preload",
            "nccl-preload",
            "no-gin-transport",
            "deepep-jit-cache",
        ],
    },
    "none": {
        "description": "No NVIDIA GPU found: nothing to configure",
        "status": "supported",
        "sources": [],
        "gpu_models": [],
        "match": {"precedence": 100, "gpus": "none"},
        "rules": [
        ],
    },
}
