"""Overlay rules: HostFacts × platform profile × (optional) env prefix → typed changes.

Each rule is a function of the facts; it either *fires* (adds changes whose ``fact`` says what on
the host made it fire) or *stays quiet* (adds a Note saying why not). Profiles (platform/
profiles_data.py) list which rules apply. Sources: seed 000's ``unified-env.sh`` (GCP B200), seed
002's GKE job env, seed 003 (H20), field notes §1/§3.
"""
from __future__ import annotations

import glob
import os
import re
import sys
from typing import Iterable, Mapping, Optional, Sequence

from deepep_env.base.errors import UserError
from deepep_env.overlay import known_vars, rules_efa, rules_v2
from deepep_env.overlay.changes import Overlay
from deepep_env.overlay.rulebase import Rule, RuleContext, rule, rules_of
from deepep_env.overlay.rules_v2 import build_records
from deepep_env.platform.facts import HostFacts
from deepep_env.platform.libraries import SYSTEM_LIB_DIRS
from deepep_env.platform.profiles import PlatformChoice, Profile, get_profile
from deepep_env.platform.rootfs import is_live_root
from deepep_env.platform.topology import mapping_string

NVSHMEM_HOST_LIB = "libnvshmem_host.so.3"
# Where another NVSHMEM host library hides in a Python environment: pip's nvidia-nvshmem-cu12/13
# wheels (what pip PyTorch depends on; field notes §3: pip torch loads its own 3.4.5 first).
COMPETING_NVSHMEM = ("nvidia/nvshmem/lib/" + NVSHMEM_HOST_LIB, "torch/lib/" + NVSHMEM_HOST_LIB)


# Seed 002 (GKE job YAML): Google's gIB NCCL plugin settings for A4.
GIB_NCCL = (
    ("NCCL_NET", "gIB"),
    ("NCCL_CROSS_NIC", "0"),
    ("NCCL_NET_GDR_LEVEL", "PIX"),
    ("NCCL_P2P_NET_CHUNKSIZE", "131072"),
    ("NCCL_NVLS_CHUNKSIZE", "524288"),
    ("NCCL_IB_ADAPTIVE_ROUTING", "1"),
    ("NCCL_IB_QPS_PER_CONNECTION", "4"),
    ("NCCL_IB_TC", "52"),
    ("NCCL_IB_FIFO_TC", "84"),
)
GIB_TUNER = "/usr/local/gib/configs/tuner_config_a4.txtpb"


def _nics_fact(ctx: RuleContext) -> str:
    nics = ctx.facts.usable_nics()
    names = ", ".join(n.hca for n in nics[:8]) + (", …" if len(nics) > 8 else "")
    return f"{len(nics)} RDMA NIC(s) with an ACTIVE port under /sys/class/infiniband: {names}"


# -- transport ---------------------------------------------------------------------------------
@rule("ibgda-transport")
def ibgda_transport(ctx: RuleContext) -> None:
    """NVSHMEM_REMOTE_TRANSPORT=ibgda, as seed 000 does: a value other than ibrc/ucx/ibdevx/
    libfabric skips NVSHMEM's proxy transports (src/host/transport/transport.cpp) and DeepEP's
    kernels use IBGDA alone. IBGDA itself is switched on by NVSHMEM_IB_ENABLE_IBGDA, which
    DeepEP's Buffer sets — so the overlay does not."""
    r = "ibgda-transport"
    if not ctx.facts.usable_nics():
        ctx.note(r, "no RDMA NIC with an ACTIVE port", "no RDMA NIC: IBGDA transport not configured")
        return
    ctx.set("NVSHMEM_REMOTE_TRANSPORT", "ibgda", r, _nics_fact(ctx))
    ctx.note(r, "deep_ep/buffer.py sets it before NVSHMEM starts",
             "NVSHMEM_IB_ENABLE_IBGDA is not set here: DeepEP's Buffer sets it to 1 itself")


@rule("no-remote-transport")
def no_remote_transport(ctx: RuleContext) -> None:
    r = "no-remote-transport"
    usable = ctx.facts.usable_nics()
    if usable:
        fact = f"profile {ctx.profile.name} ({ctx.platform_source}) although {_nics_fact(ctx)}"
        ctx.note(r, fact, f"{len(usable)} RDMA NIC(s) are active but the {ctx.profile.name} profile turns the remote transport off", "warning")
    else:
        fact = "no RDMA NIC with an ACTIVE port under /sys/class/infiniband (single node, NVLink only)"
    ctx.set("NVSHMEM_REMOTE_TRANSPORT", "none", r, fact)


