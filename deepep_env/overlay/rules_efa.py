"""Overlay rule for AWS EFA hosts (p5/p5en/p6): DeepEP V2 over NCCL Gin through aws-ofi-nccl.

Sources (shared/research/2026-11-landscape.md §1.2, §3.7): the amazon-contributing/DeepEP fork runs
EPv2 over EFA with NCCL Gin's type 5 (aws-ofi-nccl's ``Libfabric_GDAKI`` backend); without
``NCCL_GIN_TYPE=5`` NCCL picks the CPU-proxy Gin. awslabs/awsome-distributed-ai PR #1234 needs EFA
driver >= 3.3.0 (``efadv_create_comp_cntr``) and ``gdrdrv`` (doctor's ``efa.*`` checks). Libfabric's
EFA provider (``FI_PROVIDER=efa``, ``FI_EFA_USE_DEVICE_RDMA=1`` for GPUDirect) and NVSHMEM's libfabric
transport (no IBGDA, no mlx5 on EFA). Stdlib only: activation imports this.
"""
from __future__ import annotations

from deepep_env.overlay.rulebase import RuleContext, rule
from deepep_env.platform.profiles import efa_nics

EFA_LIB = "/opt/amazon/efa/lib"
OFI_NCCL_LIB = "/opt/amazon/ofi-nccl/lib"
EFA_ENV = (
    ("NCCL_GIN_TYPE", "5", "NCCL Gin over EFA is aws-ofi-nccl's Libfabric_GDAKI backend (type 5); unset, NCCL picks the CPU-proxy Gin"),
    ("FI_PROVIDER", "efa", "libfabric's EFA provider"),
    ("FI_EFA_USE_DEVICE_RDMA", "1", "GPUDirect RDMA over EFA"),
    ("NVSHMEM_REMOTE_TRANSPORT", "libfabric", "NVSHMEM reaches EFA through libfabric (no IBGDA on EFA)"),
    ("NVSHMEM_LIBFABRIC_PROVIDER", "efa", "NVSHMEM's libfabric transport on the EFA provider"),
)


@rule("efa-gin")
def efa_gin(ctx: RuleContext) -> None:
    r = "efa-gin"
    nics = efa_nics(ctx.facts)
    if not nics:
        ctx.note(r, "no EFA device under /sys/class/infiniband", "not an EFA host: NCCL Gin left on its defaults")
        return
    fact = f"{len(nics)} EFA device(s) ({nics[0].hca}, …)"
    libs = [d for d in (OFI_NCCL_LIB, EFA_LIB) if ctx.facts.paths.get(d)]
    if libs:
        ctx.prepend("LD_LIBRARY_PATH", libs, r, f"{', '.join(libs)} present (EFA installer, aws-ofi-nccl)")
    else:
        ctx.note(r, f"{OFI_NCCL_LIB} absent", "aws-ofi-nccl not found: NCCL has no EFA net/Gin plugin (doctor: efa.ofi-plugin-missing)",
                 "warning")
    if ctx.facts.paths.get(OFI_NCCL_LIB):
        ctx.set("NCCL_NET_PLUGIN", "ofi", r, f"aws-ofi-nccl at {OFI_NCCL_LIB} (libnccl-net-ofi.so)")
    for name, value, why in EFA_ENV:
        ctx.set(name, value, r, f"{fact}: {why}")
