"""Family ``nic-handler``: NVSHMEM's IBGDA NIC handler against the platform and the driver keys.

- Seed 000 §4 problem 2: ``NVSHMEM_IBGDA_NIC_HANDLER=cpu`` hangs internode dispatch on GCP B200
  (``moe_recv_expert_counter`` stays -1); ``gpu`` works and needs no GDRCopy (so a GDRCopy
  ``LD_PRELOAD`` left from the cpu setup is dead weight at best).
- Seed 003 / field notes failure mode 7: IBGDA needs ``EnableStreamMemOPs=1`` and
  ``PeerMappingOverride=1`` in ``/proc/driver/nvidia/params``; since NVSHMEM 3.4.5 only the GPU
  handler does (NVIDIA/nvshmem #23, #34). Only where a remote transport matters: the real
  single-node H200 has ``EnableStreamMemOPs: 0`` and that is fine there.
"""
from __future__ import annotations

from typing import Optional

from deepep_env.doctor.context import DoctorContext
from deepep_env.doctor.model import Evidence
from deepep_env.doctor.check import Emitter, check

PARAMS_FILE = "/proc/driver/nvidia/params"
IBGDA_KEYS = {"EnableStreamMemOPs": 1, "PeerMappingOverride": 1}

IDS = (
    "nic-handler.cpu-on-gcp-b200",
    "nic-handler.spec-mismatch",
    "nic-handler.driver-keys",
    "nic-handler.driver-keys-unknown",
    "nic-handler.gdrcopy-preload",
    "host.driver-param",
)


def driver_param(ctx: DoctorContext, key: str) -> Optional[int]:
    d = ctx.facts.driver
    if key == "EnableStreamMemOPs":
        return d.enable_stream_memops
    if key == "PeerMappingOverride":
        return d.peer_mapping_override
    raw = d.params.get(key, d.registry_dwords.get(key))
    if raw is None:
        return None
    try:
        return int(str(raw).strip().strip('"'), 0)
    except ValueError:
        return None


def params_evidence(ctx: DoctorContext, keys) -> Evidence:
    d = ctx.facts.driver
    parts = []
    for k in keys:
        if k in d.params:
            parts.append(f"{k}: {d.params[k]}")
        elif k in d.registry_dwords:
            parts.append(f"RegistryDwords {k}={d.registry_dwords[k]}")
        else:
            parts.append(f"{k}: absent")
    if any(k in d.registry_dwords or k == "PeerMappingOverride" for k in keys):
        parts.append(f"RegistryDwords: {d.params.get('RegistryDwords', 'absent')}")
    return Evidence(value="; ".join(dict.fromkeys(parts)), file=PARAMS_FILE)


def modprobe_fix(keys) -> str:
    opts = []
    if "EnableStreamMemOPs" in keys:
        opts.append("NVreg_EnableStreamMemOPs=1")
    dwords = [k for k in keys if k != "EnableStreamMemOPs"]
    if dwords:
        opts.append('NVreg_RegistryDwords="' + "".join(f"{k}=1;" for k in dwords) + '"')
    return (
        f"add `options nvidia {' '.join(opts)}` to /etc/modprobe.d/nvidia.conf, rebuild the initramfs "
        "(update-initramfs -u) and reboot (seed 003 §2.1)"
    )


def preload_entries(ctx: DoctorContext) -> list[str]:
    # ld.so splits LD_PRELOAD on spaces and colons.
    return ctx.env.split("LD_PRELOAD", ": \t")


def _driver_keys(ctx: DoctorContext, emit: Emitter, name: str, handler_keys: dict, spec_keys: dict, why: str) -> None:
    d = ctx.facts.driver
    if not d.loaded or not d.params:
        emit(
            "nic-handler.driver-keys-unknown",
            "warning",
            f"cannot read {PARAMS_FILE}: the driver keys "
            + (why if handler_keys else "the env spec") + " needs cannot be checked",
            [Evidence(value="absent or unreadable", file=PARAMS_FILE)] + ([ctx.env.evidence(name)] if handler_keys else []),
            f"run doctor where the NVIDIA driver is visible (not in a container without {PARAMS_FILE})",
        )
        return
    bad = [k for k, v in handler_keys.items() if driver_param(ctx, k) != v]
    if bad:
        emit(
            "nic-handler.driver-keys",
            "error",
            f"{why} needs " + " and ".join(f"{k}=1" for k in bad) + " in the NVIDIA driver: IBGDA times out or fails to init without "
            "(seed 003; NVIDIA/nvshmem #23, #34)",
            [params_evidence(ctx, bad), ctx.env.evidence(name)],
            modprobe_fix(bad),
        )
    spec_bad = [k for k, v in spec_keys.items() if k not in bad and driver_param(ctx, k) != v]
    if spec_bad:
        emit(
            "host.driver-param",
            "error",
            "the NVIDIA driver lacks " + ", ".join(f"{k}={spec_keys[k]}" for k in spec_bad) + " that the env spec requires",
            [params_evidence(ctx, spec_bad), Evidence(value=f"driver_params = {spec_keys}", file=f"env_specs/{ctx.env_name}.toml [host]")],
            modprobe_fix(spec_bad),
        )