def _driver_keys_fact(facts: HostFacts) -> tuple[Optional[bool], str]:
    d = facts.driver
    if not d.loaded or not d.params:
        return None, "proc/driver/nvidia/params unreadable (driver not loaded or not visible)"
    ok = d.enable_stream_memops == 1 and d.peer_mapping_override == 1
    return ok, (
        f"proc/driver/nvidia/params: EnableStreamMemOPs="
        f"{'unknown' if d.enable_stream_memops is None else d.enable_stream_memops}, RegistryDwords "
        f"PeerMappingOverride={'unknown' if d.peer_mapping_override is None else d.peer_mapping_override}"
    )


def _driver_keys_check(ctx: RuleContext, r: str, why: str) -> None:
    ok, fact = _driver_keys_fact(ctx.facts)
    if ok:
        ctx.note(r, fact, "driver keys for IBGDA present")
    elif ok is None:
        ctx.note(r, fact, f"cannot check the driver keys {why} needs", "warning")
    else:
        ctx.note(
            r,
            fact,
            f"{why} needs NVreg_EnableStreamMemOPs=1 and NVreg_RegistryDwords=\"PeerMappingOverride=1;\" "
            "(modprobe options + initramfs + reboot, seed 003); without them IBGDA times out or fails to init",
            "warning",
        )


@rule("nic-handler-gpu")
def nic_handler_gpu(ctx: RuleContext) -> None:
    r = "nic-handler-gpu"
    if not ctx.facts.usable_nics():
        ctx.note(r, "no RDMA NIC with an ACTIVE port", "no RDMA NIC: NIC handler left at its default")
        return
    ctx.set(
        "NVSHMEM_IBGDA_NIC_HANDLER",
        "gpu",
        r,
        f"profile {ctx.profile.name}: the CPU NIC handler hangs internode dispatch on GCP B200 "
        "(seed 000 §4 problem 2); the GPU handler needs no GDRCopy",
    )
    # Since NVSHMEM 3.4.5 the driver keys are needed only by the GPU NIC handler (NVIDIA/nvshmem #23, #34).
    _driver_keys_check(ctx, r, "the GPU NIC handler")


@rule("driver-keys")
def driver_keys(ctx: RuleContext) -> None:
    r = "driver-keys"
    if not ctx.facts.usable_nics():
        ctx.note(r, "no RDMA NIC with an ACTIVE port", "no RDMA NIC: IBGDA driver keys not needed")
        return
    _driver_keys_check(ctx, r, "IBGDA")


def hca_family(name: str) -> str:
    """``mlx5_3`` → ``mlx5``; ``mlx5_bond_0`` → ``mlx5_bond``; ``rocep145s0`` → ``rocep``; ``ibp12s0`` → ``ibp``."""
    m = re.match(r"^(.*?)_\d+$", name)
    if m:
        return m.group(1)
    m = re.match(r"^([a-z]+)", name)
    return m.group(1) if m else name


@rule("hca-prefix")
def hca_prefix(ctx: RuleContext) -> None:
    """NVSHMEM only opens HCAs whose name starts with NVSHMEM_HCA_PREFIX (default mlx5): GCP
    without DOCA-OFED names them rocep*, which then needs the prefix (field notes §1)."""
    r = "hca-prefix"
    names = ctx.mapped_hcas()
    if not names:
        ctx.note(r, "no RDMA NIC with an ACTIVE port", "no RDMA NIC: NVSHMEM_HCA_PREFIX not set")
        return
    families = sorted({hca_family(n) for n in names})
    if len(families) == 1:
        ctx.set("NVSHMEM_HCA_PREFIX", families[0], r, "HCA names in use: " + ", ".join(names))
        return
    common = os.path.commonprefix(names).rstrip("_")
    if common:
        ctx.set("NVSHMEM_HCA_PREFIX", common, r, "HCA names in use (mixed families): " + ", ".join(names))
    else:
        ctx.note(r, "HCA names in use: " + ", ".join(names), "HCA names share no prefix: NVSHMEM_HCA_PREFIX not set", "warning")


