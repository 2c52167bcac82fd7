"""Which versions go together: every compatibility rule in one table, each with its upstream source.

A rule looks at a candidate :class:`ResolvedSpec` and returns a message when the combination is
wrong. :func:`deepep_env.envspec.resolve.resolve` tries candidates (highest NVSHMEM first) and keeps the
first that breaks no rule; if none passes, the first violation is the error. The facts come from
``shared/field-notes.md`` §2; the ``source`` column says where to re-check them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from deepep_env.envspec.resolved import ResolvedSpec
from deepep_env.base.engines import engine_only_rules
from deepep_env.base.versions import version_lt, version_matches
from deepep_env.platform.gpus import ARCH_MIN_CUDA
from deepep_env.envspec.torch_wheels import CATALOG as CATALOG_TORCH, built_for, nccl_wheel


@dataclass(frozen=True)
class Rule:
    id: str
    says: str
    source: str
    check: Callable[[ResolvedSpec], Optional[str]]
    field: str


def _sm100_cuda(r: ResolvedSpec) -> Optional[str]:
    # The CUDA each architecture family needs is the GPU table's (platform/gpus.py ARCH_MIN_CUDA):
    # 10.x (B200/B300), 11.0 (Thor) and 12.x (RTX Blackwell) are all Blackwell, unknown to nvcc < 12.8.
    need = [ARCH_MIN_CUDA[m] for m in {a.split(".")[0] for a in r.cuda.architectures} if m in ARCH_MIN_CUDA]
    floor = None
    for v in need:
        floor = v if floor is None or version_lt(floor, v) else floor
    if floor and version_lt(r.cuda.version, floor):
        families = "/".join(f"sm_{m}0" for m, v in sorted(ARCH_MIN_CUDA.items(), key=lambda kv: int(kv[0])) if v == floor)
        return f"{families} need CUDA >= {floor}, spec has CUDA {r.cuda.version}"
    return None


LAYOUT_FEATURE = "nvshmem-3.5-layout"  # the revision or a patch handles NVSHMEM 3.5.19's RC-QP layout (#564, PR #696)


def _features(r: ResolvedSpec) -> set[str]:
    have = set(r.deepep.features)
    for p in r.deepep.patches:
        have.update(p.pin.features)
    return have


def _lacks_layout_fix(r: ResolvedSpec) -> bool:
    """NVSHMEM >= 3.5.19 (the new RC-QP layout) without a revision or patch that handles it."""
    return not version_lt(r.nvshmem.version, "3.5.19") and LAYOUT_FEATURE not in _features(r)


def _v2_legacy_nvshmem(r: ResolvedSpec) -> Optional[str]:
    if _lacks_layout_fix(r):
        return (f"DeepEP {r.deepep.label} (EPv2 line) legacy kernels are wrong with NVSHMEM {r.nvshmem.version} "
                ">= 3.5.19 (deepseek-ai/DeepEP #707, #764: the #564 fix was lost in V2); use NVSHMEM < 3.5.19, a V1 "
                "revision with the #564 layout fix (29d31c0), or a patch with feature 'nvshmem-3.5-layout' (PR #696: "
                "deepep.patches = [\"deepep-pr696-nvshmem-rc-qp\"])")
    return None


def _v1_legacy_layout(r: ResolvedSpec) -> Optional[str]:
    # NVSHMEM 3.5.21 release notes, Known Issues: "The internal layout of RC-connected QPs changed starting in
    # 3.5.19 causing ABI compatibility breakage when enabling IBGDA". V1 kernels before #564 time out
    # (dispatch CPU), hang in notify_dispatch or fault (DeepEP #553, #707, #764).
    if _lacks_layout_fix(r):
        return (f"DeepEP {r.deepep.label} V1 kernels use the pre-3.5.19 RC-QP layout, NVSHMEM {r.nvshmem.version} "
                "changed it: internode dispatch times out, hangs or faults (deepseek-ai/DeepEP #553, #707, #764); use "
                "NVSHMEM <= 3.4.5 or a revision/patch with feature 'nvshmem-3.5-layout' (#564, PR #696)")
    return None


# What pip's torch wheels pin exactly (shared/research/2026-11-landscape.md §5: DeepEP #710, aws DLC #6467,
# vLLM PR #58159), and what PyPI's x86-64 wheels' METADATA says (torch-2.10.0-cp312 and -2.11.0-cp312,
# Requires-Dist read 2026-11-27: 2.10.0 → nvidia-cuda-runtime-cu12==12.8.90, nvidia-nccl-cu12==2.27.5,
# nvidia-nvshmem-cu12==3.4.5; 2.11.0 → nvidia-nccl-cu13==2.28.9, nvidia-nvshmem-cu13==3.4.5). "cuda": the
# CUDA minor PyPI's build is for; other builds (+cu129, …) are on download.pytorch.org only. A torch not
# listed is not judged.
TORCH_PIP_PINS = {
    "2.10": {"nccl": "2.27.5", "nvshmem": "3.4.5", "cuda": "12.8"},
    "2.11": {"nccl": "2.28.9", "nvshmem": "3.4.5"},
    "2.13": {"nccl": "2.29.7"},
    "2.15": {"nvshmem": "3.7"},
}


def _torch_pin(r: ResolvedSpec, what: str) -> Optional[str]:
    if r.pytorch.provider not in ("pip", "host"):
        return None
    return TORCH_PIP_PINS.get(".".join(r.pytorch.version.split(".")[:2]), {}).get(what)


def _torch_nccl_pin(r: ResolvedSpec) -> Optional[str]:
    # nccl.provider 'pip' is the host Python's nvidia-nccl wheel, the one torch pins: the next pip resolve
    # puts torch's pin back (DeepEP #710), below what DeepEP V2 was built against.
    # Only where the env resolves PyTorch from PyPI (provider 'pip'); a host venv is as it is, and doctor's
    # deepep-v2.nccl-downgraded checks what it loads.
    pin = _torch_pin(r, "nccl") if r.pytorch.provider == "pip" else None
    if r.nccl.provider == "pip" and pin and version_lt(pin, r.nccl.version):
        return (f"PyTorch {r.pytorch.version} pins nvidia-nccl =={pin} exactly: pip silently downgrades the NCCL "
                f"{r.nccl.version} DeepEP {r.deepep.label} is built against (`undefined symbol: ncclGetLsaDevicePointer`, "
                "deepseek-ai/DeepEP #710); use nccl.provider 'source' or 'conda' (the env's own NCCL, preloaded by "
                "`deepep-env run`)")
    return None


def _torch_nvshmem_pin(r: ResolvedSpec) -> Optional[str]:
    # One NVSHMEM per process: torch 2.15's wheel brings NVSHMEM 3.7 (vLLM PR #58159); DeepEP's NVSHMEM of the
    # other layout class next to it is the cross-layout pair PR #696's runtime check refuses.
    pin = _torch_pin(r, "nvshmem")
    if pin and version_lt(r.nvshmem.version, "3.5.19") and not version_lt(pin, "3.5.19"):
        return (f"PyTorch {r.pytorch.version} pins NVSHMEM {pin} (>= 3.5.19 RC-QP layout), the env's NVSHMEM "
                f"{r.nvshmem.version} is of the older layout: one process cannot load both (vLLM PR #58159, "
                "DeepEP PR #696); use NVSHMEM >= 3.5.19 with the layout fix, or PyTorch < 2.15")
    return None


def _torch_pip_cuda(r: ResolvedSpec) -> Optional[str]:
    # PyPI has one CUDA build per torch release; a spec naming another would get PyPI's silently.
    pin = _torch_pin(r, "cuda") if r.pytorch.provider == "pip" else None
    if pin and r.pytorch.cuda and ".".join(r.pytorch.cuda.split(".")[:2]) != pin:
        return (f"PyPI's torch {r.pytorch.version} is built for CUDA {pin} (its wheel requires nvidia-cuda-runtime "
                f"{pin}.*), not {r.pytorch.cuda}: a +cu{r.pytorch.cuda.replace('.', '')} build is on download.pytorch.org "
                f"only; set pytorch.cuda = \"{pin}\", or provider 'conda' (conda-forge builds per CUDA) or 'host'")
    return None


def _revision_nvshmem_range(r: ResolvedSpec) -> Optional[str]:
    rng = r.deepep.nvshmem_range
    if not version_matches(r.nvshmem.version, rng):
        return f"DeepEP {r.deepep.label} works with NVSHMEM {rng}, spec resolves to {r.nvshmem.version}"
    return None


def _needs(r: ResolvedSpec, what: str) -> Optional[str]:
    """The range the revision's catalog entry records for ``what`` (else the engine's floor, if any:
    EPv2's README "Requirements", base/engines.py)."""
    rng = getattr(r.deepep, f"{what}_range")
    return rng or r.deepep.engine_record.floors.get(what)


