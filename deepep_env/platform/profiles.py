"""Platform profiles (data in profiles_data.py) and the choice of one from host evidence.

``detect`` picks a profile from facts and says why, line by line; ``--platform`` overrides it.
Each profile declares how it is detected (profiles_data.py ``gpu_models`` and ``match``: GPUs,
fabric, cloud markers, precedence); ``select_platform`` is one generic matcher over them, so the
evidence printed is the facts it read and the ``why`` of the profile that matched.
"""
from __future__ import annotations

from typing import Mapping, NamedTuple, Optional

from deepep_env.base.errors import UserError
from deepep_env.platform.facts import HostFacts
from deepep_env.platform.gpus import by_name, identify
from deepep_env.platform.profiles_data import PROFILES

# The conditions a profile's ``match`` may set (profiles_data.py says what each means).
MATCH_KEYS = {
    "precedence": None,
    "gpus": ("any", "none"),
    "fabric": ("none", "rdma", "efa", "infiniband"),
    "cloud": ("gce", "gke"),
    "why": None,
}


class Match(NamedTuple):
    """How a profile is detected (profiles_data.py ``match``); every condition set must hold."""
    precedence: int
    gpus: str = "any"
    fabric: Optional[str] = None
    cloud: Optional[str] = None
    why: Optional[str] = None


class Profile(NamedTuple):
    name: str
    description: str
    status: str  # "supported" | "stub"
    rules: tuple[str, ...]
    env: Mapping[str, str]
    sources: tuple[str, ...] = ()
    gpu_models: tuple[str, ...] = ()   # names of platform/gpus.py GPUS; empty = any NVIDIA GPU
    match: Optional[Match] = None      # None: chosen only with --platform


class PlatformChoice(NamedTuple):
    name: str
    source: str  # "detected" | "override"
    evidence: tuple[str, ...]
    profile: Profile


_CACHE: dict[str, Profile] = {}


def _match(name: str, m: object) -> Optional[Match]:
    """A profile's ``match`` table as a :class:`Match`; a bad one is a UserError naming the profile."""
    if m is None:
        return None
    where = f"deepep_env/platform/profiles_data.py PROFILES[{name!r}]['match']"
    if not isinstance(m, dict) or not isinstance(m.get("precedence"), int):
        raise UserError(f"{where}: a table with an integer 'precedence' is needed", field="match")
    for k, v in m.items():
        if k not in MATCH_KEYS:
            raise UserError(f"{where}: unknown key {k!r}", field="match", accepted=", ".join(MATCH_KEYS))
        allowed = MATCH_KEYS[k]
        if allowed is not None and v not in allowed:
            raise UserError(f"{where}: {k} = {v!r}", field=f"match.{k}", accepted=", ".join(allowed))
    return Match(**m)


def load_profiles() -> dict[str, Profile]:
    """Every profile of profiles_data.py, in declaration order. A ``gpu_models`` name the GPU table
    (platform/gpus.py) does not know is an error: the two cannot disagree."""
    if _CACHE:
        return _CACHE
    known = by_name()
    for name, t in PROFILES.items():
        models = tuple(t.get("gpu_models", ()))
        unknown = [m for m in models if m not in known]
        if unknown:
            raise UserError(f"deepep_env/platform/profiles_data.py PROFILES[{name!r}]: gpu_models {unknown} "
                            "are not in the GPU table", field="gpu_models",
                            accepted=", ".join(known) + " (add a row to deepep_env/platform/gpus.py GPUS first)")
        _CACHE[name] = Profile(
            name=name,
            description=t.get("description", ""),
            status=t.get("status", "stub"),
            rules=tuple(t.get("rules", ())),
            env=dict(t.get("env", {})),
            sources=tuple(t.get("sources", ())),
            gpu_models=models,
            match=_match(name, t.get("match")),
        )
    return _CACHE


def get_profile(name: str) -> Profile:
    profiles = load_profiles()
    if name not in profiles:
        raise UserError(f"unknown platform {name!r}", field="--platform", accepted=", ".join(profiles))
    return profiles[name]


def _models(facts: HostFacts) -> list[str]:
    return [g.model or f"unknown NVIDIA GPU {g.device_id or ''}".strip() for g in facts.gpus]


def host_gpus(facts: HostFacts) -> set[str]:
    """The names (platform/gpus.py) of the host's GPUs the table knows."""
    return {row.name for g in facts.gpus if (row := identify(g.model, g.device_id)) is not None}