@rule("cuda-vmm-off")
def cuda_vmm_off(ctx: RuleContext) -> None:
    r = "cuda-vmm-off"
    if not ctx.facts.gpus:
        ctx.note(r, "no NVIDIA GPU", "no GPU: CUDA VMM setting not needed")
        return
    ctx.set("NVSHMEM_DISABLE_CUDA_VMM", "1", r, f"profile {ctx.profile.name}: CUDA VMM off on GCP B200 (seed 000 unified-env.sh, §6)")


@rule("nic-pe-mapping")
def nic_pe_mapping(ctx: RuleContext) -> None:
    r = "nic-pe-mapping"
    if not ctx.mapping:
        ctx.note(r, "no GPU→HCA mapping", "no GPU→HCA mapping: NIC-PE mapping left off")
        return
    ctx.set(
        "NVSHMEM_ENABLE_NIC_PE_MAPPING",
        "1",
        r,
        f"GPU→HCA mapping over {len(ctx.mapped_hcas())} NIC(s) (DeepEP PR #466 sets it per process too)",
    )


@rule("device-hca-mapping")
def device_hca_mapping(ctx: RuleContext) -> None:
    """DEEP_EP_DEVICE_TO_HCA_MAPPING from PCIe topology (DeepEP PR #466; seed 000 §4 problem 1:
    without it every GPU used mlx5_0 and RDMA ran at 6.5 GB/s instead of 36-80)."""
    r = "device-hca-mapping"
    explicit = [n for n in ("NVSHMEM_HCA_LIST", "NVSHMEM_HCA_PE_MAPPING") if n in ctx.spec_env]
    if explicit:
        ctx.note(
            r,
            f"env spec sets {', '.join(explicit)}",
            f"DEEP_EP_DEVICE_TO_HCA_MAPPING not set: PR #466 would write NVSHMEM_HCA_LIST per process over the spec's {', '.join(explicit)}",
            "warning",
        )
        return
    if ctx.displaced:
        gpus = ", ".join(f"GPU{e.cuda_index}" for e in ctx.displaced)
        names = ", ".join(sorted({u for e in ctx.displaced for u in e.unnamed}))
        ctx.note(r, "sys/class/infiniband", f"DEEP_EP_DEVICE_TO_HCA_MAPPING and NVSHMEM_ENABLE_NIC_PE_MAPPING not set: "
                 f"{gpus} are nearest to RDMA device {names}, whose name is not UTF-8 or not a device name; "
                 "a mapping would give them another GPU's NIC (and one without them stops DeepEP's PR #466), so NVSHMEM picks each PE's nearest NIC itself. Give "
                 "the device a valid name (`rdma dev set OLD name mlx5_N`, or a udev rule)", "warning")
        return
    if not ctx.mapping:
        ctx.note(r, "no GPU or no usable RDMA NIC", "no GPU→HCA mapping to set")
        return
    if any(not eng.device_hca_mapping for _, eng in build_records(ctx.prefix)):
        # An engine that does not read the variable (base/engines.py device_hca_mapping).
        # DeepEP 2.x picks NICs through NCCL (Gin) and its legacy Buffer has no PR #466 (dd758ca
        # deep_ep/buffers/legacy.py reads no DEEP_EP_DEVICE_TO_HCA_MAPPING): setting it would do nothing.
        ctx.note(r, "the prefix holds DeepEP 2.x", "DEEP_EP_DEVICE_TO_HCA_MAPPING not set: DeepEP 2.x does not read it")
        return
    value = mapping_string(ctx.mapping)
    detail = "; ".join(f"GPU{e.cuda_index} {e.gpu}→{e.hca} {e.level}" for e in ctx.mapping)
    ctx.set("DEEP_EP_DEVICE_TO_HCA_MAPPING", value, r, "PCIe topology (nearest NIC, ties in PCI order): " + detail)
    for w in ctx.facts.warnings:   # an RDMA device the probes could not name, nearer to no GPU: say so
        if w.startswith("sys/class/infiniband: device"):
            ctx.note(r, "sys/class/infiniband", w.split(": ", 1)[1], "warning")
    ctx.set("CUDA_DEVICE_ORDER", "PCI_BUS_ID", r, "the mapping's device indices are in PCI bus order")