@check("nic-handler", *IDS, current_env_too=True)
def check_nic_handler(ctx: DoctorContext, emit: Emitter) -> None:
    """NVSHMEM_IBGDA_NIC_HANDLER vs platform, driver keys, GDRCopy preload (seeds 000, 003)."""
    name = "NVSHMEM_IBGDA_NIC_HANDLER"
    handler = (ctx.env.get(name) or "").strip().lower()
    rdma = ctx.rdma_relevant()
    plat = ctx.platform.name
    ctx.info["nic_handler"] = {"value": handler or None, "rdma_relevant": rdma}

    if handler == "cpu" and rdma and "nic-handler-gpu" in ctx.profile_rules:
        emit(
            "nic-handler.cpu-on-gcp-b200",
            "error",
            f"{name}=cpu on {plat}: internode dispatch hangs with the CPU NIC handler "
            "(moe_recv_expert_counter stays -1, seed 000 §4 problem 2)",
            [ctx.env.evidence(name), Evidence(value=f"{plat} ({ctx.platform.source}): " + "; ".join(ctx.platform.evidence), file="platform")],
            f"set {name}=gpu (needs no GDRCopy) and drop libgdrapi from LD_PRELOAD" + ctx.overlay_hint(name),
        )
    else:
        want = getattr(getattr(ctx.spec, "nvshmem", None), "nic_handler", None)
        if want and handler and handler != want and rdma:
            emit(
                "nic-handler.spec-mismatch",
                "warning",
                f"{name}={handler} but the env spec builds NVSHMEM for nic_handler = {want!r}",
                [ctx.env.evidence(name), Evidence(value=f"nic_handler = {want!r}", file=f"env_specs/{ctx.env_name}.toml [nvshmem]")],
                f"unset {name} or set it to {want}",
            )

    # -- driver keys ------------------------------------------------------------------------------
    # Who needs the keys: the GPU handler (NVSHMEM >= 3.4.5, NVIDIA/nvshmem #23, #34); IBGDA itself on
    # profiles whose seed says so (driver-keys rule: H20, seed 003); and "auto" (unset) where the
    # platform needs the GPU handler — auto cannot choose it without the keys.
    handler_keys: dict[str, int] = {}
    why = ""
    if rdma:
        if handler == "gpu":
            handler_keys, why = dict(IBGDA_KEYS), f"{name}=gpu"
        elif "driver-keys" in ctx.profile_rules and handler != "cpu":
            handler_keys, why = dict(IBGDA_KEYS), f"IBGDA on {plat} (seed 003)"
        elif handler in ("", "auto", "cpu") and "nic-handler-gpu" in ctx.profile_rules:
            # cpu included: it hangs here, so its fix is gpu, which needs the keys — reporting them
            # only after the handler is fixed would cost a second round trip (seed 000 + seed 003).
            state = {"": "unset", "auto": "auto", "cpu": "cpu hangs here"}[handler]
            handler_keys, why = dict(IBGDA_KEYS), f"the GPU NIC handler {plat} needs ({name} {state})"
    host = ctx.spec_host()
    spec_keys = dict(getattr(host, "driver_params", {}) or {})
    if handler_keys or spec_keys:
        _driver_keys(ctx, emit, name, handler_keys, spec_keys, why)

    # -- GDRCopy preloaded with the GPU handler -----------------------------------------------------
    # Also where the platform needs the GPU handler but another is set or left to auto: the fix
    # there is gpu, which does not use GDRCopy (seed 000 §4 problem 2 removed it). On platforms
    # where the CPU handler is fine (H20), a GDRCopy preload for it is legitimate: quiet.
    gpu_only = rdma and "nic-handler-gpu" in ctx.profile_rules
    if handler == "gpu" or (gpu_only and handler in ("", "auto", "cpu")):
        gdr = [p for p in preload_entries(ctx) if p.rsplit("/", 1)[-1].startswith("libgdrapi")]
        if gdr:
            how = f"{name}=gpu" if handler == "gpu" else f"{name}={handler or 'unset'} on {plat}, where only the GPU handler works"
            emit(
                "nic-handler.gdrcopy-preload",
                "warning",
                f"GDRCopy ({gdr[0]}) is preloaded while {how}: the GPU handler does not use it "
                "(a leftover of the cpu-handler setup, seed 000 §4 problem 2)",
                [ctx.env.evidence("LD_PRELOAD"), ctx.env.evidence(name)],
                f"remove {gdr[0]} from LD_PRELOAD",
            )