def _unmet(r: ResolvedSpec, what: str, have: str) -> Optional[str]:
    """The range :func:`_needs` gives for ``what`` when ``have`` is outside it, else None."""
    rng = _needs(r, what)
    return rng if rng and not version_matches(have, rng) else None


def _v2_nccl(r: ResolvedSpec) -> Optional[str]:
    if rng := _unmet(r, "nccl", r.nccl.version):
        return (f"DeepEP {r.deepep.label} needs NCCL {rng} at build and run time (NCCL Gin device API), "
                f"spec has {r.nccl.version}")
    return None


def _v2_torch(r: ResolvedSpec) -> Optional[str]:
    if rng := _unmet(r, "pytorch", r.pytorch.version):
        return f"DeepEP {r.deepep.label} needs PyTorch {rng}, spec has {r.pytorch.version}"
    return None


def _v2_cuda(r: ResolvedSpec) -> Optional[str]:
    if rng := _unmet(r, "cuda", r.cuda.version):
        return (f"DeepEP {r.deepep.label} JIT-compiles its kernels with the env's nvcc, which must be CUDA {rng}; "
                f"spec has CUDA {r.cuda.version}")
    return None


def _v2_one_nccl(r: ResolvedSpec) -> Optional[str]:
    # deep_ep/__init__.py check_nccl_so() aborts the import unless exactly one libnccl is mapped and it
    # is byte-identical to the one DeepEP linked; deep_ep/utils/comm.py hands PyTorch's communicator
    # (backend._comm_ptr()) to DeepEP's NCCL. A conda PyTorch loads the env's `nccl` package
    # (RPATH $ORIGIN/../lib), so DeepEP must be built against that package, not a pip/host NCCL.
    if r.pytorch.provider == "conda" and r.nccl.provider in ("pip", "host"):
        return (f"DeepEP {r.deepep.label} and PyTorch must load one and the same NCCL: a conda PyTorch loads the "
                f"env's nccl package, but nccl.provider = {r.nccl.provider!r}; use provider 'source' (built "
                "here, packaged as conda-forge's nccl) or 'conda'")
    return None