@rule("gid-index")
def gid_index(ctx: RuleContext) -> None:
    r = "gid-index"
    g = ctx.facts.gid
    table = "; ".join(f"{p['hca']}:{p['port']} qualifying {p['qualifying']}" for p in g.per_port)
    if g.status == "ok" and g.index is not None:
        ctx.set("NVSHMEM_IB_GID_INDEX", str(g.index), r, g.reason + (f" ({table})" if table else ""))
    elif g.status in ("none", "disagree"):
        ctx.note(r, table or g.reason, g.reason, "warning")
    else:
        ctx.note(r, g.status, g.reason)


# -- NVSHMEM preload -------------------------------------------------------------------------
def competing_nvshmem(site_dirs: Iterable[str]) -> list[str]:
    """Other NVSHMEM host libraries a Python process may load before the env's own one.

    Pure over paths: each site dir is checked for pip's ``nvidia/nvshmem/lib/libnvshmem_host.so.3``
    (and a copy inside ``torch/lib``).
    """
    found = []
    for d in site_dirs:
        for rel in COMPETING_NVSHMEM:
            p = os.path.join(d, rel)
            if os.path.exists(p) and p not in found:
                found.append(p)
    return found


def default_site_dirs(
    root: str,
    prefix: Optional[str] = None,
    python_executable: Optional[str] = None,
    environ: Optional[Mapping[str, str]] = None,
) -> list[str]:
    """Site-packages directories whose NVSHMEM could load first: the prefix's, the host's
    (under ``root``), the env's declared host python's, and — on the live host — the active
    virtualenv's, the user's and this interpreter's."""
    dirs: list[str] = []

    def add(pattern: str) -> None:
        for d in sorted(glob.glob(pattern)):
            if d not in dirs and os.path.isdir(d):
                dirs.append(d)

    if prefix:
        add(os.path.join(prefix, "lib", "python3*", "site-packages"))
    for rel in ("usr/lib/python3/dist-packages", "usr/lib/python3*/site-packages",
                "usr/local/lib/python3*/dist-packages", "usr/local/lib/python3*/site-packages"):
        add(os.path.join(root, rel))
    live = is_live_root(root)
    if python_executable and live:
        venv = os.path.dirname(os.path.dirname(python_executable))
        add(os.path.join(venv, "lib", "python3*", "site-packages"))
    if live:
        env = os.environ if environ is None else environ
        if env.get("VIRTUAL_ENV"):
            add(os.path.join(env["VIRTUAL_ENV"], "lib", "python3*", "site-packages"))
        if env.get("HOME"):
            add(os.path.join(env["HOME"], ".local", "lib", "python3*", "site-packages"))
    return dirs


@rule("nvshmem-preload")
def nvshmem_preload(ctx: RuleContext) -> None:
    """LD_PRELOAD the env's libnvshmem_host.so.3 only when another NVSHMEM can load first
    (pip PyTorch bundles one; field notes §3) and only if the file exists (seed 000 preloads
    blindly; seed 002 shows what env vars naming missing paths do)."""
    r = "nvshmem-preload"
    if not ctx.prefix:
        ctx.note(r, "no env prefix given", "no env prefix: nothing to preload")
        return
    target = os.path.join(ctx.prefix, "lib", NVSHMEM_HOST_LIB)
    if not os.path.exists(target):
        ctx.note(r, f"{target} absent", "the env has no NVSHMEM host library: LD_PRELOAD not set")
        return
    others = competing_nvshmem(ctx.site_dirs)
    if not others:
        ctx.note(r, "searched: " + (", ".join(ctx.site_dirs) or "no site-packages found"),
                 "no other NVSHMEM can load first: LD_PRELOAD not needed")
        return
    ctx.prepend("LD_PRELOAD", [target], r, "another NVSHMEM could load first: " + ", ".join(others))


# -- GKE ---------------------------------------------------------------------------------------
@rule("gke-library-paths")
def gke_library_paths(ctx: RuleContext) -> None:
    """GKE mounts the node's /home/kubernetes/bin/nvidia at /usr/local/nvidia (seed 002):
    prepend what exists there — never a path that does not (field notes failure mode 6)."""
    r = "gke-library-paths"
    wanted = ("/usr/local/nvidia/lib64", "/usr/local/nvidia/lib")
    present = [p for p in wanted if ctx.facts.paths.get(p)]
    missing = [p for p in wanted if not ctx.facts.paths.get(p)]
    if present:
        ctx.prepend("LD_LIBRARY_PATH", present, r, "present on the host: " + ", ".join(present))
    if missing:
        ctx.note(r, "absent on the host: " + ", ".join(missing), "not added to LD_LIBRARY_PATH: " + ", ".join(missing),
                 "warning" if not present else "info")


