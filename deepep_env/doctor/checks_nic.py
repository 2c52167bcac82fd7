"""Family ``nic-handler``: NVSHMEM's IBGDA NIC handler against the platform and the driver keys,
one check per finding id (the handler's value and the keys it needs are read by shared helpers).

- Seed 000 §4 problem 2: ``NVSHMEM_IBGDA_NIC_HANDLER=cpu`` hangs internode dispatch on GCP B200
  (``moe_recv_expert_counter`` stays -1); ``gpu`` works and needs no GDRCopy (so a GDRCopy
  ``LD_PRELOAD`` left from the cpu setup is dead weight at best).
- Seed 003 / field notes failure mode 7: IBGDA needs ``EnableStreamMemOPs=1`` and
  ``PeerMappingOverride=1`` in ``/proc/driver/nvidia/params``; since NVSHMEM 3.4.5 only the GPU
  handler does (NVIDIA/nvshmem #23, #34). Only where a remote transport matters: the real
  single-node H200 has ``EnableStreamMemOPs: 0`` and that is fine there.
"""
from __future__ import annotations

from typing import Optional, Sequence

from deepep_env.doctor.context import DoctorContext
from deepep_env.doctor.model import Evidence
from deepep_env.doctor.check import Emitter, check

PARAMS_FILE = "/proc/driver/nvidia/params"
IBGDA_KEYS = {"EnableStreamMemOPs": 1, "PeerMappingOverride": 1}

HANDLER = "NVSHMEM_IBGDA_NIC_HANDLER"


def driver_param(ctx: DoctorContext, key: str) -> Optional[int]:
    d = ctx.host.facts.driver
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


def params_evidence(ctx: DoctorContext, keys: Sequence[str]) -> Evidence:
    d = ctx.host.facts.driver
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


def modprobe_fix(keys: Sequence[str]) -> str:
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


def handler_state(ctx: DoctorContext) -> tuple[str, bool]:
    """(NVSHMEM_IBGDA_NIC_HANDLER lower-cased, "" when unset; whether a remote transport matters),
    recorded once per context in the report's context."""

    def read() -> tuple[str, bool]:
        handler = (ctx.env.get(HANDLER) or "").strip().lower()
        rdma = ctx.rdma_relevant()
        ctx.info["nic_handler"] = {"value": handler or None, "rdma_relevant": rdma}
        return handler, rdma

    return ctx.cached("nic-handler.state", read)


def cpu_hangs(ctx: DoctorContext) -> bool:
    """The CPU handler on a platform whose profile needs the GPU one (seed 000 §4 problem 2)."""
    handler, rdma = handler_state(ctx)
    return handler == "cpu" and rdma and "nic-handler-gpu" in ctx.profile_rules


def keys_needed(ctx: DoctorContext) -> tuple[dict[str, int], str, dict[str, int]]:
    """(driver keys the handler needs, who needs them, driver params the env spec requires)."""
    # Who needs the keys: the GPU handler (NVSHMEM >= 3.4.5, NVIDIA/nvshmem #23, #34); IBGDA itself on
    # profiles whose seed says so (driver-keys rule: H20, seed 003); and "auto" (unset) where the
    # platform needs the GPU handler — auto cannot choose it without the keys.
    handler, rdma = handler_state(ctx)
    plat = ctx.host.platform.name
    handler_keys: dict[str, int] = {}
    why = ""
    if rdma:
        if handler == "gpu":
            handler_keys, why = dict(IBGDA_KEYS), f"{HANDLER}=gpu"
        elif "driver-keys" in ctx.profile_rules and handler != "cpu":
            handler_keys, why = dict(IBGDA_KEYS), f"IBGDA on {plat} (seed 003)"
        elif handler in ("", "auto", "cpu") and "nic-handler-gpu" in ctx.profile_rules:
            # cpu included: it hangs here, so its fix is gpu, which needs the keys — reporting them
            # only after the handler is fixed would cost a second round trip (seed 000 + seed 003).
            state = {"": "unset", "auto": "auto", "cpu": "cpu hangs here"}[handler]
            handler_keys, why = dict(IBGDA_KEYS), f"the GPU NIC handler {plat} needs ({HANDLER} {state})"
    spec_keys = dict(getattr(ctx.spec_host(), "driver_params", {}) or {})
    return handler_keys, why, spec_keys


def params_readable(ctx: DoctorContext) -> bool:
    d = ctx.host.facts.driver
    return bool(d.loaded and d.params)


def missing_handler_keys(ctx: DoctorContext) -> list[str]:
    """The keys the handler needs that the (readable) driver lacks."""
    handler_keys, _, _ = keys_needed(ctx)
    return [k for k, v in handler_keys.items() if driver_param(ctx, k) != v]


@check("nic-handler", "nic-handler.cpu-on-gcp-b200", current_env_too=True)
def cpu_handler_on_gpu_platform(ctx: DoctorContext, emit: Emitter) -> None:
    """No NVSHMEM_IBGDA_NIC_HANDLER=cpu where it hangs internode dispatch (GCP B200, seed 000 §4 problem 2)."""
    if not cpu_hangs(ctx):
        return
    plat = ctx.host.platform.name
    emit(
        "nic-handler.cpu-on-gcp-b200",
        "error",
        f"{HANDLER}=cpu on {plat}: internode dispatch hangs with the CPU NIC handler "
        "(moe_recv_expert_counter stays -1, seed 000 §4 problem 2)",
        [ctx.env.evidence(HANDLER), Evidence(value=f"{plat} ({ctx.host.platform.source}): " + "; ".join(ctx.host.platform.evidence), file="platform")],
        f"set {HANDLER}=gpu (needs no GDRCopy) and drop libgdrapi from LD_PRELOAD" + ctx.overlay_hint(HANDLER),
    )