def efa_nics(facts: HostFacts) -> list:
    """AWS EFA devices: rdma-core names a device with an ``Unspecified`` link layer ``rdmap<bus>s<slot>``
    (older images: ``efa_<n>``); the efa kernel module or Amazon's DMI vendor confirms it."""
    amazon = "amazon" in (facts.dmi.get("sys_vendor", "") + facts.dmi.get("board_vendor", "")).lower()
    if not (facts.module_loaded("efa") or amazon):
        return []
    return [n for n in facts.usable_nics()
            if n.hca.startswith(("rdmap", "efa_")) or all((p.link_layer or "").lower() == "unspecified" for p in n.ports)]


class _Host(NamedTuple):
    """What the profiles' ``match`` conditions are tested against, read once."""
    gpus: set[str]
    has_gpu: bool
    fabrics: set[str]
    clouds: set[str]


def _matches(p: Profile, h: _Host) -> bool:
    m = p.match
    if m is None:
        return False
    if m.gpus == "none":
        if h.has_gpu:
            return False
    elif not h.has_gpu or (p.gpu_models and not h.gpus.intersection(p.gpu_models)):
        return False
    return (m.fabric is None or m.fabric in h.fabrics) and (m.cloud is None or m.cloud in h.clouds)


def read_host(facts: HostFacts) -> tuple[_Host, list[str]]:
    """What the ``match`` conditions test, and the same facts as evidence lines, in the order a reader
    needs them (GPUs, NICs, then the cloud markers and EFA devices of a host with RDMA NICs)."""
    ev: list[str] = []
    fabrics: set[str] = set()
    clouds: set[str] = set()
    if not facts.gpus:
        ev.append("no NVIDIA GPU (vendor 0x10de, class 0x03xxxx) under sys/bus/pci/devices")
    else:
        counts: dict[str, int] = {}
        for m in _models(facts):
            counts[m] = counts.get(m, 0) + 1
        ev.append("GPUs: " + ", ".join(f"{n}x {m}" for m, n in counts.items()))
        usable = facts.usable_nics()
        if not usable:
            fabrics.add("none")
            if facts.nics:
                ev.append(f"{len(facts.nics)} RDMA device(s) under sys/class/infiniband, none with an ACTIVE port")
            else:
                ev.append("no RDMA device under sys/class/infiniband")
        else:
            fabrics.add("rdma")
            layers = sorted({(p.link_layer or "unknown") for n in usable for p in n.active_ports()})
            if layers == ["InfiniBand"]:
                fabrics.add("infiniband")
            ev.append(f"{len(usable)} RDMA NIC(s) with an ACTIVE port ({', '.join(layers)})")
            vendor = facts.dmi.get("sys_vendor", "")
            product = facts.dmi.get("product_name", "")
            if "google" in vendor.lower() or "google" in product.lower():
                clouds.add("gce")
                ev.append(f"DMI: sys_vendor={vendor!r} product_name={product!r}")
            k8s = facts.kubernetes
            if k8s.gke:
                clouds.add("gke")
            if k8s.in_pod or k8s.gke:
                ev.extend("Kubernetes: " + m for m in k8s.markers)
            efa = efa_nics(facts)
            if efa:
                fabrics.add("efa")
                ev.append(f"EFA devices ({len(efa)}: {', '.join(n.hca for n in efa[:4])}{', …' if len(efa) > 4 else ''}; "
                          f"link layer Unspecified, efa module {'loaded' if facts.module_loaded('efa') else 'not listed'})")
                if vendor or product:
                    ev.append(f"DMI: sys_vendor={vendor!r} product_name={product!r}")

    return _Host(host_gpus(facts), bool(facts.gpus), fabrics, clouds), ev


def select_platform(facts: HostFacts, override: Optional[str] = None) -> PlatformChoice:
    """The profile for this host, with the evidence that chose it: the matching profile
    (profiles_data.py ``gpu_models`` and ``match``) of highest precedence, the earlier on a tie."""
    if override:
        prof = get_profile(override)
        return PlatformChoice(prof.name, "override", (f"--platform {prof.name} given",), prof)

    host, ev = read_host(facts)
    ranked = sorted(enumerate(load_profiles().values()), key=lambda ip: (-(ip[1].match or Match(0)).precedence, ip[0]))
    for _, prof in ranked:
        if _matches(prof, host):
            assert prof.match is not None
            if prof.match.why:
                ev.append(prof.match.why)
            return PlatformChoice(prof.name, "detected", tuple(ev), prof)
    raise UserError("no platform profile matches this host and none is the fallback",
                    field="match", accepted="a profile whose match sets only a precedence "
                    "(deepep_env/platform/profiles_data.py), or --platform NAME")