def _gib_present(facts: HostFacts) -> bool:
    return bool(facts.paths.get("/usr/local/gib"))


@rule("gib-nccl")
def gib_nccl(ctx: RuleContext) -> None:
    r = "gib-nccl"
    if not _gib_present(ctx.facts):
        ctx.note(r, "/usr/local/gib absent", "Google's gIB NCCL plugin not installed: NCCL left on its defaults")
        return
    fact = "gIB plugin installed at /usr/local/gib (seed 002 job env)"
    if ctx.facts.paths.get("/usr/local/gib/lib64"):
        ctx.prepend("LD_LIBRARY_PATH", ["/usr/local/gib/lib64"], r, fact)
    for name, value in GIB_NCCL:
        ctx.set(name, value, r, fact)
    if ctx.facts.paths.get(GIB_TUNER):
        ctx.set("NCCL_TUNER_CONFIG_PATH", GIB_TUNER, r, f"{GIB_TUNER} present")
    else:
        ctx.note(r, f"{GIB_TUNER} absent", "NCCL_TUNER_CONFIG_PATH not set")


@rule("unset-comm-nonblocking")
def unset_comm_nonblocking(ctx: RuleContext) -> None:
    r = "unset-comm-nonblocking"
    if not _gib_present(ctx.facts):
        ctx.note(r, "/usr/local/gib absent", "no gIB shim: TORCH_NCCL_USE_COMM_NONBLOCKING left alone")
        return
    ctx.unset(
        "TORCH_NCCL_USE_COMM_NONBLOCKING",
        r,
        "gIB plugin at /usr/local/gib: its shim warns 'TORCH_NCCL_USE_COMM_NONBLOCKING=0 (expected unset)' (seed 002 §3)",
    )


def _ld_search_order(ctx: RuleContext) -> list[str]:
    lp = ctx.value("LD_LIBRARY_PATH") or ""
    dirs = [d for d in lp.split(":") if d]
    return dirs + [d for d in SYSTEM_LIB_DIRS if d not in dirs]


@rule("rdmav-drivers")
def rdmav_drivers(ctx: RuleContext) -> None:
    """Make the mlx5 provider match the libibverbs that loads first (seed 002: rdmav57
    libibverbs from /usr/local/nvidia/lib64 next to the system's rdmav34 → "couldn't load
    driver 'libmlx5-rdmav57.so'"). rdma-core's load_driver() appends "-rdmav<N>.so" to an
    absolute RDMAV_DRIVERS entry (libibverbs/dynamic_driver.c), so the value is
    <dir>/libibverbs/libmlx5, not the directory seed 002 wrote."""
    r = "rdmav-drivers"
    libs = ctx.facts.libraries
    loaders = {c.dir for c in libs if c.kind == "libibverbs" and c.name == "libibverbs.so.1"}
    first = next((d for d in _ld_search_order(ctx) if d in loaders), None)
    providers = [c for c in libs if c.kind == "provider"]
    abis = sorted({c.rdmav for c in providers if c.rdmav is not None})
    if len(abis) > 1:
        ctx.note(r, "; ".join(f"{c.dir}/{c.name}" for c in providers),
                 f"{len(abis)} rdma-core provider ABIs on this host (rdmav{', rdmav'.join(map(str, abis))}): one process must use one")
    if first is None:
        ctx.note(r, "no libibverbs.so.1 in the library paths", "libibverbs not found: RDMAV_DRIVERS not set")
        return
    if first in SYSTEM_LIB_DIRS:
        ctx.note(r, f"libibverbs.so.1 loads from {first}", "the system libibverbs loads first and finds its own providers: RDMAV_DRIVERS not needed")
        return
    mine = [c for c in providers if c.dir == f"{first}/libibverbs"]
    if not mine:
        # The real file (libmlx5.so.1.25.56.0), not its soname link, is what seed 002 copies.
        mlx5 = sorted((c for c in libs if c.dir == first and c.kind == "libmlx5"), key=lambda c: (c.link_target is None, len(c.name)), reverse=True)
        versions = [c.name for c in mlx5]
        ctx.note(
            r,
            f"libibverbs.so.1 loads from {first} (LD_LIBRARY_PATH); no {first}/libibverbs/libmlx5-rdmav*.so",
            f"copy {versions[0] if versions else 'its libmlx5.so.1.*'} to {first}/libibverbs/libmlx5-rdmav<N>.so matching "
            "that libibverbs (seed 002's fix); RDMAV_DRIVERS not set",
            "warning",
        )
        return
    prov = mine[0]
    ctx.set(
        "RDMAV_DRIVERS",
        f"{first}/libibverbs/libmlx5",
        r,
        f"libibverbs.so.1 loads from {first} first (LD_LIBRARY_PATH); its provider is {prov.dir}/{prov.name}",
    )


