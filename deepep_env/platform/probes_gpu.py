"""GPU probes: NVIDIA functions on the PCI bus (with the driver's own view, ``proc/driver/nvidia``)
and the driver's version and parameters. Pure functions of a :class:`~deepep_env.platform.probing.Probe`;
nothing runs a program or loads NVML (issue 3).
"""
from __future__ import annotations

import re

from deepep_env.platform.facts import Driver, Gpu
from deepep_env.platform.gpus import pci_models
from deepep_env.platform.probing import Probe, int_or_none, numa_of, pci_sort_key

NVIDIA_VENDOR = "0x10de"



def _parse_information(text: str) -> dict[str, str]:
    info: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            info[key.strip()] = value.strip()
    return info


def probe_gpus(p: Probe) -> tuple[Gpu, ...]:
    fs = p.fs
    bdfs: set[str] = set()
    has_pci = fs.is_dir("sys/bus/pci/devices")
    if not has_pci:
        p.warn("sys/bus/pci/devices: absent; GPUs taken from proc/driver/nvidia/gpus only (no PCIe topology)")
    for bdf in fs.listdir("sys/bus/pci/devices"):
        base = f"sys/bus/pci/devices/{bdf}"
        vendor = fs.read_attr(f"{base}/vendor")
        if vendor is None:
            continue
        if vendor.lower() != NVIDIA_VENDOR:
            continue
        cls_text = fs.read_attr(f"{base}/class")
        cls = int_or_none(cls_text)
        if cls is None:
            p.warn(f"{base}/class: unreadable; NVIDIA function skipped")
            continue
        if len(cls_text.lower().removeprefix("0x")) <= 4:  # type: ignore[union-attr]
            # The kernel prints 24 bits (0x030200: base class, subclass, prog-if); a hand-made or
            # lspci-derived tree may give the 16-bit class code (0x0302) — read it as such.
            cls <<= 8
        if (cls >> 16) == 0x03:  # display controller: VGA 0x0300, 3D 0x0302 (NVSwitch is 0x0680)
            bdfs.add(bdf.lower())
    driver_gpus = {b.lower() for b in fs.listdir("proc/driver/nvidia/gpus")}
    for b in sorted(driver_gpus - bdfs):
        if has_pci:
            p.warn(f"proc/driver/nvidia/gpus/{b}: the driver lists a GPU sysfs does not show")
        bdfs.add(b)

    gpus = []
    for idx, bdf in enumerate(sorted(bdfs, key=pci_sort_key)):
        base = f"sys/bus/pci/devices/{bdf}"
        info_rel = f"proc/driver/nvidia/gpus/{bdf}/information"
        info: dict[str, str] = {}
        try:
            info = _parse_information(fs.read_text(info_rel))
        except OSError as exc:
            if fs.is_dir("proc/driver/nvidia"):
                p.warn(f"{info_rel}: {exc.strerror or exc}")
        device_id = fs.read_attr(f"{base}/device")
        model = info.get("Model")
        source = "driver" if model else None
        if not model and device_id:
            # The PCI id names the model only when the driver's own `information` file is absent (no
            # driver loaded, or a container without /proc/driver/nvidia): platform/gpus.py holds the ids.
            model = pci_models().get(device_id.lower())
            source = "pci-id" if model else None
        link = {}
        for attr in ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width"):
            v = fs.read_attr(f"{base}/{attr}")
            if v is not None:
                link[attr] = v
        gpus.append(
            Gpu(
                bdf=bdf,
                cuda_index=idx,
                model=model,
                model_source=source,
                device_id=device_id.lower() if device_id else None,
                numa_node=numa_of(fs.read_attr(f"{base}/numa_node")),
                pci_chain=p.pci_chain(bdf) if has_pci else (bdf,),
                uuid=info.get("GPU UUID"),
                minor=int_or_none(info.get("Device Minor")),
                local_cpulist=fs.read_attr(f"{base}/local_cpulist"),
                link=link,
            )
        )
    return tuple(gpus)



def parse_registry_dwords(value: str) -> dict[str, str]:
    """``"PeerMappingOverride=1;RmFoo=0x2"`` → {PeerMappingOverride: "1", RmFoo: "0x2"}."""
    out: dict[str, str] = {}
    for item in value.strip().strip('"').split(";"):
        key, sep, val = item.partition("=")
        if sep and key.strip():
            out[key.strip()] = val.strip()
    return out


_VERSION_RE = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+(?:\.\d+)+)")


def probe_driver(p: Probe, have_gpus: bool) -> Driver:
    fs = p.fs
    if not fs.is_dir("proc/driver/nvidia"):
        if have_gpus:
            p.warn("proc/driver/nvidia: absent (driver not loaded, or not visible here); driver facts unknown")
        return Driver(loaded=False)
    version = flavor = None
    try:
        text = fs.read_text("proc/driver/nvidia/version")
        m = _VERSION_RE.search(text)
        version = m.group(1) if m else None
        flavor = "open" if "Open Kernel Module" in text else "proprietary" if "Kernel Module" in text else None
    except OSError as exc:
        p.warn(f"proc/driver/nvidia/version: {exc.strerror or exc}")
    params: dict[str, str] = {}
    try:
        for line in fs.read_text("proc/driver/nvidia/params").splitlines():
            key, sep, value = line.partition(":")
            if sep:
                params[key.strip()] = value.strip()
    except OSError as exc:
        p.warn(f"proc/driver/nvidia/params: {exc.strerror or exc}")
    dwords = parse_registry_dwords(params.get("RegistryDwords", ""))
    if params and int_or_none(params.get("EnableStreamMemOPs")) is None:
        # Garbage or a truncated file: say so, rather than reporting a value of None as if read.
        p.warn("proc/driver/nvidia/params: EnableStreamMemOPs is missing or not a number "
               f"(read {str(params.get('EnableStreamMemOPs'))[:40]!r}); driver keys treated as unknown")
    return Driver(
        loaded=True,
        version=version,
        flavor=flavor,
        params=params,
        registry_dwords=dwords,
        enable_stream_memops=int_or_none(params.get("EnableStreamMemOPs")),
        peer_mapping_override=int_or_none(dwords.get("PeerMappingOverride")) if params else None,
    )