def _v2_nccl_provider(r: ResolvedSpec) -> Optional[str]:
    # recipes/deep-ep-v2: our nccl package or conda's (EP_NCCL_ROOT_DIR = the prefix), or the host
    # Python's nvidia-nccl wheel (deep_ep/utils/find_pkgs.py). A bare system NCCL has no root to find.
    if r.nccl.provider == "host":
        return (f"DeepEP {r.deepep.label} finds NCCL as a package (EP_NCCL_ROOT_DIR or the nvidia-nccl wheel); "
                "nccl.provider = 'host' names neither: use 'source', 'conda' or 'pip'")
    return None


def _nvshmem_provider(r: ResolvedSpec) -> Optional[str]:
    # recipes/deep-ep builds against our deepep-nvshmem package only; recipes/deep-ep-v2 also against
    # the host Python's pip wheel (DeepEP 2.x's deep_ep/utils/find_pkgs.py finds it). "wheel" is
    # NVIDIA's wheel repacked as that same deepep-nvshmem package (recipes/nvshmem-wheel).
    ok = r.deepep.engine_record.nvshmem_providers
    if r.nvshmem.provider not in ok:
        return (f"DeepEP {r.deepep.label} ({r.deepep.engine}) is built against NVSHMEM from "
                f"{' or '.join(repr(p) for p in ok)}, spec has provider = {r.nvshmem.provider!r}")
    return None


