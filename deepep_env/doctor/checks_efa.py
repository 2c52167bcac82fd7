"""Family ``efa``: AWS EFA hosts (p5/p5en/p6) running DeepEP V2 over NCCL Gin (type 5).

What amazon-contributing/DeepEP needs on the host (awslabs/awsome-distributed-ai PR #1234;
shared/research/2026-11-landscape.md §1.2, §3.7): the EFA kernel driver >= 3.3.0
(``efadv_create_comp_cntr``, read from /sys/module/efa/version), the ``gdrdrv`` module (GDRCopy's
driver; ``/dev/gdrdrv`` bind-mounted into containers), ``NCCL_GIN_TYPE=5`` (aws-ofi-nccl's
``Libfabric_GDAKI``; else NCCL takes the CPU-proxy Gin) and the aws-ofi-nccl plugin on the
library path. Quiet on every host without EFA devices.
"""
from __future__ import annotations

import re
from typing import Optional

from deepep_env.doctor.check import Emitter, check
from deepep_env.doctor.checks_deepep_v2 import v2_package
from deepep_env.doctor.context import DoctorContext
from deepep_env.doctor.model import Evidence
from deepep_env.platform.profiles import efa_nics
from deepep_env.base.versions import version_lt

EFA_DRIVER_FLOOR = "3.3.0"
EFA_VERSION_FILE = "/sys/module/efa/version"
OFI_PLUGINS = ("libnccl-net-ofi.so", "libnccl-net.so", "libnccl-net-aws-ofi.so")
OFI_DIRS = ("/opt/amazon/ofi-nccl/lib", "/opt/amazon/ofi-nccl/lib64", "/opt/aws-ofi-nccl/lib")


def efa_devices(ctx: DoctorContext) -> list[str]:
    return ctx.cached("efa.devices", lambda: [n.hca for n in efa_nics(ctx.host.facts)])


def _devices_evidence(ctx: DoctorContext) -> Evidence:
    d = efa_devices(ctx)
    return Evidence(value=f"{len(d)} EFA device(s): {', '.join(d[:4])}{', …' if len(d) > 4 else ''}", file="/sys/class/infiniband")


def _severity(ctx: DoctorContext) -> str:
    """An error where DeepEP 2.x is installed (its Gin needs it), a warning on the host alone."""
    return "error" if v2_package(ctx) is not None else "warning"


def efa_driver_version(ctx: DoctorContext) -> Optional[str]:
    text = (ctx.paths.read_text(EFA_VERSION_FILE, 256) or "").strip()
    m = re.match(r"^(\d+\.\d+\.\d+)", text)
    return m.group(1) if m else None


@check("efa", "efa.driver-too-old")
def efa_driver_new_enough(ctx: DoctorContext, emit: Emitter) -> None:
    """The EFA kernel driver is >= 3.3.0 (efadv_create_comp_cntr, needed by NCCL Gin over EFA)."""
    if not efa_devices(ctx):
        return
    raw = (ctx.paths.read_text(EFA_VERSION_FILE, 256) or "").strip()
    have = efa_driver_version(ctx)
    if have is None:
        ctx.notes.append(f"EFA driver version not readable ({EFA_VERSION_FILE}): driver floor not checked")
        return
    if version_lt(have, EFA_DRIVER_FLOOR):
        emit("efa.driver-too-old", _severity(ctx),
             f"EFA kernel driver {raw} is older than {EFA_DRIVER_FLOOR}: NCCL Gin over EFA (aws-ofi-nccl Libfabric_GDAKI, "
             "GIN type 5) needs efadv_create_comp_cntr (awslabs/awsome-distributed-ai PR #1234)",
             [Evidence(value=raw, file=EFA_VERSION_FILE), _devices_evidence(ctx)],
             "install the EFA installer with efa driver >= 3.3.0 (reload the efa module or reboot)")
    else:
        ctx.confirmed.append(f"efa.driver: efa {raw} (>= {EFA_DRIVER_FLOOR})")


@check("efa", "efa.gdrdrv-missing")
def gdrdrv_loaded(ctx: DoctorContext, emit: Emitter) -> None:
    """gdrdrv (GDRCopy's kernel module) is loaded on an EFA host (awsome-distributed-ai PR #1234)."""
    if not efa_devices(ctx):
        return
    if ctx.host.facts.module_loaded("gdrdrv"):
        ctx.confirmed.append("efa.gdrdrv: gdrdrv loaded")
        return
    emit("efa.gdrdrv-missing", _severity(ctx),
         "gdrdrv is not loaded: DeepEP V2 over EFA (NCCL Gin type 5) needs GDRCopy's driver and /dev/gdrdrv "
         "(awslabs/awsome-distributed-ai PR #1234)",
         [Evidence(value="gdrdrv absent", file="/proc/modules"), _devices_evidence(ctx)],
         "install GDRCopy's kernel module and `modprobe gdrdrv` (containers: bind-mount /dev/gdrdrv)")


@check("efa", "efa.gin-type", current_env_too=True)
def gin_type_is_efa(ctx: DoctorContext, emit: Emitter) -> None:
    """NCCL_GIN_TYPE=5 (aws-ofi-nccl's Libfabric_GDAKI) on an EFA host running DeepEP V2."""
    if not efa_devices(ctx) or v2_package(ctx) is None:
        return
    value = (ctx.env.get("NCCL_GIN_TYPE") or "").strip()
    if value == "5":
        return
    emit("efa.gin-type", "error",
         f"NCCL_GIN_TYPE is {value or 'unset'} on an EFA host: NCCL then takes the CPU-proxy Gin (or none), not "
         "aws-ofi-nccl's Libfabric_GDAKI backend the EFA DeepEP V2 runs on (amazon-contributing/DeepEP; "
         "awsome-distributed-ai PR #1234)",
         [ctx.env.evidence("NCCL_GIN_TYPE"), _devices_evidence(ctx)],
         "NCCL_GIN_TYPE=5" + (ctx.overlay_hint("NCCL_GIN_TYPE") or " (`deepep-env run` sets it on aws-efa)"))


@check("efa", "efa.ofi-plugin-missing", current_env_too=True)
def ofi_plugin_found(ctx: DoctorContext, emit: Emitter) -> None:
    """The aws-ofi-nccl plugin (NCCL's EFA net and Gin backend) is on the library path."""
    if not efa_devices(ctx) or not ctx.paths.captures_software:
        return
    dirs = [d for d, _ in ctx.lib_search_dirs()]
    if any(ctx.paths.exists(f"{d}/{n}") for d in dirs for n in OFI_PLUGINS):
        return
    installed = [d for d in OFI_DIRS if ctx.paths.is_dir(d)]
    emit("efa.ofi-plugin-missing", _severity(ctx),
         "no aws-ofi-nccl plugin (libnccl-net-ofi.so) on the library path: NCCL has no EFA transport and no Gin type 5",
         [ctx.env.evidence("LD_LIBRARY_PATH")] + [Evidence(value="installed here", file=d) for d in installed],
         (f"add {installed[0]} to LD_LIBRARY_PATH (`deepep-env run` does on aws-efa)" if installed
          else "install aws-ofi-nccl (the EFA installer) and put its lib on LD_LIBRARY_PATH"))
