"""Platform profiles (data in profiles_data.py) and the choice of one from host evidence.

``detect`` picks a profile from facts and says why, line by line; ``--platform`` overrides it.
The choice is a short ordered list of tests, most specific first, so the evidence printed is the
reason the code actually took.
"""
from __future__ import annotations

from typing import Mapping, NamedTuple, Optional

from deepep_env.base.errors import UserError
from deepep_env.platform.facts import HostFacts
from deepep_env.platform.profiles_data import PROFILES

class Profile(NamedTuple):
    name: str
    description: str
    status: str  # "supported" | "stub"
    rules: tuple[str, ...]
    env: Mapping[str, str]
    sources: tuple[str, ...] = ()
    gpu_models: tuple[str, ...] = ()


class PlatformChoice(NamedTuple):
    name: str
    source: str  # "detected" | "override"
    evidence: tuple[str, ...]
    profile: Profile


_CACHE: dict[str, Profile] = {}


def load_profiles() -> dict[str, Profile]:
    """Every profile of profiles_data.py, in declaration order."""
    if _CACHE:
        return _CACHE
    for name, t in PROFILES.items():
        _CACHE[name] = Profile(
            name=name,
            description=t.get("description", ""),
            status=t.get("status", "stub"),
            rules=tuple(t.get("rules", ())),
            env=dict(t.get("env", {})),
            sources=tuple(t.get("sources", ())),
            gpu_models=tuple(t.get("gpu_models", ())),
        )
    return _CACHE


def get_profile(name: str) -> Profile:
    profiles = load_profiles()
    if name not in profiles:
        raise UserError(f"unknown platform {name!r}", field="--platform", accepted=", ".join(profiles))
    return profiles[name]


def _models(facts: HostFacts) -> list[str]:
    return [g.model or f"unknown NVIDIA GPU {g.device_id or ''}".strip() for g in facts.gpus]


def _has_model(facts: HostFacts, token: str) -> bool:
    # "NVIDIA B200" vs "NVIDIA GB200": match whole words so B200 never matches GB200.
    token = token.upper()
    for g in facts.gpus:
        words = (g.model or "").upper().replace("-", " ").split()
        if token in words:
            return True
    return False


def efa_nics(facts: HostFacts) -> list:
    """AWS EFA devices: rdma-core names a device with an ``Unspecified`` link layer ``rdmap<bus>s<slot>``
    (older images: ``efa_<n>``); the efa kernel module or Amazon's DMI vendor confirms it."""
    amazon = "amazon" in (facts.dmi.get("sys_vendor", "") + facts.dmi.get("board_vendor", "")).lower()
    if not (facts.module_loaded("efa") or amazon):
        return []
    return [n for n in facts.usable_nics()
            if n.hca.startswith(("rdmap", "efa_")) or all((p.link_layer or "").lower() == "unspecified" for p in n.ports)]


def select_platform(facts: HostFacts, override: Optional[str] = None) -> PlatformChoice:
    """The profile for this host, with the evidence that chose it."""
    if override:
        prof = get_profile(override)
        return PlatformChoice(prof.name, "override", (f"--platform {prof.name} given",), prof)

    ev: list[str] = []
    models = _models(facts)
    if not facts.gpus:
        ev.append("no NVIDIA GPU (vendor 0x10de, class 0x03xxxx) under sys/bus/pci/devices")
        return PlatformChoice("none", "detected", tuple(ev), get_profile("none"))
    counts: dict[str, int] = {}
    for m in models:
        counts[m] = counts.get(m, 0) + 1
    ev.append("GPUs: " + ", ".join(f"{n}x {m}" for m, n in counts.items()))

    usable = facts.usable_nics()
    if not usable:
        if facts.nics:
            ev.append(f"{len(facts.nics)} RDMA device(s) under sys/class/infiniband, none with an ACTIVE port")
        else:
            ev.append("no RDMA device under sys/class/infiniband")
        return PlatformChoice("nvlink", "detected", tuple(ev), get_profile("nvlink"))
    layers = sorted({(p.link_layer or "unknown") for n in usable for p in n.active_ports()})
    ev.append(f"{len(usable)} RDMA NIC(s) with an ACTIVE port ({', '.join(layers)})")

    vendor = facts.dmi.get("sys_vendor", "")
    product = facts.dmi.get("product_name", "")
    google = "google" in vendor.lower() or "google" in product.lower()
    if google:
        ev.append(f"DMI: sys_vendor={vendor!r} product_name={product!r}")
    k8s = facts.kubernetes
    if k8s.in_pod or k8s.gke:
        ev.extend("Kubernetes: " + m for m in k8s.markers)

    def pick(name: str, why: str) -> PlatformChoice:
        ev.append(why)
        return PlatformChoice(name, "detected", tuple(ev), get_profile(name))

    efa = efa_nics(facts)
    if efa:
        ev.append(f"EFA devices ({len(efa)}: {', '.join(n.hca for n in efa[:4])}{', …' if len(efa) > 4 else ''}; "
                  f"link layer Unspecified, efa module {'loaded' if facts.module_loaded('efa') else 'not listed'})")
        if vendor or product:
            ev.append(f"DMI: sys_vendor={vendor!r} product_name={product!r}")
        return pick("aws-efa", "EFA RDMA devices → aws-efa")
    if _has_model(facts, "GB200"):
        return pick("gb200", "GB200 GPUs → gb200")
    if _has_model(facts, "B300"):
        return pick("b300", "B300 GPUs → b300")
    if _has_model(facts, "B200"):
        if k8s.gke:
            return pick("gke-a4", "B200 in a GKE pod/node (driver under /usr/local/nvidia) → gke-a4")
        if google:
            return pick("gcp-b200", "B200 on a Google Compute Engine VM → gcp-b200")
    if _has_model(facts, "H20"):
        return pick("h20-roce", "H20 GPUs with RDMA NICs → h20-roce")
    if any(_has_model(facts, m) for m in ("H100", "H200", "H800")) and layers == ["InfiniBand"]:
        return pick("h100-ib", "Hopper GPUs with InfiniBand NICs → h100-ib")
    return pick("rdma-generic", "no known platform matches → rdma-generic (only the rules every RDMA host needs)")