# -- the overlay -------------------------------------------------------------------------------
def _spec_env(ctx: RuleContext) -> None:
    for name, value in ctx.spec_env.items():
        if not isinstance(value, str):
            raise UserError(f"value of {name} must be a string, got {type(value).__name__}", field=f"env.{name}")
        known_vars.check_name(name, where="env")
        fact = "env spec [env]"
        ctx.set(name, value, "spec-env", fact)
        if name in known_vars.DEEPEP_OVERWRITES:
            ctx.note("spec-env", f"deep_ep/buffer.py: {known_vars.DEEPEP_OVERWRITES[name]}",
                     f"{name} is overwritten by DeepEP's Buffer itself: this setting has no effect inside DeepEP", "warning")
        elif known_vars.build_time_only(name):
            ctx.note("spec-env", "an NVSHMEM build option", f"{name} is read at build time only: no effect at run time", "warning")


def build_overlay(
    facts: HostFacts,
    platform: PlatformChoice | Profile | str,
    *,
    prefix: Optional[str | os.PathLike[str]] = None,
    spec_env: Optional[Mapping[str, str]] = None,
    site_dirs: Optional[Sequence[str]] = None,
    python_executable: Optional[str] = None,
    environ: Optional[Mapping[str, str]] = None,
) -> Overlay:
    """Run the profile's rules over ``facts``; then the profile's static env; then ``spec_env``
    (the env spec's ``[env]``, which wins over rules, with a note)."""
    if isinstance(platform, PlatformChoice):
        profile, source = platform.profile, platform.source
    elif isinstance(platform, Profile):
        profile, source = platform, "given"
    else:
        profile, source = get_profile(platform), "given"
    prefix_s = os.fspath(prefix) if prefix is not None else None
    if site_dirs is None:
        site_dirs = default_site_dirs(facts.root, prefix_s, python_executable, environ)
    spec = dict(spec_env or {})
    for name in spec:  # reject typos before any rule runs
        known_vars.check_name(name, where="env")
    ctx = RuleContext(facts, profile, source, prefix_s, tuple(site_dirs), spec, environ)
    for name in profile.rules:
        fn = RULES.get(name)
        if fn is None:
            raise UserError(f"profile {profile.name} names unknown rule {name!r}", file="deepep_env/platform/profiles_data.py", accepted=", ".join(RULES))
        fn(ctx)
    for name, value in profile.env.items():
        ctx.set(name, str(value), f"profile-env:{profile.name}", f"profiles_data.py PROFILES[{profile.name!r}]['env']")
    _spec_env(ctx)
    env = Overlay(profile.name, tuple(ctx.changes)).env()
    if env.get("NVSHMEM_HCA_LIST") is not None and env.get("NVSHMEM_HCA_PE_MAPPING") is not None:
        raise UserError(
            "NVSHMEM_HCA_LIST and NVSHMEM_HCA_PE_MAPPING are both set; NVSHMEM takes one or the other",
            field="env",
            accepted="at most one of NVSHMEM_HCA_LIST, NVSHMEM_HCA_PE_MAPPING",
        )
    return Overlay(profile.name, tuple(ctx.changes), tuple(ctx.notes))


# Every rule by name: this module's, DeepEP 2.x's (one NCCL per process, the JIT cache) and EFA's.
RULES: dict[str, Rule] = {**rules_of(sys.modules[__name__]), **rules_of(rules_v2), **rules_of(rules_efa)}