@check("nic-handler", "nic-handler.spec-mismatch", current_env_too=True)
def handler_matches_spec(ctx: DoctorContext, emit: Emitter) -> None:
    """NVSHMEM_IBGDA_NIC_HANDLER, where set, is the handler the env spec builds NVSHMEM for."""
    handler, rdma = handler_state(ctx)
    want = getattr(getattr(ctx.spec, "nvshmem", None), "nic_handler", None)
    if cpu_hangs(ctx) or not (want and handler and handler != want and rdma):
        return
    emit(
        "nic-handler.spec-mismatch",
        "warning",
        f"{HANDLER}={handler} but the env spec builds NVSHMEM for nic_handler = {want!r}",
        [ctx.env.evidence(HANDLER), Evidence(value=f"nic_handler = {want!r}", file=f"env_specs/{ctx.env_name}.toml [nvshmem]")],
        f"unset {HANDLER} or set it to {want}",
    )


@check("nic-handler", "nic-handler.driver-keys", current_env_too=True)
def ibgda_driver_keys(ctx: DoctorContext, emit: Emitter) -> None:
    """EnableStreamMemOPs=1 and PeerMappingOverride=1 where the handler needs them (seed 003; NVIDIA/nvshmem #23, #34)."""
    _, why, _ = keys_needed(ctx)
    bad = missing_handler_keys(ctx) if params_readable(ctx) else []
    if bad:
        emit(
            "nic-handler.driver-keys",
            "error",
            f"{why} needs " + " and ".join(f"{k}=1" for k in bad) + " in the NVIDIA driver: IBGDA times out or fails to init without "
            "(seed 003; NVIDIA/nvshmem #23, #34)",
            [params_evidence(ctx, bad), ctx.env.evidence(HANDLER)],
            modprobe_fix(bad),
        )


@check("nic-handler", "nic-handler.driver-keys-unknown", current_env_too=True)
def driver_params_readable(ctx: DoctorContext, emit: Emitter) -> None:
    """Where the handler or the env spec needs driver keys, /proc/driver/nvidia/params is readable."""
    handler_keys, why, spec_keys = keys_needed(ctx)
    if not (handler_keys or spec_keys) or params_readable(ctx):
        return
    emit(
        "nic-handler.driver-keys-unknown",
        "warning",
        f"cannot read {PARAMS_FILE}: the driver keys "
        + (why if handler_keys else "the env spec") + " needs cannot be checked",
        [Evidence(value="absent or unreadable", file=PARAMS_FILE)] + ([ctx.env.evidence(HANDLER)] if handler_keys else []),
        f"run doctor where the NVIDIA driver is visible (not in a container without {PARAMS_FILE})",
    )


@check("nic-handler", "host.driver-param", current_env_too=True)
def spec_driver_params(ctx: DoctorContext, emit: Emitter) -> None:
    """The driver has the env spec's ``[host].driver_params`` (those nic-handler.driver-keys does not already report)."""
    _, _, spec_keys = keys_needed(ctx)
    if not spec_keys or not params_readable(ctx):
        return
    bad = missing_handler_keys(ctx)
    spec_bad = [k for k, v in spec_keys.items() if k not in bad and driver_param(ctx, k) != v]
    if spec_bad:
        emit(
            "host.driver-param",
            "error",
            "the NVIDIA driver lacks " + ", ".join(f"{k}={spec_keys[k]}" for k in spec_bad) + " that the env spec requires",
            [params_evidence(ctx, spec_bad), Evidence(value=f"driver_params = {spec_keys}", file=f"env_specs/{ctx.env_name}.toml [host]")],
            modprobe_fix(spec_bad),
        )


@check("nic-handler", "nic-handler.gdrcopy-preload", current_env_too=True)
def gdrcopy_not_preloaded(ctx: DoctorContext, emit: Emitter) -> None:
    """No GDRCopy in LD_PRELOAD with the GPU handler, which does not use it (seed 000 §4 problem 2)."""
    # Also where the platform needs the GPU handler but another is set or left to auto: the fix
    # there is gpu, which does not use GDRCopy (seed 000 §4 problem 2 removed it). On platforms
    # where the CPU handler is fine (H20), a GDRCopy preload for it is legitimate: quiet.
    handler, rdma = handler_state(ctx)
    gpu_only = rdma and "nic-handler-gpu" in ctx.profile_rules
    if not (handler == "gpu" or (gpu_only and handler in ("", "auto", "cpu"))):
        return
    gdr = [p for p in preload_entries(ctx) if p.rsplit("/", 1)[-1].startswith("libgdrapi")]
    if gdr:
        how = f"{HANDLER}=gpu" if handler == "gpu" else f"{HANDLER}={handler or 'unset'} on {ctx.host.platform.name}, where only the GPU handler works"
        emit(
            "nic-handler.gdrcopy-preload",
            "warning",
            f"GDRCopy ({gdr[0]}) is preloaded while {how}: the GPU handler does not use it "
            "(a leftover of the cpu-handler setup, seed 000 §4 problem 2)",
            [ctx.env.evidence("LD_PRELOAD"), ctx.env.evidence(HANDLER)],
            f"remove {gdr[0]} from LD_PRELOAD",
        )