def _pip_nvshmem_host_python(r: ResolvedSpec) -> Optional[str]:
    # (A pip NCCL may come inside a conda repack of pip PyTorch: env_specs/h200-nvlink-conda.toml.)
    if r.nvshmem.provider == "pip" and (r.python.provider != "host" or r.pytorch.provider == "conda"):
        return ("nvshmem.provider = 'pip' means the nvidia-nvshmem wheel in the host Python's site-packages (what pip "
                "PyTorch loads); it needs python.provider = 'host' and a host/pip PyTorch")
    return None


def _wheel_cuda_host_mode(r: ResolvedSpec) -> Optional[str]:
    # The recipes read a wheel-provided CUDA the way they read a host toolkit (a CUDA_HOME beside the
    # build: builder/cuda_home.py), so the rest of the build is host mode too; conda mode takes
    # conda-forge's compilers and CUDA from the env, where a second toolkit has no place.
    if r.cuda.provider == "wheel" and (r.python.provider != "host" or r.pytorch.provider == "conda"):
        return ("cuda.provider = 'wheel' builds in host mode (the recipes read the toolkit as CUDA_HOME): it needs "
                "python.provider = 'host' and a host, pip or wheel PyTorch")
    return None


def _wheel_torch_build(r: ResolvedSpec) -> Optional[str]:
    # pip's closure is built for one CPython and one CUDA (envspec/torch_wheels.built_for): the spec must name
    # them, and the host interpreter runs it (the env's site-packages first on PYTHONPATH, as for host Python).
    if r.pytorch.provider != "wheel":
        return None
    if r.python.provider != "host":
        return "pytorch.provider = 'wheel' installs into the host interpreter's search path: it needs python.provider = 'host'"
    if r.cuda.provider == "conda":
        return "pytorch.provider = 'wheel' builds DeepEP in host mode: it needs cuda.provider 'wheel' or 'host', not 'conda'"
    py, cuda = built_for(r.pytorch.wheels)
    if py != r.python.version:
        return f"the pinned torch {r.pytorch.version} wheel is for CPython {py} ({CATALOG_TORCH}), spec has python.version = {r.python.version!r}"
    if cuda != r.pytorch.cuda:
        return (f"the pinned torch {r.pytorch.version} closure is built for CUDA {cuda} (its nvidia-cuda-runtime wheel), "
                f"spec has pytorch.cuda = {r.pytorch.cuda!r}: set pytorch.cuda = \"{cuda}\"")
    return None


def _wheel_nccl(r: ResolvedSpec) -> Optional[str]:
    # NCCL's wheel is the one torch pins exactly, a part of deepep-pytorch: there is no other to choose.
    if r.nccl.provider != "wheel":
        return None
    if r.pytorch.provider != "wheel":
        return "nccl.provider = 'wheel' is the NCCL wheel of a wheel-provided PyTorch: it needs pytorch.provider = 'wheel'"
    w = nccl_wheel(r.pytorch.wheels)
    if w is None:
        return f"the pinned torch {r.pytorch.version} closure has no nvidia-nccl wheel ({CATALOG_TORCH})"
    if w.version != r.nccl.version:
        return (f"torch {r.pytorch.version} pins {w.project}=={w.version} ({CATALOG_TORCH}), spec has "
                f"nccl.version = {r.nccl.version!r}: set nccl.version = \"{w.version}\"")
    return None


