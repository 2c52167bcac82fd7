"""Build a host tree (sysfs + procfs + a few files) from a compact description.

A description is plain JSON-able data: the PCIe forest with the devices on it (GPUs carry their
driver ``information``, NICs their RDMA ports and GID tables), plus loose files, directories and
symlinks. The builder lays it out the way Linux does — ``sys/devices/pci<root>/<bridge>/…/<bdf>``
with ``sys/bus/pci/devices/<bdf>`` and ``sys/class/infiniband/<hca>`` as *relative* symlinks into
it — so the probes read a fixture through exactly the code paths they use on a live host.

Used by the test fixtures (tests/fixtures/hosts/make_hosts.py) and by
:func:`deepep_env.platform.demo.materialize_demo_host` for the no-GPU demo.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from deepep_env.base.atomic import staged_dir
from deepep_env.base.errors import UserError
from deepep_env.formats.stamps import HOST_DESCRIPTION

DESCRIPTION_FORMAT = HOST_DESCRIPTION.name   # what a description writes ("format", "version": formats/stamps.py)
DESCRIPTION_VERSION = HOST_DESCRIPTION.version


def _safe_rel(rel: str) -> str:
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if rel.startswith("/") or ".." in parts or not parts:
        raise UserError(f"path {rel!r} must be relative and stay inside the tree", field="description")
    return "/".join(parts)


def _write(root: Path, rel: str, text: str) -> None:
    path = root / _safe_rel(rel)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text.endswith("\n") or text == "" else text + "\n")


def _symlink(root: Path, rel: str, target: str) -> None:
    path = root / _safe_rel(rel)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        return
    os.symlink(target, path)


def _rel_target(from_dir: str, to: str, absolute: bool = False) -> str:
    """Relative symlink text from directory ``from_dir`` to ``to`` (both relative to the root).

    With ``absolute_links`` in the description the text is ``/`` + ``to`` instead: some capture
    tools (``cp -rL`` replays, container snapshots) rewrite sysfs links as absolute paths, which
    the probes must re-root under ``--root`` rather than follow onto the machine running them.
    """
    if absolute:
        return "/" + to.strip("/")
    return os.path.relpath(to, from_dir)


def gpu_information(bdf: str, gpu: Mapping[str, Any]) -> str:
    """The text of ``proc/driver/nvidia/gpus/<bdf>/information`` as the driver prints it."""
    lines = [
        f"Model: \t\t {gpu.get('model', 'NVIDIA Graphics Device')}",
        f"IRQ:   \t\t {gpu.get('irq', 0)}",
        f"GPU UUID: \t {gpu.get('uuid', 'GPU-00000000-0000-0000-0000-000000000000')}",
        f"Video BIOS: \t {gpu.get('vbios', '00.00.00.00.00')}",
        "Bus Type: \t PCIe",
        "DMA Size: \t 52 bits",
        "DMA Mask: \t 0xfffffffffffff",
        f"Bus Location: \t {bdf}",
        f"Device Minor: \t {gpu.get('minor', 0)}",
        f"GPU Firmware: \t {gpu.get('firmware', 'N/A')}",
        "GPU Excluded:\t No",
    ]
    return "\n".join(lines) + "\n"


def _build_rdma(root: Path, dev_rel: str, rdma: Mapping[str, Any], absolute: bool = False) -> None:
    hca = rdma["hca"]
    hca_rel = f"{dev_rel}/infiniband/{hca}"
    for name, value in rdma.get("attrs", {}).items():
        _write(root, f"{hca_rel}/{name}", str(value))
    # The kernel's links: class entry → device dir; device → the PCI function (../../../<bdf>).
    _symlink(root, f"sys/class/infiniband/{hca}", _rel_target("sys/class/infiniband", hca_rel, absolute))
    if absolute:
        _symlink(root, f"{hca_rel}/device", "/" + dev_rel)
    else:
        _symlink(root, f"{hca_rel}/device", "../../../" + dev_rel.rsplit("/", 1)[-1])  # as the kernel writes it
    netdev = rdma.get("netdev")
    if netdev:
        (root / dev_rel / "net" / netdev).mkdir(parents=True, exist_ok=True)
        _write(root, f"{dev_rel}/net/{netdev}/operstate", "up")
        _symlink(root, f"sys/class/net/{netdev}", _rel_target("sys/class/net", f"{dev_rel}/net/{netdev}", absolute))
    for port in rdma.get("ports", []):
        base = f"{hca_rel}/ports/{port['port']}"
        for key in ("state", "phys_state", "link_layer", "rate"):
            if key in port and port[key] is not None:
                _write(root, f"{base}/{key}", str(port[key]))
        gids = list(port.get("gids", []))
        length = max(int(port.get("gid_tbl_len", len(gids))), len(gids))
        (root / base / "gid_attrs" / "types").mkdir(parents=True, exist_ok=True)
        (root / base / "gid_attrs" / "ndevs").mkdir(parents=True, exist_ok=True)
        (root / base / "gids").mkdir(parents=True, exist_ok=True)
        for i in range(length):
            entry = gids[i] if i < len(gids) else None
            if entry is None:
                # An unused slot: all zeros; its type/ndev files exist but refuse reads (EINVAL)
                # on a real host — here they are simply absent.
                _write(root, f"{base}/gids/{i}", "0000:0000:0000:0000:0000:0000:0000:0000")
                continue
            gid, gtype, ndev = (list(entry) + [None, None])[:3]
            _write(root, f"{base}/gids/{i}", gid)
            if gtype is not None:
                _write(root, f"{base}/gid_attrs/types/{i}", gtype)
            if ndev is not None:
                _write(root, f"{base}/gid_attrs/ndevs/{i}", ndev)
        for cname, cval in port.get("counters", {"port_xmit_data": 0, "port_rcv_data": 0}).items():
            _write(root, f"{base}/counters/{cname}", str(cval))


def _build_node(root: Path, parent_rel: str, node: Mapping[str, Any], numa: int, absolute: bool = False) -> None:
    bdf = node["bdf"].lower()
    dev_rel = f"{parent_rel}/{bdf}"
    numa = int(node.get("numa", numa))
    (root / dev_rel).mkdir(parents=True, exist_ok=True)
    attrs = {
        "vendor": node.get("vendor", "0x8086"),
        "device": node.get("device", "0x0000"),
        "class": node.get("class", "0x060400"),
        "numa_node": str(numa),
    }
    attrs.update({k: str(v) for k, v in node.get("attrs", {}).items()})
    for name, value in attrs.items():
        _write(root, f"{dev_rel}/{name}", str(value))
    _symlink(root, f"sys/bus/pci/devices/{bdf}", _rel_target("sys/bus/pci/devices", dev_rel, absolute))
    gpu = node.get("gpu")
    if gpu is not None:
        _write(root, f"proc/driver/nvidia/gpus/{bdf}/information", gpu_information(bdf, gpu))
    rdma = node.get("rdma")
    if rdma is not None:
        _build_rdma(root, dev_rel, rdma, absolute)
    for child in node.get("children", []):
        _build_node(root, dev_rel, child, numa, absolute)


def build_tree_into(desc: Mapping[str, Any], root: Path) -> Path:
    """Lay ``desc`` out under ``root`` (an existing, empty directory)."""
    root = Path(root)
    HOST_DESCRIPTION.check(desc, file=None, missing=DESCRIPTION_VERSION)
    for d in desc.get("dirs", []):
        (root / _safe_rel(d)).mkdir(parents=True, exist_ok=True)
    absolute = bool(desc.get("absolute_links", False))
    for complex_ in desc.get("pci", []):
        croot = f"sys/devices/{complex_['root']}"
        (root / croot).mkdir(parents=True, exist_ok=True)
        for node in complex_.get("devices", []):
            _build_node(root, croot, node, int(complex_.get("numa", -1)), absolute)
    if desc.get("pci"):
        (root / "sys/bus/pci/devices").mkdir(parents=True, exist_ok=True)
    for rel, text in desc.get("files", {}).items():
        _write(root, rel, text)
    for rel, target in desc.get("symlinks", {}).items():
        _symlink(root, rel, target)
    return root


def build_host_tree(desc: Mapping[str, Any], dest: str | os.PathLike[str]) -> Path:
    """Build ``desc`` at ``dest`` atomically (staged beside it, renamed into place)."""
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UserError("destination exists and is not an empty directory", file=dest)
    if dest.is_dir():
        dest.rmdir()
    with staged_dir(dest) as tmp:
        build_tree_into(desc, tmp)
    return dest
