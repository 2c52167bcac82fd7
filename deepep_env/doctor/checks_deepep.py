"""Family ``deepep``: the DeepEP that Python will import is the env's, and has what the spec asked for.

Seed 000 §4 problem 1: PR #466 was applied to ``source/deep_ep/buffer.py`` after the module had
been copied to ``/opt/deepep/python`` (on PYTHONPATH), so ``DEEP_EP_DEVICE_TO_HCA_MAPPING`` was
ignored and every GPU used mlx5_0 (RDMA ~6.5 GB/s instead of 36-80). So the check reads the
module Python *would import* — the first ``deep_ep`` on the effective search path — never a
source tree, and parses it (no torch import). The same facts verify_install.py checks in the
recipe test: FEATURE_CHECKS, the ``_deepep_env_build.json`` build record, the extension.

One check per finding id; what several of them read (the module Python imports, its build record,
the required features, the extension) is worked out once per context by the helpers below, which
the ``nvshmem`` and ``deepep-v2`` families use too.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Optional

from deepep_env.base.engines import Engine, engine_by_marker
from deepep_env.doctor.check import Emitter, check
from deepep_env.doctor.context import DoctorContext, local_site_dirs
from deepep_env.doctor.elf import Dynamic, read_dynamic_path
from deepep_env.doctor.features import FEATURE_CHECKS, FEATURE_WHY, defined_names_in, finding_id
from deepep_env.doctor.model import Evidence, one_line
from deepep_env.doctor.pythonpath import FoundModule, find_module, python_search_path

BUILD_RECORD = "_deepep_env_build.json"


# -- what the checks read -------------------------------------------------------------------------------
def _same(ctx: DoctorContext, a: str, b: str) -> bool:
    ra, rb = ctx.paths.realpath(a), ctx.paths.realpath(b)
    return ra is not None and ra == rb


def locate_deep_ep(ctx: DoctorContext) -> Optional[FoundModule]:
    """The deep_ep Python would import (its search path and the module go to the report's context)."""
    return ctx.cached("deep_ep", lambda: _locate_deep_ep(ctx))


def _locate_deep_ep(ctx: DoctorContext) -> Optional[FoundModule]:
    entries = python_search_path(ctx)
    ctx.info["python_path"] = [{"dir": e.dir, "why": e.why} for e in entries]
    found = find_module(ctx.paths, entries, "deep_ep")
    ctx.info["deep_ep"] = None if found is None else {"kind": found.kind, "origin": found.origin, "dir": found.dir, "via": found.entry.why}
    return found


def installed_deep_ep(ctx: DoctorContext) -> Optional[FoundModule]:
    """The deep_ep to check; None also when the prefix is no installed env (env.not-installed says so)."""
    if ctx.prefix and ctx.meta is None:
        return None
    return locate_deep_ep(ctx)


def readable_deep_ep(ctx: DoctorContext) -> Optional[FoundModule]:
    """The deep_ep when there is code to read: not a namespace package (deepep.unreadable says so)."""
    found = installed_deep_ep(ctx)
    return None if found is None or found.kind == "namespace" else found


def package_dir(ctx: DoctorContext) -> Optional[str]:
    """The ``deep_ep/`` directory Python imports, when it imports a package (not a lone module)."""
    found = readable_deep_ep(ctx)
    return found.dir if found is not None and found.kind == "package" else None


def origin_evidence(found: FoundModule) -> Evidence:
    return Evidence(value=f"{found.kind} via {found.entry.why}", file=found.origin or found.dir)


def prefix_sites(ctx: DoctorContext) -> list[str]:
    """The env's site-packages, the marker's first."""
    sites = local_site_dirs(ctx.prefix) if ctx.prefix else []
    if ctx.meta is not None and ctx.meta.site_packages():
        sites = [ctx.meta.site_packages()] + [s for s in sites if s != ctx.meta.site_packages()]
    return sites


def is_env_copy(ctx: DoctorContext, found: FoundModule) -> bool:
    """Whether ``found`` is the env's own deep_ep (one in the prefix's site-packages)."""
    return bool(ctx.prefix) and any(_same(ctx, found.dir, f"{s}/deep_ep") for s in prefix_sites(ctx))


def engine_of(ctx: DoctorContext, pkg_dir: str) -> Engine:
    """The engine of the deep_ep package at ``pkg_dir``, told by its marker file (base/engines.py:
    DeepEP 2.x has deep_ep/buffers/elastic.py, ElasticBuffer), never by importing it."""
    return engine_by_marker(lambda rel: ctx.paths.is_file(f"{pkg_dir}/{rel}"))


def extension_pattern(ctx: DoctorContext, pkg_dir: str) -> str:
    """Where the compiled extension is (the engine's ``extension``): ``deep_ep_cpp*.so`` beside the
    package (V1), ``deep_ep/_C*.so`` inside it (DeepEP 2.x setup.py: CUDAExtension ``deep_ep._C``)."""
    return engine_of(ctx, pkg_dir).extension.format(pkg=pkg_dir, site=os.path.dirname(pkg_dir))


def extension_files(ctx: DoctorContext, pkg_dir: str) -> list[str]:
    """The compiled extension's files (see :func:`extension_pattern`)."""
    return [p for p in ctx.paths.glob(extension_pattern(ctx, pkg_dir)) if ctx.paths.is_file(p)]


def extension_dynamic(ctx: DoctorContext, ext: str) -> Optional[Dynamic]:
    """The dynamic section of the extension ``ext``; None when it is no readable ELF shared object."""

    def read() -> Optional[Dynamic]:
        local = ctx.paths.open_local(ext)
        return read_dynamic_path(local) if local else None

    return ctx.cached(f"elf-dynamic:{ext}", read)


def built_extension(ctx: DoctorContext) -> tuple[list[str], Optional[Dynamic]]:
    """The imported package's extension files and the first one's dynamic section (both go to the
    report's context)."""
    return ctx.cached("deepep.extension", lambda: _built_extension(ctx))


def _built_extension(ctx: DoctorContext) -> tuple[list[str], Optional[Dynamic]]:
    pkg_dir = package_dir(ctx)
    exts = extension_files(ctx, pkg_dir) if pkg_dir else []
    if not exts:
        return exts, None
    ctx.info["deep_ep_cpp"] = exts[0]
    dyn = extension_dynamic(ctx, exts[0])
    if dyn is not None:
        ctx.info["deep_ep_cpp_dynamic"] = {"needed": list(dyn.needed), "rpath": list(dyn.rpath), "runpath": list(dyn.runpath)}
    return exts, dyn


def read_build_record(ctx: DoctorContext, pkg_dir: str) -> tuple[Optional[dict[str, Any]], Optional[str]]:
    """``deep_ep/_deepep_env_build.json``: (its content, why it is unusable); (None, None) when absent."""
    path = f"{pkg_dir}/{BUILD_RECORD}"
    text = ctx.paths.read_text(path)
    if text is None:
        return None, None
    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, f"{path}: not JSON ({exc})"
    return (data if isinstance(data, dict) else None), None


def build_record(ctx: DoctorContext) -> tuple[Optional[dict[str, Any]], Optional[str]]:
    """The build record of the package Python imports (see :func:`read_build_record`)."""
    pkg_dir = package_dir(ctx)
    return ctx.cached("deepep.build-record", lambda: read_build_record(ctx, pkg_dir) if pkg_dir else (None, None))


@dataclass(frozen=True)
class FeatureState:
    feature: str
    why: list[Evidence]  # who requires it
    state: str  # "unknown" (no check known) | "unreadable" | "present" | "missing"
    path: str = ""  # the file parsed for it


def required_features(ctx: DoctorContext) -> dict[str, list[Evidence]]:
    """Features required of the imported module, in order: the spec's, the build record's, PR #466
    when DEEP_EP_DEVICE_TO_HCA_MAPPING is set; each with who requires it."""
    required: dict[str, list[Evidence]] = {}
    pkg_dir = package_dir(ctx)
    record = build_record(ctx)[0]
    spec_req = list(getattr(getattr(ctx.spec, "deepep", None), "require", []) or [])
    for feat in spec_req:
        required.setdefault(feat, []).append(Evidence(value=f"require = {spec_req}", file=f"env_specs/{ctx.env_name}.toml [deepep]"))
    rec = record or {}
    for feat in rec.get("require", []) or []:
        if isinstance(feat, str):
            required.setdefault(feat, []).append(Evidence(value=f"require = {rec.get('require')}", file=f"{pkg_dir}/{BUILD_RECORD}"))
    reads_mapping = not pkg_dir or engine_of(ctx, pkg_dir).device_hca_mapping   # base/engines.py
    if ctx.env.get("DEEP_EP_DEVICE_TO_HCA_MAPPING") and reads_mapping:
        # The mapping variable is read only by PR #466's Buffer._setup_device_hca_mapping (a V1 API;
        # DeepEP 2.x's legacy Buffer does not have it, and the overlay does not set it for a V2 env).
        required.setdefault("pr-466", []).append(ctx.env.evidence("DEEP_EP_DEVICE_TO_HCA_MAPPING"))
    return required


def feature_states(ctx: DoctorContext) -> list[FeatureState]:
    """Each required feature and whether the imported module defines it, in order; a present one is
    a confirmed line."""
    return ctx.cached("deepep.features", lambda: _feature_states(ctx))


def _feature_states(ctx: DoctorContext) -> list[FeatureState]:
    found = readable_deep_ep(ctx)
    if found is None:
        return []
    names_cache: dict[str, Optional[set[str]]] = {}
    out: list[FeatureState] = []
    for feat, why in required_features(ctx).items():
        if feat not in FEATURE_CHECKS:
            out.append(FeatureState(feat, why, "unknown"))
            continue
        fname, symbol = FEATURE_CHECKS[feat]
        path = f"{found.dir}/{fname}" if package_dir(ctx) else found.origin or found.dir
        if path not in names_cache:
            names_cache[path] = _defined_names(ctx, path)
        names = names_cache[path]
        if names is not None and symbol in names:
            # Say what was verified, not only what is wrong (issue 9: doctor confirms PR #466).
            ctx.confirmed.append(f"deepep.{feat}: present in the module Python imports ({symbol} defined in {path})")
        out.append(FeatureState(feat, why, "unreadable" if names is None else "present" if symbol in names else "missing", path))
    return out


def _defined_names(ctx: DoctorContext, path: str) -> Optional[set[str]]:
    text = ctx.paths.read_text(path, 8 << 20)
    try:
        return None if text is None else defined_names_in(text)
    except (SyntaxError, ValueError):
        return None


# -- the checks, in the order their findings were first emitted -------------------------------------------
@check("deepep", "deepep.not-installed")
def deep_ep_installed(ctx: DoctorContext, emit: Emitter) -> None:
    """An installed env has a deep_ep on its Python path."""
    if installed_deep_ep(ctx) is not None or not ctx.prefix or ctx.meta is None:
        return  # host-only and no deep_ep on PYTHONPATH: nothing to check; no marker: env.not-installed says so
    searched = [e["dir"] for e in ctx.info.get("python_path", [])]
    emit(
        "deepep.not-installed",
        "error",
        f"no deep_ep module on the env's Python path (searched {len(searched)} director{'y' if len(searched) == 1 else 'ies'})",
        [ctx.env.evidence("PYTHONPATH"), Evidence(value=one_line(", ".join(searched) or "nothing"), file="python search path")],
        f"`deepep-env install {ctx.env_name or 'ENV'}`; the prefix {ctx.prefix} has no lib/python3.X/site-packages/deep_ep",
    )


@check("deepep", "deepep.shadowed")
def deep_ep_is_the_envs(ctx: DoctorContext, emit: Emitter) -> None:
    """The deep_ep Python imports is the env's copy, not one earlier on the path (seed 000 §4.1)."""
    found = installed_deep_ep(ctx)
    if found is None or not ctx.prefix or is_env_copy(ctx, found):
        return
    expected = [f"{s}/deep_ep" for s in prefix_sites(ctx)]
    have = [e for e in expected if ctx.paths.is_dir(e)]
    emit(
        "deepep.shadowed",
        "error",
        f"Python imports deep_ep from {found.dir}, not the env's copy "
        + (f"({have[0]})" if have else "(the prefix has none)"),
        [origin_evidence(found), ctx.env.evidence("PYTHONPATH")]
        + [Evidence(value="present" if ctx.paths.is_dir(e) else "absent", file=e) for e in expected[:2]],
        f"remove {found.entry.dir} from PYTHONPATH (or uninstall that copy) so the env's deep_ep loads; "
        "this is seed 000's failure: a copy without PR #466 shadowing the patched one",
    )


@check("deepep", "deepep.unreadable")
def deep_ep_readable(ctx: DoctorContext, emit: Emitter) -> None:
    """The imported deep_ep is a package, and the files its required features live in parse."""
    found = installed_deep_ep(ctx)
    if found is not None and found.kind == "namespace":
        emit(
            "deepep.unreadable",
            "error",
            f"deep_ep at {found.dir} has no __init__.py: Python imports it as an empty namespace package",
            [origin_evidence(found)],
            "point PYTHONPATH at an installed deep_ep (a directory holding deep_ep/__init__.py and deep_ep_cpp*.so), not a source tree",
        )
        return
    if found is None:
        return  # nothing imported: deepep.not-installed says so
    for st in feature_states(ctx):
        if st.state == "unreadable":
            emit(
                "deepep.unreadable",
                "error",
                f"cannot read or parse {st.path} to check DeepEP feature {st.feature}",
                [Evidence(value="unreadable or not Python", file=st.path), origin_evidence(found)],
                "reinstall the env (`deepep-env install`); the installed module is damaged",
            )


@check("deepep", "deepep.feature-unknown")
def required_features_known(ctx: DoctorContext, emit: Emitter) -> None:
    """Every feature the spec or the build record requires is one doctor can check (features.py)."""
    for st in feature_states(ctx):
        if st.state == "unknown":
            emit(
                "deepep.feature-unknown",
                "warning",
                f"no check is known for required DeepEP feature {st.feature!r}",
                st.why,
                "add it to deepep_env/doctor/features.py (and recipes/deep-ep/verify_install.py)",
            )


def _feature_missing(ctx: DoctorContext, emit: Emitter, feature: str) -> None:
    """Emit ``feature``'s finding when it is required and the imported module lacks it."""
    found = readable_deep_ep(ctx)
    st = next((st for st in feature_states(ctx) if st.feature == feature and st.state == "missing"), None)
    if found is None or st is None:
        return
    fname, symbol = FEATURE_CHECKS[feature]
    emit(
        finding_id(feature),
        "error",
        f"the deep_ep Python imports lacks {feature} ({symbol} not defined in {fname}): {FEATURE_WHY.get(feature, '')}".rstrip(": "),
        [Evidence(value=f"{symbol}: not defined", file=st.path), origin_evidence(found), *st.why],
        f"install a DeepEP built with {feature} (the spec's [deepep].require) into the env and make sure Python imports "
        "that copy: `deepep-env build` + `deepep-env install`; after a run every NIC's port_xmit_data must grow "
        "(`deepep-env doctor --traffic -- CMD`)",
    )


@check("deepep", finding_id("pr-466"))
def pr466_present(ctx: DoctorContext, emit: Emitter) -> None:
    """When required, the imported module has PR #466 (Buffer._setup_device_hca_mapping; seed 000 §4.1)."""
    _feature_missing(ctx, emit, "pr-466")


@check("deepep", finding_id("elastic-buffer"))
def elastic_buffer_present(ctx: DoctorContext, emit: Emitter) -> None:
    """When required, the imported module is DeepEP 2.x (class ElasticBuffer in deep_ep/buffers/elastic.py)."""
    _feature_missing(ctx, emit, "elastic-buffer")


# A feature added to features.FEATURE_CHECKS needs its check above: nothing else declares its id.
if set(FEATURE_CHECKS) != {"pr-466", "elastic-buffer"}:
    raise RuntimeError("features.FEATURE_CHECKS has a feature without its check in doctor/checks_deepep.py")


@check("deepep", "deepep.build-record-missing")
def build_record_present(ctx: DoctorContext, emit: Emitter) -> None:
    """The env's deep_ep carries the build record deepep-env's recipe writes."""
    found, pkg_dir = readable_deep_ep(ctx), package_dir(ctx)
    record, record_err = build_record(ctx)
    if found is None or pkg_dir is None or record is not None or not is_env_copy(ctx, found):
        return
    emit(
        "deepep.build-record-missing",
        "warning",
        f"the env's deep_ep has no readable {BUILD_RECORD}: what it was built from cannot be checked",
        [Evidence(value=record_err or "absent", file=f"{pkg_dir}/{BUILD_RECORD}")],
        "reinstall from a deepep-env built package (`deepep-env build` + `install`); the recipe writes the record",
    )


@check("deepep", "deepep.revision-mismatch")
def revision_matches_spec(ctx: DoctorContext, emit: Emitter) -> None:
    """The imported deep_ep was built from the revision the spec pins (its build record says which)."""
    if readable_deep_ep(ctx) is None:
        return
    spec_rev = getattr(getattr(ctx.spec, "deepep", None), "revision", None)
    rec_rev = (build_record(ctx)[0] or {}).get("revision")
    if not (spec_rev and isinstance(rec_rev, str) and rec_rev):
        return
    if spec_rev.startswith(rec_rev) or rec_rev.startswith(spec_rev):
        return  # one is a prefix of the other: the same commit
    emit(
        "deepep.revision-mismatch",
        "error",
        f"deep_ep was built from {rec_rev[:12]}, the spec pins {spec_rev[:12]}",
        [Evidence(value=rec_rev, file=f"{package_dir(ctx)}/{BUILD_RECORD}"),
         Evidence(value=spec_rev, file=f"env_specs/{ctx.env_name}.toml [deepep].revision")],
        f"rebuild and reinstall: `deepep-env build {ctx.env_name}` then `deepep-env install {ctx.env_name}`",
    )


@check("deepep", "deepep.extension-missing")
def extension_present(ctx: DoctorContext, emit: Emitter) -> None:
    """The imported package has its compiled extension (deep_ep_cpp*.so; DeepEP 2.x: deep_ep/_C*.so)."""
    found, pkg_dir = readable_deep_ep(ctx), package_dir(ctx)
    if found is None or pkg_dir is None or built_extension(ctx)[0]:
        return
    where = extension_pattern(ctx, pkg_dir)
    emit(
        "deepep.extension-missing",
        "error",
        f"no {os.path.basename(where)} for {pkg_dir}: `import deep_ep` fails",
        [Evidence(value="absent", file=where), origin_evidence(found)],
        "reinstall the env; a copied deep_ep/ directory without its extension is not an install",
    )


@check("deepep", "deepep.extension-unlinked")
def extension_links_nvshmem(ctx: DoctorContext, emit: Emitter) -> None:
    """The extension links libnvshmem_host.so (it was built against a shared NVSHMEM)."""
    exts, dyn = built_extension(ctx)
    if dyn is None or any(n.startswith("libnvshmem_host") for n in dyn.needed):
        return
    emit(
        "deepep.extension-unlinked",
        "warning",
        f"{os.path.basename(exts[0])} does not link libnvshmem_host.so: it was not built against a shared NVSHMEM",
        [Evidence(value="NEEDED " + ", ".join(dyn.needed), file=exts[0])],
        "rebuild DeepEP against the env's NVSHMEM (recipes/deep-ep sets NVSHMEM_DIR to the prefix)",
    )


@check("deepep", "deepep.static-libstdcxx")
def extension_shares_libstdcxx(ctx: DoctorContext, emit: Emitter) -> None:
    """A PyTorch extension (it needs libc10/libtorch) needs libstdc++.so.6 like PyTorch does: one without
    it has a C++ runtime of its own inside (a compiler whose g++ links libstdc++ statically, e.g. an
    image's ``CXX=/opt/gcc/bin/g++`` under ``pip install``). Two C++ runtimes in one process: DeepEP
    2.1.0 built so died with SIGSEGV at 2 ranks on H100 while the same sources from the recipe passed
    (issue 38, docs/benchmarks.md)."""
    exts, dyn = built_extension(ctx)
    if dyn is None or not any(n.startswith(("libc10", "libtorch")) for n in dyn.needed):
        return
    if any(n.startswith("libstdc++.so") for n in dyn.needed):
        return
    emit(
        "deepep.static-libstdcxx",
        "error",
        f"{os.path.basename(exts[0])} links PyTorch but not libstdc++.so.6: it carries its own C++ runtime "
        f"beside PyTorch's (a DeepEP 2.1.0 built so died with SIGSEGV at 2 ranks)",
        [Evidence(value="NEEDED " + ", ".join(dyn.needed), file=exts[0])],
        "rebuild it with the toolchain PyTorch uses: `env -u CXX -u CC pip install …` where the image exports "
        f"a static-libstdc++ compiler, or install the env's package (`deepep-env install {ctx.env_name or 'ENV'}`)",
    )


@check("deepep", "deepep.cwd-shadow")
def no_deep_ep_in_cwd(ctx: DoctorContext, emit: Emitter) -> None:
    """No deep_ep package in the working directory, which `python -c`/`-m` would import first."""
    found = readable_deep_ep(ctx)
    cwd_pkg = os.path.join(ctx.cwd, "deep_ep")
    if found is None or not os.path.isfile(os.path.join(cwd_pkg, "__init__.py")) or _same(ctx, cwd_pkg, found.dir):
        return
    emit(
        "deepep.cwd-shadow",
        "warning",
        f"{cwd_pkg} exists: `python -c`/`python -m` run from {ctx.cwd} import it instead of {found.dir}",
        [Evidence(value="a deep_ep package (probably a source tree)", file=cwd_pkg)],
        "run DeepEP's tests from another directory (e.g. `deepep-env run ENV -- python $CONDA_PREFIX/share/deep-ep/tests/…`)",
    )
