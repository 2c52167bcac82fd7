"""Family ``nccl``: Google's gIB NCCL plugin and the settings that break it.

Seed 002 §3: with the gIB plugin (``NCCL_NET=gIB``, /usr/local/gib) NCCL warns
``NET/(shim) mismatch recommended: TORCH_NCCL_USE_COMM_NONBLOCKING=0 (expected unset)`` — the shim
requires the variable *unset*, whatever its value. One check per finding id.
"""
from __future__ import annotations

from deepep_env.doctor.context import DoctorContext
from deepep_env.doctor.model import Evidence
from deepep_env.doctor.check import Emitter, check

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
    if not out and "gib-nccl" in ctx.profile_rules and ctx.host.facts.paths.get(GIB_DIR):
        # A gIB host: the environment deepep-env gives every process configures the plugin.
        out.append(Evidence(value=f"installed; the {ctx.host.platform.name} overlay configures it (NCCL_NET=gIB)", file=GIB_DIR))
    return out


def gib(ctx: DoctorContext) -> list[Evidence]:
    """:func:`gib_configured`, read once per context."""
    return ctx.cached("nccl.gib", lambda: gib_configured(ctx))


@check("nccl", "nccl.gib-nonblocking", current_env_too=True)
def gib_nonblocking_unset(ctx: DoctorContext, emit: Emitter) -> None:
    """TORCH_NCCL_USE_COMM_NONBLOCKING is unset with the gIB plugin: its shim expects it unset (seed 002 §3)."""
    evidence = gib(ctx)
    name = "TORCH_NCCL_USE_COMM_NONBLOCKING"
    if evidence and ctx.env.get(name) is not None:
        emit(
            "nccl.gib-nonblocking",
            "error",
            f"{name}={ctx.env.get(name)!r} with the gIB NCCL plugin: its shim expects the variable unset "
            "(NET/(shim) mismatch, seed 002 §3)",
            [ctx.env.evidence(name), *evidence],
            f"unset {name} (container images set it; `deepep-env run` on gke-a4 unsets it)",
        )


def gib_plugin_found(ctx: DoctorContext) -> bool:
    """Whether NCCL_NET_PLUGIN (a path, or a name NCCL expands) or a default gIB plugin is on the library path."""
    plugin = ctx.env.get("NCCL_NET_PLUGIN")
    if plugin and "/" in plugin:
        return ctx.paths.exists(plugin)
    dirs = [d for d, _ in ctx.lib_search_dirs()]
    names = [f"libnccl-net-{plugin}.so", f"libnccl-net_{plugin}.so", plugin] if plugin else ["libnccl-net.so", "libnccl-net-gib.so"]
    return any(ctx.paths.exists(f"{d}/{n}") for d in dirs for n in names if n)


@check("nccl", "nccl.gib-plugin-missing", current_env_too=True)
def gib_plugin_on_library_path(ctx: DoctorContext, emit: Emitter) -> None:
    """With NCCL_NET=gIB, a gIB plugin (libnccl-net*.so) is on the library path (seed 002)."""
    net = (ctx.env.get("NCCL_NET") or "").strip().lower()
    if not gib(ctx) or net != "gib" or not ctx.paths.captures_software:
        return
    if not gib_plugin_found(ctx):
        emit(
            "nccl.gib-plugin-missing",
            "error",
            "NCCL_NET=gIB but no gIB plugin (libnccl-net*.so) is on the library path: NCCL fails with "
            "'Failed to initialize any NET plugin' (seed 002)",
            [ctx.env.evidence("NCCL_NET"), ctx.env.evidence("LD_LIBRARY_PATH")],
            f"add {GIB_DIR}/lib64 to LD_LIBRARY_PATH (the gke-a4 overlay does when it exists) or unset NCCL_NET",
        )
