"""The GPUs the project knows, as data: the one place GPU knowledge lives (issue 41.2).

Read by the probes (a model name from the PCI device id when the driver's ``information`` file is
absent), by platform choice (a profile's ``gpu_models`` are names of this table, and a host GPU is
one of them by its model name or its PCI id) and by the spec rules (the CUDA an architecture family
needs: envspec/rules.py ``sm100-needs-cuda-12.8``). A new GPU is a new row here
(docs/architecture.md "How to add a GPU").

Stdlib only and data only: `activate` imports it (through the profiles) on every new shell.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

# The first CUDA toolkit whose nvcc compiles an architecture family (the major of its compute
# capability), where the project enforces one. 10.x (B200/B300), 11.0 (Thor, called 10.1 before
# CUDA 13) and 12.x (RTX Blackwell) are all Blackwell: nvcc below 12.8 knows none of them (CUDA 12.8
# release notes). Hopper (9.x) has no entry: every CUDA a spec may name (12.x, 13.x) compiles it.
ARCH_MIN_CUDA: dict[str, str] = {"10": "12.8", "11": "12.8", "12": "12.8"}


class GpuModel(NamedTuple):
    name: str
    """The word a driver's model name holds (``NVIDIA B200`` → ``B200``) and profiles' ``gpu_models`` name."""
    pci_ids: tuple[str, ...]
    """PCI device ids (vendor 0x10de), lowercase ``0x…``; source: the PCI ID database."""
    pci_name: Optional[str]
    """The model name the probes record from the PCI id when the driver says nothing."""
    sm: str
    """Compute capability (``TORCH_CUDA_ARCH_LIST`` / ``cuda.architectures`` form): ``9.0``, ``10.0``."""

    @property
    def min_cuda(self) -> Optional[str]:
        """The first CUDA that compiles for it, where the project records one (:data:`ARCH_MIN_CUDA`)."""
        return ARCH_MIN_CUDA.get(self.sm.split(".")[0])


# Order matters only for a model name holding two table words (none does today).
GPUS: tuple[GpuModel, ...] = (
    GpuModel("H100", ("0x2330",), "NVIDIA H100 80GB HBM3", "9.0"),
    GpuModel("H800", ("0x2324",), "NVIDIA H800", "9.0"),
    GpuModel("H20", ("0x2329",), "NVIDIA H20", "9.0"),
    GpuModel("H200", ("0x2335",), "NVIDIA H200", "9.0"),
    GpuModel("B200", ("0x2901",), "NVIDIA B200", "10.0"),
    GpuModel("GB200", ("0x2941",), "NVIDIA GB200", "10.0"),
    GpuModel("B300", (), None, "10.3"),   # no PCI id recorded yet: known by the driver's model name only
)


def by_name() -> dict[str, GpuModel]:
    """name → row (the table is read at call time, so a test may extend :data:`GPUS`)."""
    return {g.name: g for g in GPUS}


def pci_models() -> dict[str, str]:
    """PCI device id → model name, for a GPU whose driver gives none."""
    return {pid: g.pci_name for g in GPUS if g.pci_name for pid in g.pci_ids}


def model_words(model: Optional[str]) -> list[str]:
    """The words of a model name, upper case: "NVIDIA B200" vs "NVIDIA GB200" match whole words, so
    B200 never matches GB200."""
    return (model or "").upper().replace("-", " ").split()


def identify(model: Optional[str], device_id: Optional[str]) -> Optional[GpuModel]:
    """The table's row for a GPU: by a word of its model name (what the driver says wins), else by
    its PCI device id; None for a GPU the table does not know."""
    words = model_words(model)
    for g in GPUS:
        if g.name.upper() in words:
            return g
    did = (device_id or "").lower()
    return next((g for g in GPUS if did and did in g.pci_ids), None)