def _wheel_cuda_no_jit(r: ResolvedSpec) -> Optional[str]:
    # The repacked toolkit is an input of the builds, not a package of the env: an engine that runs nvcc
    # at run time (EPv2's JIT) would find none.
    if r.cuda.provider == "wheel" and r.deepep.engine_record.jit:
        return (f"DeepEP {r.deepep.label} ({r.deepep.engine}) JIT-compiles with nvcc at run time; a wheel-provided "
                "CUDA is only in the builds, not in the env: use cuda.provider 'host' or 'conda'")
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


def _deepep_patch_revision(r: ResolvedSpec) -> Optional[str]:
    # A DeepEP patch's applies_to names revisions (recipes/deep-ep/sources.toml): PR #696's patch is written
    # against dd758ca's csrc/kernels/backend/nvshmem.cu and its feature must not be credited to another tree.
    for p in r.deepep.patches:
        if p.pin.applies_to and not any(r.deepep.revision.startswith(a) or a.startswith(r.deepep.revision)
                                        for a in p.pin.applies_to):
            return (f"DeepEP patch {p.name!r} applies to revision {', '.join(a[:7] for a in p.pin.applies_to)}, "
                    f"not {r.deepep.revision[:7]} ({r.deepep.label})")
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
    have = _features(r)
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
    Rule("deepep-v1-nvshmem-layout", "V1 kernels with NVSHMEM >= 3.5.19 need the RC-QP layout fix (feature nvshmem-3.5-layout)",
         "NVSHMEM 3.5.21 release notes (Known Issues); deepseek-ai/DeepEP #553, #707, #764; PR #564, #696",
         _v1_legacy_layout, "nvshmem.version"),
    Rule("deepep-revision-nvshmem", "each DeepEP revision states the NVSHMEM versions its kernels are correct with",
         "recipes/deep-ep/sources.toml; DeepEP PR #564 (3.5.19 RC-QP layout)", _revision_nvshmem_range, "nvshmem.version"),
    Rule("deepep-v2-legacy-nvshmem-3.5.19", "EPv2-line legacy kernels are wrong with NVSHMEM >= 3.5.19 (unless a patch has the layout fix)",
         "deepseek-ai/DeepEP issues #707, #764, open PR #696", _v2_legacy_nvshmem, "nvshmem.version"),
    Rule("pytorch-pip-nccl-pin", "pip's PyTorch pins NVIDIA's NCCL wheel exactly: a pip NCCL newer than the pin is downgraded",
         "deepseek-ai/DeepEP #710 (PR #712); aws/deep-learning-containers PR #6467", _torch_nccl_pin, "nccl.provider"),
    Rule("pytorch-pip-cuda", "PyPI has one CUDA build of each PyTorch release: the spec's pytorch.cuda must be it",
         "PyPI torch-2.10.0 wheel METADATA (Requires-Dist nvidia-cuda-runtime-cu12==12.8.90)", _torch_pip_cuda,
         "pytorch.cuda"),
    Rule("pytorch-pip-nvshmem-pin", "one NVSHMEM per process: pip PyTorch 2.15's NVSHMEM 3.7 and the env's must share a layout class",
         "vllm-project/vllm PR #58159; deepseek-ai/DeepEP PR #696", _torch_nvshmem_pin, "nvshmem.version"),
    Rule("deepep-v2-nccl", "DeepEP V2 (NCCL Gin) needs NCCL >= 2.30.4 at build and run, the same build below 2.31",
         "DeepEP README 'Requirements' at dd758ca; csrc/kernels/backend/nccl.cu:100-105 (exact match below 2.31)",
         _v2_nccl, "nccl.version"),
    Rule("deepep-v2-one-nccl", "PyTorch and DeepEP V2 must load one NCCL, byte-identical to the one DeepEP linked",
         "DeepEP deep_ep/__init__.py check_nccl_so(); deep_ep/utils/comm.py (reuses PyTorch's communicator)",
         _v2_one_nccl, "nccl.provider"),
    Rule("deepep-v2-nccl-provider", "DeepEP V2 finds NCCL as the env's package or the host Python's wheel",
         "DeepEP deep_ep/utils/find_pkgs.py find_nccl_root()", _v2_nccl_provider, "nccl.provider"),
    Rule("deepep-v2-pytorch", "DeepEP V2 needs PyTorch >= 2.10", "DeepEP README 'Requirements' at dd758ca",
         _v2_torch, "pytorch.version"),
    Rule("deepep-v2-cuda", "DeepEP V2 JIT-compiles with nvcc >= 12.3 (SM90)",
         "DeepEP README 'Requirements'; csrc/jit/compiler.hpp get_nvcc_version()", _v2_cuda, "cuda.version"),
    Rule("deepep-nvshmem-provider", "the DeepEP recipes build against NVSHMEM from source or wheel (V1), or source, wheel or pip (V2)",
         "recipes/deep-ep/recipe.yaml, recipes/deep-ep-v2/recipe.yaml", _nvshmem_provider, "nvshmem.provider"),
    Rule("nvshmem-pip-needs-host-python", "a pip-provided NVSHMEM is the host Python's wheel",
         "DeepEP deep_ep/utils/find_pkgs.py (importlib.metadata of the running Python)", _pip_nvshmem_host_python,
         "nvshmem.provider"),
    Rule("cuda-wheel-host-mode", "a wheel-provided CUDA is read as a host toolkit: Python is the host's, PyTorch not conda's",
         "recipes/deep-ep/recipe.yaml (host mode), deepep_env/builder/cuda_home.py", _wheel_cuda_host_mode, "cuda.provider"),
    Rule("pytorch-wheel-build", "PyPI's torch closure is built for one CPython and one CUDA: the spec names them",
         "recipes/pytorch-wheel/sources.toml (torch's cpXY tag, nvidia-cuda-runtime's version)", _wheel_torch_build,
         "pytorch.provider"),
    Rule("nccl-wheel-is-torchs", "a wheel-provided NCCL is the nvidia-nccl wheel torch pins, in the same closure",
         "PyPI torch-2.11.0 METADATA (Requires-Dist nvidia-nccl-cu13==2.28.9)", _wheel_nccl, "nccl.provider"),
    Rule("cuda-wheel-no-jit", "a wheel-provided CUDA is in the builds only: no nvcc in the env for a JIT engine",
         "DeepEP EPv2 release README (nvcc at run time); deepep_env/builder/cuda_home.py", _wheel_cuda_no_jit,
         "cuda.provider"),
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
    Rule("deepep-patch-revision", "a DeepEP patch applies only to the revisions it was written for",
         "recipes/deep-ep/sources.toml (PR #696's patch: dd758ca)", _deepep_patch_revision, "deepep.patches"),
    Rule("aggressive-ptx-sm90-only", "DeepEP's aggressive PTX instructions are allowed only for TORCH_CUDA_ARCH_LIST=9.0",
         "DeepEP setup.py (DISABLE_AGGRESSIVE_PTX_INSTRS)", _aggressive_ptx, "deepep.aggressive_ptx"),
    Rule("pytorch-cuda-major", "PyTorch's CUDA build and the toolkit the extensions compile with share a major version",
         "PyTorch cpp_extension CUDA version check", _torch_cuda_major, "pytorch.cuda"),
    Rule("deepep-required-features", "features the spec requires (e.g. pr-466) come from the revision or a patch",
         "seed 000 §4 problem 1 (PR #466 missing from the installed module)", _required_features, "deepep.require"),
)


# Rules an engine claims (base/engines.py Engine.spec_rules) judge only specs of that engine.
ENGINE_ONLY = engine_only_rules("spec_rules")


def applies(rule: Rule, r: ResolvedSpec) -> bool:
    """Whether ``rule`` judges ``r``: every rule does, except one an engine claims, for other engines."""
    return rule.id not in ENGINE_ONLY or rule.id in r.deepep.engine_record.spec_rules


def violations(r: ResolvedSpec) -> list[tuple[Rule, str]]:
    out = []
    for rule in RULES:
        if not applies(rule, r):
            continue
        msg = rule.check(r)
        if msg:
            out.append((rule, msg))
    return out
