"""Which versions go together: every compatibility rule in one table, each with its upstream source.

A rule looks at a candidate :class:`ResolvedSpec` and returns a message when the combination is
wrong. :func:`deepep_env.spec.resolve.resolve` tries candidates (highest NVSHMEM first) and keeps the
first that breaks no rule; if none passes, the first violation is the error. The facts come from
``shared/field-notes.md`` §2; the ``source`` column says where to re-check them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from deepep_env.spec.resolved import ResolvedSpec
from deepep_env.versions import version_lt, version_matches


@dataclass(frozen=True)
class Rule:
    id: str
    says: str
    source: str
    check: Callable[[ResolvedSpec], Optional[str]]
    field: str


def _sm100_cuda(r: ResolvedSpec) -> Optional[str]:
    # 10.x (B200/B300), 11.0 (Thor, called 10.1 before CUDA 13) and 12.x (RTX Blackwell) are all
    # Blackwell: nvcc below 12.8 knows none of them.
    if any(a.split(".")[0] in ("10", "11", "12") for a in r.cuda.architectures) and version_lt(r.cuda.version, "12.8"):
        return f"sm_100/sm_110/sm_120 need CUDA >= 12.8, spec has CUDA {r.cuda.version}"
    return None


def _v2_legacy_nvshmem(r: ResolvedSpec) -> Optional[str]:
    if r.deepep.engine == "v2" and not version_lt(r.nvshmem.version, "3.5.19"):
        return (f"DeepEP {r.deepep.label} (EPv2 line) legacy kernels are wrong with NVSHMEM {r.nvshmem.version} "
                ">= 3.5.19; use NVSHMEM < 3.5.19 or a V1 revision with the #564 layout fix (29d31c0)")
    return None


def _revision_nvshmem_range(r: ResolvedSpec) -> Optional[str]:
    rng = r.deepep.nvshmem_range
    if not version_matches(r.nvshmem.version, rng):
        return f"DeepEP {r.deepep.label} works with NVSHMEM {rng}, spec resolves to {r.nvshmem.version}"
    return None


def _v2_nccl(r: ResolvedSpec) -> Optional[str]:
    if r.deepep.engine != "v2":
        return None
    if version_lt(r.nccl.version, "2.30.4"):
        return f"DeepEP V2 needs NCCL >= 2.30.4 at build and run time, spec has {r.nccl.version}"
    return None


def _v2_torch(r: ResolvedSpec) -> Optional[str]:
    if r.deepep.engine == "v2" and version_lt(r.pytorch.version, "2.10"):
        return f"DeepEP V2 needs PyTorch >= 2.10, spec has {r.pytorch.version}"
    return None


def _cpu_handler_gdrcopy(r: ResolvedSpec) -> Optional[str]:
    if r.nvshmem.ibgda and r.nvshmem.nic_handler == "cpu" and not r.nvshmem.gdrcopy:
        return "NVSHMEM_IBGDA_NIC_HANDLER=cpu needs GDRCopy (nvshmem.gdrcopy = true and a [gdrcopy] version)"
    return None


def _gdrcopy_section(r: ResolvedSpec) -> Optional[str]:
    if r.nvshmem.gdrcopy and r.gdrcopy is None:
        return "nvshmem.gdrcopy = true needs a [gdrcopy] table with its version"
    return None


def _patch_gdrcopy(r: ResolvedSpec) -> Optional[str]:
    for p in r.nvshmem.patches:
        if p.pin.requires_gdrcopy and not r.nvshmem.gdrcopy:
            return f"NVSHMEM patch {p.name!r} requires GDRCopy (nvshmem.gdrcopy = true)"
    return None


def _patch_applies(r: ResolvedSpec) -> Optional[str]:
    for p in r.nvshmem.patches:
        if p.pin.applies_to and r.nvshmem.version not in p.pin.applies_to:
            return f"NVSHMEM patch {p.name!r} applies to {', '.join(p.pin.applies_to)}, not {r.nvshmem.version}"
    return None


def _aggressive_ptx(r: ResolvedSpec) -> Optional[str]:
    if r.deepep.aggressive_ptx and r.deepep.torch_cuda_arch_list != "9.0":
        return ("deepep.aggressive_ptx needs an sm_90-only build (TORCH_CUDA_ARCH_LIST exactly '9.0'), "
                f"spec builds for {r.deepep.torch_cuda_arch_list!r}")
    return None


def _torch_cuda_major(r: ResolvedSpec) -> Optional[str]:
    if r.pytorch.cuda.split(".")[0] != r.cuda.version.split(".")[0]:
        return f"PyTorch built for CUDA {r.pytorch.cuda} cannot use the CUDA {r.cuda.version} toolkit the extensions are built with"
    return None


def _required_features(r: ResolvedSpec) -> Optional[str]:
    have = set(r.deepep.features)
    for p in r.deepep.patches:
        have.update(p.pin.features)
    missing = [f for f in r.deepep.require if f not in have]
    if missing:
        return f"DeepEP {r.deepep.label} lacks {', '.join(missing)}; pick a revision or patch that provides it"
    return None


def _ibgda_handler(r: ResolvedSpec) -> Optional[str]:
    if not r.nvshmem.ibgda and r.nvshmem.nic_handler == "cpu":
        return "nvshmem.nic_handler only applies with IBGDA (nvshmem.ibgda = true)"
    return None


RULES: tuple[Rule, ...] = (
    Rule("sm100-needs-cuda-12.8", "Blackwell (sm_100/sm_120) code needs CUDA >= 12.8",
         "CUDA 12.8 release notes; field notes §1 (gcp-b200 uses 12.9)", _sm100_cuda, "cuda.version"),
    Rule("deepep-revision-nvshmem", "each DeepEP revision states the NVSHMEM versions its kernels are correct with",
         "recipes/deep-ep/sources.toml; DeepEP PR #564 (3.5.19 RC-QP layout)", _revision_nvshmem_range, "nvshmem.version"),
    Rule("deepep-v2-legacy-nvshmem-3.5.19", "EPv2-line legacy kernels are wrong with NVSHMEM >= 3.5.19",
         "deepseek-ai/DeepEP issue #764, open PR #696", _v2_legacy_nvshmem, "nvshmem.version"),
    Rule("deepep-v2-nccl", "DeepEP V2 (NCCL Gin) needs NCCL >= 2.30.4 at build and run, the same build below 2.31",
         "DeepEP EPv2 release (b306af0) README", _v2_nccl, "nccl.version"),
    Rule("deepep-v2-pytorch", "DeepEP V2 needs PyTorch >= 2.10", "DeepEP EPv2 release README", _v2_torch, "pytorch.version"),
    Rule("cpu-nic-handler-needs-gdrcopy", "the CPU NIC handler rings doorbells through GDRCopy",
         "NVSHMEM docs (NVSHMEM_IBGDA_NIC_HANDLER); seed 000 §4 problem 2", _cpu_handler_gdrcopy, "nvshmem.nic_handler"),
    Rule("nic-handler-needs-ibgda", "the NIC handler setting only exists for IBGDA",
         "NVSHMEM docs", _ibgda_handler, "nvshmem.nic_handler"),
    Rule("gdrcopy-version-given", "GDRCopy is built by us, so its version must be pinned",
         "recipes/gdrcopy/sources.toml", _gdrcopy_section, "gdrcopy"),
    Rule("nvshmem-patch-needs-gdrcopy", "DeepEP's NVSHMEM patch (3.1.7/3.2.5 line) uses GDRCopy",
         "DeepEP third-party/README.md (before EPv2)", _patch_gdrcopy, "nvshmem.patches"),
    Rule("nvshmem-patch-version", "a patch applies only to the versions it was written for",
         "recipes/nvshmem/sources.toml", _patch_applies, "nvshmem.patches"),
    Rule("aggressive-ptx-sm90-only", "DeepEP's aggressive PTX instructions are allowed only for TORCH_CUDA_ARCH_LIST=9.0",
         "DeepEP setup.py (DISABLE_AGGRESSIVE_PTX_INSTRS)", _aggressive_ptx, "deepep.aggressive_ptx"),
    Rule("pytorch-cuda-major", "PyTorch's CUDA build and the toolkit the extensions compile with share a major version",
         "PyTorch cpp_extension CUDA version check", _torch_cuda_major, "pytorch.cuda"),
    Rule("deepep-required-features", "features the spec requires (e.g. pr-466) come from the revision or a patch",
         "seed 000 §4 problem 1 (PR #466 missing from the installed module)", _required_features, "deepep.require"),
)


def violations(r: ResolvedSpec) -> list[tuple[Rule, str]]:
    out = []
    for rule in RULES:
        msg = rule.check(r)
        if msg:
            out.append((rule, msg))
    return out
