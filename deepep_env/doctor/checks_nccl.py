"""Family ``nccl``: Google's gIB NCCL plugin and the settings that break it.

Seed 002 §3: with the gIB plugin (``NCCL_NET=gIB``, /usr/local/gib) NCCL warns
``NET/(shim) mismatch recommended: TORCH_NCCL_USE_COMM_NONBLOCKING=0 (expected unset)`` — the shim
requires the variable *unset*, whatever its value.
"""
from __future__ import annotations

from deepep_env.doctor.context import DoctorContext
from deepep_env.doctor.model import Evidence
from deepep_env.doctor.check import Emitter, check

IDS = ("nccl.gib-nonblocking", "nccl.gib-plugin-missing")
GIB_DIR = "/usr/local/gib"


def gib_configured(ctx: DoctorContext) -> list[Evidence]:
    """Evidence that the gIB plugin is configured for the process (empty when it is not)."""
    out = []
    net = ctx.env.get("NCCL_NET")
    if net and net.strip().lower() == "gib":
        out.append(ctx.env.evidence("NCCL_NET"))
    plugin = ctx.env.get("NCCL_NET_PLUGIN") or ""
    if "gib" in plugin.lower():
        out.append(ctx.env.evidence("NCCL_NET_PLUGIN"))
    gib_dirs = [d for d in ctx.env.split("LD_LIBRARY_PATH", ":;") if "/gib" in d.lower()]
    if gib_dirs:
        out.append(ctx.env.evidence("LD_LIBRARY_PATH"))
    if not out and "gib-nccl" in ctx.profile_rules and ctx.facts.paths.get(GIB_DIR):
        # A gIB host: the environment deepep-env gives every process configures the plugin.
        out.append(Evidence(value=f"installed; the {ctx.platform.name} overlay configures it (NCCL_NET=gIB)", file=GIB_DIR))
    return out


@check("nccl", *IDS, current_env_too=True)
def check_nccl(ctx: DoctorContext, emit: Emitter) -> None:
    """TORCH_NCCL_USE_COMM_NONBLOCKING must be unset with the gIB plugin; the plugin must be findable (seed 002)."""
    gib = gib_configured(ctx)
    if not gib:
        return
    name = "TORCH_NCCL_USE_COMM_NONBLOCKING"
    if ctx.env.get(name) is not None:
        emit(
            "nccl.gib-nonblocking",
            "error",
            f"{name}={ctx.env.get(name)!r} with the gIB NCCL plugin: its shim expects the variable unset "
            "(NET/(shim) mismatch, seed 002 §3)",
            [ctx.env.evidence(name), *gib],
            f"unset {name} (container images set it; `deepep-env run` on gke-a4 unsets it)",
        )
    net = (ctx.env.get("NCCL_NET") or "").strip().lower()
    if net == "gib" and ctx.paths.captures_software:
        plugin = ctx.env.get("NCCL_NET_PLUGIN")
        dirs = [d for d, _ in ctx.lib_search_dirs()]
        if plugin and "/" in plugin:
            found = ctx.paths.exists(plugin)
        else:
            names = [f"libnccl-net-{plugin}.so", f"libnccl-net_{plugin}.so", plugin] if plugin else ["libnccl-net.so", "libnccl-net-gib.so"]
            found = any(ctx.paths.exists(f"{d}/{n}") for d in dirs for n in names if n)
        if not found:
            emit(
                "nccl.gib-plugin-missing",
                "error",
                "NCCL_NET=gIB but no gIB plugin (libnccl-net*.so) is on the library path: NCCL fails with "
                "'Failed to initialize any NET plugin' (seed 002)",
                [ctx.env.evidence("NCCL_NET"), ctx.env.evidence("LD_LIBRARY_PATH")],
                f"add {GIB_DIR}/lib64 to LD_LIBRARY_PATH (the gke-a4 overlay does when it exists) or unset NCCL_NET",
            )
