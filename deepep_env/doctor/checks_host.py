"""Families ``host`` (the machine: OFED, driver, kernel modules, ports) and ``rdma-config`` (how the
environment points NVSHMEM/DeepEP at that machine: HCA prefix and list, GPU→HCA mapping, GID index),
one check per finding id; the analyses several checks share (the OFED version, the mapping review,
the RoCE ports in use) are read once per context.

Sources: seed 000 §4 problem 3 (DOCA-OFED 3.0.0's DKMS build fails on kernel 6.14: ≥ 3.2.1),
§5 (GID table: index 3 = RoCE v2 IPv4-mapped on GCP — read per port, never assumed), field notes
§1 (``rocep*`` names without DOCA-OFED need ``NVSHMEM_HCA_PREFIX``), §3 (``NVSHMEM_HCA_LIST`` and
``NVSHMEM_HCA_PE_MAPPING`` exclude each other), DeepEP PR #466 (``DEEP_EP_DEVICE_TO_HCA_MAPPING``).
"""
from __future__ import annotations

import re
from typing import Optional

from deepep_env.platform.profiles import efa_nics
from deepep_env.doctor.context import DoctorContext, nic_names
from deepep_env.doctor.model import Evidence
from deepep_env.doctor.check import Emitter, check
from deepep_env.platform.facts import Nic, Port
from deepep_env.base.versions import version_cmp, version_matches

KERNEL_NEEDS_NEW_OFED = (6, 14)
MIN_OFED_FOR_KERNEL = "3.2.1"
NVSHMEM_DEFAULT_HCA_PREFIX = "mlx5"  # NVSHMEM opens only HCAs whose name starts with this by default

# MLNX_OFED (YY.MM) → DOCA-OFED (major.minor) it ships in, from NVIDIA's DOCA release notes; used
# only when the doca-ofed package version is not readable (RPM hosts, containers): mlx5_core's
# MODULE_VERSION then tells at least the DOCA minor release.
MLNX_TO_DOCA = {
    (24, 10): "2.9",
    (25, 1): "2.10",
    (25, 4): "3.0",
    (25, 7): "3.1",
    (25, 10): "3.2",
}

def spec_file(ctx: DoctorContext) -> str:
    return f"env_specs/{ctx.env_name}.toml [host]"


def kernel_tuple(release: Optional[str]) -> Optional[tuple[int, int]]:
    m = re.match(r"^(\d+)\.(\d+)", release or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def doca_base(version: str) -> str:
    """dpkg's ``3.2.1-104000`` → ``3.2.1``."""
    return re.split(r"[-~+]", version, 1)[0]


def mlnx_release(ctx: DoctorContext) -> tuple[Optional[tuple[int, int]], Optional[Evidence]]:
    o = ctx.host.facts.ofed
    if o.mlx5_core_version:
        m = re.match(r"^(\d+)\.(\d+)", o.mlx5_core_version)
        if m:
            return (int(m.group(1)), int(m.group(2))), Evidence(value=o.mlx5_core_version, file="/sys/module/mlx5_core/version")
    pkg = o.packages.get("mlnx-ofed-kernel-dkms")
    if pkg:
        m = re.search(r"OFED\.(\d+)\.(\d+)", pkg) or re.match(r"^(\d+)\.(\d+)", pkg)
        if m:
            return (int(m.group(1)), int(m.group(2))), Evidence(value=f"mlnx-ofed-kernel-dkms {pkg}", file="/var/lib/dpkg/status")
    return None, None


def ofed_version(ctx: DoctorContext) -> tuple[Optional[str], Optional[str], list[Evidence]]:
    """(exact DOCA version or None, DOCA minor release "3.2" or None, evidence)."""
    o = ctx.host.facts.ofed
    if o.doca_ofed:
        base = doca_base(o.doca_ofed)
        name = next((p for p in ("doca-ofed", "doca-host", "doca-roce") if o.packages.get(p) == o.doca_ofed), "doca-ofed")
        return base, ".".join(base.split(".")[:2]), [Evidence(value=f"{name} {o.doca_ofed}", file="/var/lib/dpkg/status")]
    rel, e = mlnx_release(ctx)
    if rel is None:
        return None, None, []
    doca = MLNX_TO_DOCA.get(rel)
    if doca is None:
        # Outside the table: older than its first entry → older than any 3.x; newer → newer.
        first, last = min(MLNX_TO_DOCA), max(MLNX_TO_DOCA)
        doca = "2.0" if rel < first else "99.0" if rel > last else None
    return None, doca, [e] if e else []


def _may_fail(doca_minor: str, spec: str) -> tuple[bool, bool]:
    """(surely fails, surely passes) for a DOCA minor release whose patch level is unknown."""
    lo, hi = f"{doca_minor}.0", f"{doca_minor}.9999"
    ok_lo, ok_hi = version_matches(lo, spec), version_matches(hi, spec)
    return (not ok_lo and not ok_hi), (ok_lo and ok_hi)


def installed_ofed(ctx: DoctorContext) -> tuple[Optional[str], Optional[str], list[Evidence]]:
    """:func:`ofed_version`, read once per context (the OFED checks share it)."""
    return ctx.cached("host.ofed", lambda: ofed_version(ctx))


@check("host", "host.ofed-kernel")
def ofed_builds_on_kernel(ctx: DoctorContext, emit: Emitter) -> None:
    """DOCA-OFED/MLNX_OFED ≥ 3.2.1 on kernel ≥ 6.14: older releases fail their mlx5 DKMS build (seed 000 §4 problem 3)."""
    kernel = ctx.host.facts.kernel
    kt = kernel_tuple(kernel)
    exact, minor, oev = installed_ofed(ctx)
    if kt is None or kt < KERNEL_NEEDS_NEW_OFED or not (exact or minor):
        return
    old = version_cmp(exact, MIN_OFED_FOR_KERNEL) < 0 if exact else _may_fail(minor or "", f">={MIN_OFED_FOR_KERNEL}")[0]
    if old:
        emit(
            "host.ofed-kernel",
            "error",
            f"DOCA-OFED/MLNX_OFED {exact or f'{minor}.x'} on kernel {kernel}: releases before {MIN_OFED_FOR_KERNEL} "
            "fail to build their mlx5 DKMS module on kernel ≥ 6.14 (ipsec.c pointer type, seed 000 §4 problem 3)",
            oev + [Evidence(value=kernel or "unknown", file="/proc/sys/kernel/osrelease")],
            f"install DOCA-OFED ≥ {MIN_OFED_FOR_KERNEL} (or stay on a kernel < 6.14)",
        )


@check("host", "host.ofed-version")
def ofed_matches_spec(ctx: DoctorContext, emit: Emitter) -> None:
    """The installed DOCA-OFED satisfies the env spec's ``[host].doca_ofed`` (a note when only its minor release is known)."""
    want = getattr(ctx.spec_host(), "doca_ofed", None)
    exact, minor, oev = installed_ofed(ctx)
    if not want or not (exact or minor):
        return
    fails = (not version_matches(exact, want)) if exact else _may_fail(minor or "", want)[0]
    if fails:
        emit(
            "host.ofed-version",
            "error",
            f"DOCA-OFED {exact or f'{minor}.x'} does not satisfy the env spec's doca_ofed {want}",
            oev + [Evidence(value=f"doca_ofed = {want!r}", file=spec_file(ctx))],
            f"install DOCA-OFED {want}",
        )
    elif not exact and not _may_fail(minor or "", want)[1]:
        ctx.notes.append(f"DOCA-OFED {minor}.x (from mlx5_core): cannot tell whether it satisfies {want}")


@check("host", "host.ofed-unknown")
def ofed_version_readable(ctx: DoctorContext, emit: Emitter) -> None:
    """Where the env spec needs a DOCA-OFED and the host has RDMA NICs, its version is readable."""
    want = getattr(ctx.spec_host(), "doca_ofed", None)
    exact, minor, _ = installed_ofed(ctx)
    if want and not (exact or minor) and ctx.host.facts.nics:
        emit(
            "host.ofed-unknown",
            "warning",
            f"the env spec needs DOCA-OFED {want} but no DOCA/MLNX_OFED version is readable "
            "(no doca-ofed package in /var/lib/dpkg/status, no /sys/module/mlx5_core/version)",
            [Evidence(value="absent", file="/var/lib/dpkg/status"), Evidence(value="absent", file="/sys/module/mlx5_core/version"),
             Evidence(value=f"doca_ofed = {want!r}", file=spec_file(ctx))],
            f"install DOCA-OFED {want} (the inbox mlx5 driver reports no version)",
        )


@check("host", "host.driver-version")
def driver_matches_spec(ctx: DoctorContext, emit: Emitter) -> None:
    """The NVIDIA driver version satisfies the env spec's ``[host].driver``."""
    want = getattr(ctx.spec_host(), "driver", None)
    v = ctx.host.facts.driver.version
    if want and ctx.host.facts.gpus and v is not None and not version_matches(v, want):
        emit(
            "host.driver-version",
            "error",
            f"NVIDIA driver {v} does not satisfy the env spec's driver {want}",
            [Evidence(value=v, file="/proc/driver/nvidia/version"), Evidence(value=f"driver = {want!r}", file=spec_file(ctx))],
            f"install NVIDIA driver {want}",
        )


@check("host", "host.driver-unknown")
def driver_version_readable(ctx: DoctorContext, emit: Emitter) -> None:
    """Where the env spec needs an NVIDIA driver version and the host has GPUs, the version is readable."""
    want = getattr(ctx.spec_host(), "driver", None)
    if want and ctx.host.facts.gpus and ctx.host.facts.driver.version is None:
        emit(
            "host.driver-unknown",
            "warning",
            f"the env spec needs NVIDIA driver {want} but the driver version is not readable",
            [Evidence(value="absent or unreadable", file="/proc/driver/nvidia/version")],
            "run doctor where /proc/driver/nvidia is visible, or load the NVIDIA driver",
        )


def missing_modules(ctx: DoctorContext) -> list[tuple[str, str, Evidence]]:
    """(module, severity, why wanted) for each wanted kernel module that is not loaded: the spec's
    ``[host].kernel_modules`` (error), ``nvidia_peermem`` on a GPU host with RDMA NICs (warning).
    Empty when /proc/modules could not be read."""
    facts = ctx.host.facts
    modules_known = bool(facts.modules) or not any(w.startswith("proc/modules") for w in facts.warnings)
    if not modules_known:
        return []
    spec_modules = list(getattr(ctx.spec_host(), "kernel_modules", []) or [])
    wanted: dict[str, tuple[str, Evidence]] = {}
    for m in spec_modules:
        wanted[m] = ("error", Evidence(value=f"kernel_modules = {spec_modules}", file=spec_file(ctx)))
    # EFA's driver reaches GPU memory through NVIDIA's p2p API itself (no nvidia_peermem): only non-EFA NICs ask for it.
    if (facts.gpus and facts.usable_nics() and not only_efa(ctx) and "nvidia_peermem" not in wanted
            and ctx.host.platform.name not in ("nvlink", "none")):
        wanted["nvidia_peermem"] = (
            "warning",
            Evidence(value=f"{len(facts.usable_nics())} RDMA NIC(s) with an ACTIVE port: {nic_names(facts.usable_nics())}", file="/sys/class/infiniband"),
        )
    return [(m, sev, why) for m, (sev, why) in wanted.items() if not facts.module_loaded(m)]


def _emit_module_missing(ctx: DoctorContext, emit: Emitter, id: str, m: str, sev: str, why: Evidence) -> None:
    loaded = ", ".join(x for x in ctx.host.facts.modules if x.startswith(("nvidia", "mlx5", "ib_"))) or "none of nvidia*/mlx5*/ib_*"
    emit(
        id,
        sev,
        f"kernel module {m} is not loaded"
        + (": GPUDirect RDMA (NIC ↔ GPU memory) falls back or fails without it" if m == "nvidia_peermem" else ""),
        [Evidence(value=f"no {m}; loaded: {loaded}", file="/proc/modules"), why],
        f"`modprobe {m}` (and list it in /etc/modules-load.d/ so it loads at boot)",
    )


@check("host", "host.peermem-missing")
def peermem_loaded(ctx: DoctorContext, emit: Emitter) -> None:
    """nvidia_peermem is loaded where the spec lists it (error) or GPUs sit beside ACTIVE RDMA NICs (warning)."""
    for m, sev, why in missing_modules(ctx):
        if m == "nvidia_peermem":
            _emit_module_missing(ctx, emit, "host.peermem-missing", m, sev, why)


@check("host", "host.module-missing")
def spec_modules_loaded(ctx: DoctorContext, emit: Emitter) -> None:
    """Every other kernel module the env spec's ``[host].kernel_modules`` lists is loaded."""
    for m, sev, why in missing_modules(ctx):
        if m != "nvidia_peermem":
            _emit_module_missing(ctx, emit, "host.module-missing", m, sev, why)


# The NICs a platform's detection requires (profiles_data.py ``match.fabric``), as a reader names them.
FABRIC_NICS = {
    "rdma": "RDMA NICs (RoCE or InfiniBand ports under /sys/class/infiniband, e.g. mlx5_0 or mlx5_bond_0)",
    "infiniband": "InfiniBand NICs (ports with link layer InfiniBand under /sys/class/infiniband)",
    "efa": "AWS EFA devices (rdmap* under /sys/class/infiniband)",
}


@check("host", "host.no-rdma-nic")
def platform_has_nics(ctx: DoctorContext, emit: Emitter) -> None:
    """A platform that runs over RDMA (its profile matches only hosts with RDMA NICs) has some."""
    profile = ctx.host.platform.profile
    fabric = profile.match.fabric if profile.match is not None else None
    if fabric not in FABRIC_NICS or ctx.host.facts.nics or not ctx.host.facts.gpus:
        return
    if (ctx.env.get("NVSHMEM_REMOTE_TRANSPORT") or "").strip().lower() == "none":
        return  # remote transport turned off: a single-node run on purpose
    emit(
        "host.no-rdma-nic",
        "error",
        f"platform {profile.name} ({ctx.host.platform.source}) runs internode traffic over "
        f"{FABRIC_NICS[fabric]}, but this host has 0 RDMA NICs: NVSHMEM's IBGDA transport fails to init "
        f"(expected: {profile.description})",
        [Evidence(value="no RDMA device", file="/sys/class/infiniband"),
         Evidence(value=f"platform {profile.name}: match fabric = {fabric!r}", file="deepep_env/platform/profiles_data.py")],
        "check the NIC driver (`lsmod | grep -e mlx5_ib -e ib_uverbs`, `ibv_devices`) or the pod's RDMA device "
        "plugin; on a single NVLink node use --platform nvlink (or NVSHMEM_REMOTE_TRANSPORT=none)",
    )


@check("host", "host.port-down")
def rdma_ports_up(ctx: DoctorContext, emit: Emitter) -> None:
    """Every RDMA port is ACTIVE (a port in an unreadable state is a partial fact, not a finding)."""
    for n in ctx.host.facts.nics:
        for p in n.ports:
            if p.active or p.state is None:
                continue  # an unreadable state is a partial fact (a note), not evidence of a dead port
            emit(
                "host.port-down",
                "error",
                f"{n.hca} port {p.number} is {p.state or 'in an unknown state'}"
                + (f" ({p.phys_state})" if p.phys_state else "")
                + ": it carries no traffic, and the GPUs nearest to it are mapped to a farther NIC",
                [Evidence(value=p.state or "unreadable", file=f"/sys/class/infiniband/{n.hca}/ports/{p.number}/state"),
                 Evidence(value=p.phys_state or "unreadable", file=f"/sys/class/infiniband/{n.hca}/ports/{p.number}/phys_state")],
                f"bring the link up (cable, switch port, `ip link set {n.netdevs[0] if n.netdevs else '<netdev>'} up`), "
                "then re-run doctor; the overlay's GPU→HCA mapping leaves this NIC out until then",
            )


# -- rdma-config -------------------------------------------------------------------------------------
def parse_mapping(value: str) -> tuple[list[tuple[int, str, Optional[int]]], list[str]]:
    """``0:mlx5_0:1,1:mlx5_1:1`` (DeepEP PR #466) → [(0, mlx5_0, 1), …], unparsable items."""
    out, bad = [], []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        parts = item.split(":")
        try:
            idx = int(parts[0])
            hca = parts[1]
            port = int(parts[2]) if len(parts) > 2 and parts[2] else None
            if not hca or len(parts) > 3:
                raise ValueError
            out.append((idx, hca, port))
        except (ValueError, IndexError):
            bad.append(item)
    return out, bad


def parse_hca_list(value: str) -> tuple[bool, list[tuple[str, Optional[int]]]]:
    """NVSHMEM_HCA_LIST ``[^|=]mlx5_0[:1],mlx5_1`` → (exclude, [(name, port)])."""
    v = value.strip()
    exclude = v.startswith("^")
    v = v.lstrip("^=")
    out = []
    for item in v.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, port = item.partition(":")
        try:
            out.append((name, int(port) if port else None))
        except ValueError:
            out.append((name, None))
    return exclude, out


def _port(nic: Optional[Nic], number: Optional[int]) -> Optional[Port]:
    if nic is None:
        return None
    if number is None:
        return next(iter(nic.usable_ports()), None)
    return next((p for p in nic.ports if p.number == number), None)


def ports_in_use(ctx: DoctorContext) -> list[tuple[Nic, Port]]:
    """The RDMA ports NVSHMEM will use: the GPU→HCA mapping's, else the ACTIVE ports of the NICs
    the HCA list/prefix selects."""
    f = ctx.host.facts
    out: list[tuple[Nic, Port]] = []
    seen = set()
    mapping = ctx.env.get("DEEP_EP_DEVICE_TO_HCA_MAPPING")
    if mapping:
        entries, _ = parse_mapping(mapping)
        for _, hca, num in entries:
            nic = f.nic(hca)
            p = _port(nic, num)
            if nic and p and (hca, p.number) not in seen:
                seen.add((hca, p.number))
                out.append((nic, p))
        if out:
            return out
    # No explicit mapping: the NICs nearest the GPUs (what NVSHMEM picks per PE, and what the
    # overlay maps), not a management NIC on the CPU's root complex (the h20-roce fixture has one).
    near = {e.hca for e in f.affinity if e.hca}
    nics = [n for n in f.usable_nics() if n.hca in near] or list(f.usable_nics())
    hl = ctx.env.get("NVSHMEM_HCA_LIST")
    if hl:
        exclude, items = parse_hca_list(hl)
        names = {n for n, _ in items}
        chosen = [n for n in nics if (n.hca in names) != exclude]
    else:
        prefix = ctx.env.get("NVSHMEM_HCA_PREFIX") or NVSHMEM_DEFAULT_HCA_PREFIX
        chosen = [n for n in nics if n.hca.startswith(prefix)]
    # A prefix/list that selects nothing is its own finding (host.hca-prefix / host.hca-list);
    # it must not hide a bad GID index behind it: once the prefix is fixed (mlx5 → rocep, field
    # notes §1) those very ports are the ones in use, and NCCL ignores NVSHMEM's prefix anyway.
    nics = chosen or nics
    return [(n, p) for n in nics for p in n.usable_ports()]


def only_efa(ctx: DoctorContext) -> bool:
    """Every usable RDMA device is AWS EFA: NVSHMEM's IB transports, HCA names and GIDs do not apply."""
    usable = ctx.host.facts.usable_nics()
    return bool(usable) and len(efa_nics(ctx.host.facts)) == len(usable)


def rdma_checked(ctx: DoctorContext) -> bool:
    """Whether the rdma-config checks apply: the host has RDMA NICs (not EFA's) and a remote transport matters."""
    return bool(ctx.host.facts.nics) and ctx.rdma_relevant() and not only_efa(ctx)


def devices_evidence(ctx: DoctorContext) -> Evidence:
    """The RDMA devices sysfs shows and whether each has an ACTIVE port."""
    return Evidence(value=", ".join(f"{n.hca} ({'ACTIVE' if n.active_ports() else 'no ACTIVE port'})" for n in ctx.host.facts.nics[:16]),
                    file="/sys/class/infiniband")


@check("rdma-config", "host.hca-prefix", current_env_too=True)
def hca_prefix_matches(ctx: DoctorContext, emit: Emitter) -> None:
    """NVSHMEM_HCA_PREFIX (default mlx5) matches an RDMA device: ``rocep*`` names need it set (field notes §1)."""
    if not rdma_checked(ctx):
        return
    usable = ctx.host.facts.usable_nics()
    pname = "NVSHMEM_HCA_PREFIX"
    prefix = ctx.env.get(pname)
    effective_prefix = prefix or NVSHMEM_DEFAULT_HCA_PREFIX
    if not usable or ctx.env.get("NVSHMEM_HCA_LIST") or any(n.hca.startswith(effective_prefix) for n in usable):
        return
    families = sorted({re.sub(r"(_\d+|\d.*)$", "", n.hca) for n in usable})
    pev = ctx.env.evidence(pname) if prefix else Evidence(value=f"unset: NVSHMEM's default {NVSHMEM_DEFAULT_HCA_PREFIX!r}", var=pname, source="not set")
    emit(
        "host.hca-prefix",
        "error",
        f"{pname}={effective_prefix!r} matches none of the RDMA devices ({nic_names(usable)}): NVSHMEM finds no NIC "
        "(mlx5 vs rocep naming, field notes §1)",
        [pev, devices_evidence(ctx)],
        f"set {pname}={families[0] if len(families) == 1 else '<the common prefix>'}" + ctx.overlay_hint(pname),
    )


@check("rdma-config", "host.hca-list", current_env_too=True)
def hca_list_exists(ctx: DoctorContext, emit: Emitter) -> None:
    """NVSHMEM_HCA_LIST names only devices that exist and ports that are ACTIVE."""
    f = ctx.host.facts
    hl = ctx.env.get("NVSHMEM_HCA_LIST")
    if not rdma_checked(ctx) or not hl:
        return
    all_names = [n.hca for n in f.nics]
    _, items = parse_hca_list(hl)
    missing = [n for n, _ in items if n not in all_names]
    down = [f"{n}:{p}" for n, p in items if n in all_names and p is not None and not ((pp := _port(f.nic(n), p)) and pp.usable)]
    if missing or down:
        emit(
            "host.hca-list",
            "error",
            "NVSHMEM_HCA_LIST names " + ", ".join(
                ([f"device(s) that do not exist: {', '.join(missing)}"] if missing else [])
                + ([f"port(s) not ACTIVE: {', '.join(down)}"] if down else [])),
            [ctx.env.evidence("NVSHMEM_HCA_LIST"), devices_evidence(ctx)],
            "name devices and ports from /sys/class/infiniband (`deepep-env detect` lists them), or unset it and let "
            "DEEP_EP_DEVICE_TO_HCA_MAPPING choose per GPU",
        )


@check("rdma-config", "host.hca-list-and-pe-mapping", current_env_too=True)
def hca_list_or_pe_mapping(ctx: DoctorContext, emit: Emitter) -> None:
    """NVSHMEM_HCA_LIST and NVSHMEM_HCA_PE_MAPPING are not both set: NVSHMEM takes one or the other (field notes §3)."""
    if rdma_checked(ctx) and ctx.env.get("NVSHMEM_HCA_LIST") and ctx.env.get("NVSHMEM_HCA_PE_MAPPING"):
        emit(
            "host.hca-list-and-pe-mapping",
            "error",
            "NVSHMEM_HCA_LIST and NVSHMEM_HCA_PE_MAPPING are both set: NVSHMEM takes one or the other (field notes §3)",
            [ctx.env.evidence("NVSHMEM_HCA_LIST"), ctx.env.evidence("NVSHMEM_HCA_PE_MAPPING")],
            "unset one of them",
        )


MAPPING = "DEEP_EP_DEVICE_TO_HCA_MAPPING"
_LEVELS = ("PIX", "PXB", "PHB", "NODE", "SYS")  # PCIe distance, nearest first (nvidia-smi topo)


def _level_rank(level: str) -> int:
    return _LEVELS.index(level) if level in _LEVELS else len(_LEVELS)


def mapping_review(ctx: DoctorContext) -> tuple[list[str], list[str]]:
    """DEEP_EP_DEVICE_TO_HCA_MAPPING (DeepEP PR #466) against this host: (what does not match, GPUs
    sent to a NODE/SYS NIC while a nearer one exists); both empty when it is unset. Once per context."""
    return ctx.cached("rdma-config.mapping", lambda: _mapping_review(ctx))


def _mapping_review(ctx: DoctorContext) -> tuple[list[str], list[str]]:
    f = ctx.host.facts
    mval = ctx.env.get(MAPPING)
    if not mval:
        return [], []
    entries, bad = parse_mapping(mval)
    problems = [f"unparsable {b!r}" for b in bad]
    usable = f.usable_nics()
    gpus = {g.cuda_index: g for g in f.gpus}
    far = []
    for idx, hca, num in entries:
        nic = f.nic(hca)
        if f.gpus and idx not in gpus:
            problems.append(f"GPU {idx} does not exist ({len(f.gpus)} GPUs)")
        if nic is None:
            problems.append(f"{hca} does not exist")
            continue
        p = _port(nic, num)
        if p is None:
            problems.append(f"{hca} has no port {num}")
        elif not p.usable:
            problems.append(f"{hca} port {p.number} is {p.state or 'not ACTIVE'}")
        g = gpus.get(idx)
        if g is not None:
            levels = f.topology.get(g.bdf, {})
            lvl = levels.get(hca)
            best = min((levels[n.hca] for n in usable if n.hca in levels), key=_level_rank, default=None)
            if lvl and best and _level_rank(lvl) > _level_rank(best) and _level_rank(lvl) >= _level_rank("NODE"):
                far.append(f"GPU{idx}→{hca} is {lvl} (a {best} NIC exists)")
    return problems, far


@check("rdma-config", "host.hca-mapping", current_env_too=True)
def hca_mapping_matches_host(ctx: DoctorContext, emit: Emitter) -> None:
    """DEEP_EP_DEVICE_TO_HCA_MAPPING (DeepEP PR #466) names GPUs and NICs that exist and ports that are ACTIVE."""
    if not rdma_checked(ctx):
        return
    problems, _ = mapping_review(ctx)
    if problems:
        emit(
            "host.hca-mapping",
            "error",
            f"{MAPPING} does not match this host: " + "; ".join(problems[:8]),
            [ctx.env.evidence(MAPPING), devices_evidence(ctx)],
            "remove it and let the overlay compute it from PCIe topology" + (ctx.overlay_hint(MAPPING) if not ctx.overlay_applied else ""),
        )


@check("rdma-config", "host.hca-mapping-far", current_env_too=True)
def hca_mapping_near(ctx: DoctorContext, emit: Emitter) -> None:
    """DEEP_EP_DEVICE_TO_HCA_MAPPING sends no GPU across the socket (NODE/SYS) while a PIX/PXB NIC exists."""
    if not rdma_checked(ctx):
        return
    _, far = mapping_review(ctx)
    if far:
        emit(
            "host.hca-mapping-far",
            "warning",
            f"{MAPPING} sends GPUs to far NICs: " + "; ".join(far[:8]),
            [ctx.env.evidence(MAPPING), Evidence(value="; ".join(far[:8]), file="PCIe topology (/sys/devices/pci*)")],
            "map each GPU to a NIC behind its own PCIe switch (`deepep-env detect` shows the nearest)" + ctx.overlay_hint(MAPPING),
        )


GID_VARS = ("NVSHMEM_IB_GID_INDEX", "NCCL_IB_GID_INDEX")


def roce_ports_in_use(ctx: DoctorContext) -> list[tuple[Nic, Port]]:
    """The ports in use that are RoCE (InfiniBand addresses by LID and needs no GID index); none when
    the RDMA configuration is not checked here. Once per context."""
    if not rdma_checked(ctx):
        return []
    return ctx.cached("rdma-config.roce-ports", lambda: _roce_ports(ctx))


def _roce_ports(ctx: DoctorContext) -> list[tuple[Nic, Port]]:
    return [(n, p) for n, p in ports_in_use(ctx) if p.is_ethernet or (p.link_layer is None and any(g.type for g in p.gids))]


def _gid_failures(ctx: DoctorContext, roce: list[tuple[Nic, Port]], var: str, idx: int) -> tuple[list[str], list[Evidence]]:
    """The RoCE ports whose GID ``idx`` is not RoCE v2 + IPv4-mapped, and the evidence (``var`` first)."""
    failing = []
    evs = [ctx.env.evidence(var)]
    for n, p in roce:
        g = next((x for x in p.gids if x.index == idx), None)
        base = f"/sys/class/infiniband/{n.hca}/ports/{p.number}"
        if g is None:
            failing.append(f"{n.hca}:{p.number} (no GID at index {idx})")
            evs.append(Evidence(value="empty (all zeros) or absent", file=f"{base}/gids/{idx}"))
        elif not (g.is_roce_v2 and g.ipv4):
            what = f"{g.type or 'unknown type'}" + ("" if g.ipv4 else ", not IPv4-mapped")
            failing.append(f"{n.hca}:{p.number} ({what})")
            evs.append(Evidence(value=f"{g.type or 'unreadable'}; gid {g.gid}", file=f"{base}/gid_attrs/types/{idx}"))
    return failing, evs


@check("rdma-config", "host.gid-index", current_env_too=True)
def gid_index_rocev2(ctx: DoctorContext, emit: Emitter) -> None:
    """NVSHMEM_IB_GID_INDEX / NCCL_IB_GID_INDEX is a RoCE v2 IPv4-mapped GID on every RoCE port in use (seed 000 §5)."""
    roce = roce_ports_in_use(ctx)
    if not roce:
        return
    f = ctx.host.facts
    common = f.gid.index if f.gid.status == "ok" else None
    for var in GID_VARS:
        raw = ctx.env.get(var)
        if raw is None or raw.strip() == "":
            continue
        try:
            idx = int(raw.strip(), 0)
        except ValueError:
            emit("host.gid-index", "error", f"{var}={raw!r} is not a number", [ctx.env.evidence(var)], f"set {var} to a GID index (integer)")
            continue
        failing, evs = _gid_failures(ctx, roce, var, idx)
        if failing:
            fix = (f"set {var}={common}: RoCE v2 + IPv4-mapped on every port in use" if common is not None
                   else "give every RoCE port an IPv4 address (so a RoCE v2 IPv4-mapped GID appears), then use the index they share")
            emit(
                "host.gid-index",
                "error",
                f"{var}={idx} is not a RoCE v2 IPv4-mapped GID on "
                + ", ".join(failing[:8]) + (f" and {len(failing) - 8} more" if len(failing) > 8 else "")
                + ": cross-node RoCE traffic does not route (seed 000 §5)",
                evs[:10],
                fix,
            )


@check("rdma-config", "host.gid-no-rocev2", current_env_too=True)
def rocev2_gid_present(ctx: DoctorContext, emit: Emitter) -> None:
    """With no GID index set, every RoCE port in use has a RoCE v2 IPv4-mapped GID (seed 000 §5)."""
    if any((ctx.env.get(var) or "").strip() for var in GID_VARS):
        return  # an index is set: host.gid-index checks it
    roce = roce_ports_in_use(ctx)
    lacking = [(n, p) for n, p in roce if not any(g.is_roce_v2 and g.ipv4 for g in p.gids)]
    if lacking:
        emit(
            "host.gid-no-rocev2",
            "error",
            "no RoCE v2 IPv4-mapped GID on " + ", ".join(f"{n.hca}:{p.number}" for n, p in lacking[:8])
            + ": these ports cannot carry cross-node RoCE v2 traffic",
            [Evidence(value=", ".join(f"{g.index}={g.type}" + ("/IPv4" if g.ipv4 else "") for g in p.gids) or "no GIDs",
                      file=f"/sys/class/infiniband/{n.hca}/ports/{p.number}/gid_attrs/types") for n, p in lacking[:6]],
            "configure an IPv4 address on each RDMA netdev (RoCE v2 GIDs follow the IP addresses), then re-run doctor",
        )
