"""Family ``deepep``: the DeepEP that Python will import is the env's, and has what the spec asked for.

Seed 000 §4 problem 1: PR #466 was applied to ``source/deep_ep/buffer.py`` after the module had
been copied to ``/opt/deepep/python`` (on PYTHONPATH), so ``DEEP_EP_DEVICE_TO_HCA_MAPPING`` was
ignored and every GPU used mlx5_0 (RDMA ~6.5 GB/s instead of 36-80). So the check reads the
module Python *would import* — the first ``deep_ep`` on the effective search path — never a
source tree, and parses it (no torch import). The same facts verify_install.py checks in the
recipe test: FEATURE_CHECKS, the ``_deepep_env_build.json`` build record, the extension.
"""
from __future__ import annotations

import json
import os
from typing import Any, Optional

from deepep_env.doctor.context import DoctorContext, local_site_dirs
from deepep_env.doctor.elf import read_dynamic_path
from deepep_env.doctor.features import FEATURE_CHECKS, FEATURE_WHY, defined_names_in, finding_id
from deepep_env.doctor.model import Evidence, one_line
from deepep_env.doctor.pythonpath import FoundModule, find_module, python_search_path
from deepep_env.doctor.check import Emitter, check

BUILD_RECORD = "_deepep_env_build.json"

IDS = (
    "deepep.not-installed",
    "deepep.shadowed",
    *(finding_id(f) for f in FEATURE_CHECKS),
    "deepep.feature-unknown",
    "deepep.unreadable",
    "deepep.build-record-missing",
    "deepep.revision-mismatch",
    "deepep.extension-missing",
    "deepep.extension-unlinked",
    "deepep.cwd-shadow",
)


def _same(ctx: DoctorContext, a: str, b: str) -> bool:
    ra, rb = ctx.paths.realpath(a), ctx.paths.realpath(b)
    return ra is not None and ra == rb


def locate_deep_ep(ctx: DoctorContext) -> Optional[FoundModule]:
    key = "deep_ep"
    if key not in ctx._cache:
        entries = python_search_path(ctx)
        ctx.info["python_path"] = [{"dir": e.dir, "why": e.why} for e in entries]
        found = find_module(ctx.paths, entries, "deep_ep")
        ctx.info["deep_ep"] = None if found is None else {"kind": found.kind, "origin": found.origin, "dir": found.dir, "via": found.entry.why}
        ctx._cache[key] = found
    return ctx._cache[key]


def is_v2(ctx: DoctorContext, pkg_dir: str) -> bool:
    """DeepEP 2.x (EPv2) has deep_ep/buffers/elastic.py (ElasticBuffer); V1 has deep_ep/buffer.py."""
    return ctx.paths.is_file(f"{pkg_dir}/buffers/elastic.py")


def extension_files(ctx: DoctorContext, pkg_dir: str) -> list[str]:
    """The compiled extension: ``deep_ep_cpp*.so`` beside the package (V1), ``deep_ep/_C*.so`` inside
    it (DeepEP 2.x setup.py: CUDAExtension ``deep_ep._C``)."""
    pattern = f"{pkg_dir}/_C*.so" if is_v2(ctx, pkg_dir) else f"{os.path.dirname(pkg_dir)}/deep_ep_cpp*.so"
    return [p for p in ctx.paths.glob(pattern) if ctx.paths.is_file(p)]


def read_build_record(ctx: DoctorContext, pkg_dir: str) -> tuple[Optional[dict[str, Any]], Optional[str]]:
    path = f"{pkg_dir}/{BUILD_RECORD}"
    text = ctx.paths.read_text(path)
    if text is None:
        return None, None
    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, f"{path}: not JSON ({exc})"
    return (data if isinstance(data, dict) else None), None


@check("deepep", *IDS)
def check_deepep(ctx: DoctorContext, emit: Emitter) -> None:
    """The deep_ep Python imports is the env's and has the required features (seed 000)."""
    if ctx.prefix and ctx.meta is None:
        return  # env.not-installed already says so
    found = locate_deep_ep(ctx)
    pp = ctx.env.evidence("PYTHONPATH")
    prefix_sites = local_site_dirs(ctx.prefix) if ctx.prefix else []
    if ctx.meta is not None and ctx.meta.site_packages():
        prefix_sites = [ctx.meta.site_packages()] + [s for s in prefix_sites if s != ctx.meta.site_packages()]
    if found is None:
        if not ctx.prefix:
            return  # host-only and no deep_ep on PYTHONPATH: nothing to check
        searched = [e["dir"] for e in ctx.info.get("python_path", [])]
        emit(
            "deepep.not-installed",
            "error",
            f"no deep_ep module on the env's Python path (searched {len(searched)} director{'y' if len(searched) == 1 else 'ies'})",
            [pp, Evidence(value=one_line(", ".join(searched) or "nothing"), file="python search path")],
            f"`deepep-env install {ctx.env_name or 'ENV'}`; the prefix {ctx.prefix} has no lib/python3.X/site-packages/deep_ep",
        )
        return

    origin_ev = Evidence(value=f"{found.kind} via {found.entry.why}", file=found.origin or found.dir)
    if ctx.prefix:
        expected = [f"{s}/deep_ep" for s in prefix_sites]
        if not any(_same(ctx, found.dir, e) for e in expected):
            have = [e for e in expected if ctx.paths.is_dir(e)]
            emit(
                "deepep.shadowed",
                "error",
                f"Python imports deep_ep from {found.dir}, not the env's copy "
                + (f"({have[0]})" if have else "(the prefix has none)"),
                [origin_ev, pp] + [Evidence(value="present" if ctx.paths.is_dir(e) else "absent", file=e) for e in expected[:2]],
                f"remove {found.entry.dir} from PYTHONPATH (or uninstall that copy) so the env's deep_ep loads; "
                "this is seed 000's failure: a copy without PR #466 shadowing the patched one",
            )
    if found.kind == "namespace":
        emit(
            "deepep.unreadable",
            "error",
            f"deep_ep at {found.dir} has no __init__.py: Python imports it as an empty namespace package",
            [origin_ev],
            "point PYTHONPATH at an installed deep_ep (a directory holding deep_ep/__init__.py and deep_ep_cpp*.so), not a source tree",
        )
        return
    pkg_dir = found.dir if found.kind == "package" else None
    record, record_err = read_build_record(ctx, pkg_dir) if pkg_dir else (None, None)

    # -- required features ------------------------------------------------------------------
    required: dict[str, list[Evidence]] = {}
    spec_req = list(getattr(getattr(ctx.spec, "deepep", None), "require", []) or [])
    for feat in spec_req:
        required.setdefault(feat, []).append(Evidence(value=f"require = {spec_req}", file=f"env_specs/{ctx.env_name}.toml [deepep]"))
    for feat in (record or {}).get("require", []) or []:
        if isinstance(feat, str):
            required.setdefault(feat, []).append(Evidence(value=f"require = {record.get('require')}", file=f"{pkg_dir}/{BUILD_RECORD}"))
    if ctx.env.get("DEEP_EP_DEVICE_TO_HCA_MAPPING") and not (pkg_dir and is_v2(ctx, pkg_dir)):
        # The mapping variable is read only by PR #466's Buffer._setup_device_hca_mapping (a V1 API;
        # DeepEP 2.x's legacy Buffer does not have it, and the overlay does not set it for a V2 env).
        required.setdefault("pr-466", []).append(ctx.env.evidence("DEEP_EP_DEVICE_TO_HCA_MAPPING"))
    names_cache: dict[str, Optional[set[str]]] = {}
    for feat, why in required.items():
        if feat not in FEATURE_CHECKS:
            emit(
                "deepep.feature-unknown",
                "warning",
                f"no check is known for required DeepEP feature {feat!r}",
                why,
                "add it to deepep_env/doctor/features.py (and recipes/deep-ep/verify_install.py)",
            )
            continue
        fname, symbol = FEATURE_CHECKS[feat]
        path = f"{found.dir}/{fname}" if pkg_dir else found.origin or found.dir
        if path not in names_cache:
            text = ctx.paths.read_text(path, 8 << 20)
            try:
                names_cache[path] = None if text is None else defined_names_in(text)
            except (SyntaxError, ValueError):
                names_cache[path] = None
        names = names_cache[path]
        if names is None:
            emit(
                "deepep.unreadable",
                "error",
                f"cannot read or parse {path} to check DeepEP feature {feat}",
                [Evidence(value="unreadable or not Python", file=path), origin_ev],
                "reinstall the env (`deepep-env install`); the installed module is damaged",
            )
            continue
        if symbol in names:
            # Say what was verified, not only what is wrong (issue 9: doctor confirms PR #466).
            ctx.confirmed.append(f"deepep.{feat}: present in the module Python imports ({symbol} defined in {path})")
            continue
        if symbol not in names:
            emit(
                finding_id(feat),
                "error",
                f"the deep_ep Python imports lacks {feat} ({symbol} not defined in {fname}): {FEATURE_WHY.get(feat, '')}".rstrip(": "),
                [Evidence(value=f"{symbol}: not defined", file=path), origin_ev, *why],
                f"install a DeepEP built with {feat} (the spec's [deepep].require) into the env and make sure Python imports "
                "that copy: `deepep-env build` + `deepep-env install`; after a run every NIC's port_xmit_data must grow "
                "(`deepep-env doctor --traffic -- CMD`)",
            )

    # -- build record ---------------------------------------------------------------------------
    is_env_copy = bool(ctx.prefix) and any(_same(ctx, found.dir, f"{s}/deep_ep") for s in prefix_sites)
    if pkg_dir and record is None and is_env_copy:
        emit(
            "deepep.build-record-missing",
            "warning",
            f"the env's deep_ep has no readable {BUILD_RECORD}: what it was built from cannot be checked",
            [Evidence(value=record_err or "absent", file=f"{pkg_dir}/{BUILD_RECORD}")],
            "reinstall from a deepep-env built package (`deepep-env build` + `install`); the recipe writes the record",
        )
    spec_rev = getattr(getattr(ctx.spec, "deepep", None), "revision", None)
    rec_rev = (record or {}).get("revision")
    if spec_rev and isinstance(rec_rev, str) and rec_rev and not (spec_rev.startswith(rec_rev) or rec_rev.startswith(spec_rev)):
        emit(
            "deepep.revision-mismatch",
            "error",
            f"deep_ep was built from {rec_rev[:12]}, the spec pins {spec_rev[:12]}",
            [Evidence(value=rec_rev, file=f"{pkg_dir}/{BUILD_RECORD}"), Evidence(value=spec_rev, file=f"env_specs/{ctx.env_name}.toml [deepep].revision")],
            f"rebuild and reinstall: `deepep-env build {ctx.env_name}` then `deepep-env install {ctx.env_name}`",
        )

    # -- the extension --------------------------------------------------------------------------
    if pkg_dir:
        site = os.path.dirname(pkg_dir)
        exts = extension_files(ctx, pkg_dir)
        where = f"{pkg_dir}/_C*.so" if is_v2(ctx, pkg_dir) else f"{site}/deep_ep_cpp*.so"
        if not exts:
            emit(
                "deepep.extension-missing",
                "error",
                f"no {os.path.basename(where)} for {pkg_dir}: `import deep_ep` fails",
                [Evidence(value="absent", file=where), origin_ev],
                "reinstall the env; a copied deep_ep/ directory without its extension is not an install",
            )
        else:
            ctx.info["deep_ep_cpp"] = exts[0]
            local = ctx.paths.open_local(exts[0])
            dyn = read_dynamic_path(local) if local else None
            if dyn is not None:
                ctx.info["deep_ep_cpp_dynamic"] = {"needed": list(dyn.needed), "rpath": list(dyn.rpath), "runpath": list(dyn.runpath)}
                if not any(n.startswith("libnvshmem_host") for n in dyn.needed):
                    emit(
                        "deepep.extension-unlinked",
                        "warning",
                        f"{os.path.basename(exts[0])} does not link libnvshmem_host.so: it was not built against a shared NVSHMEM",
                        [Evidence(value="NEEDED " + ", ".join(dyn.needed), file=exts[0])],
                        "rebuild DeepEP against the env's NVSHMEM (recipes/deep-ep sets NVSHMEM_DIR to the prefix)",
                    )

    # -- the current directory ------------------------------------------------------------------
    cwd_pkg = os.path.join(ctx.cwd, "deep_ep")
    if os.path.isfile(os.path.join(cwd_pkg, "__init__.py")) and not _same(ctx, cwd_pkg, found.dir):
        emit(
            "deepep.cwd-shadow",
            "warning",
            f"{cwd_pkg} exists: `python -c`/`python -m` run from {ctx.cwd} import it instead of {found.dir}",
            [Evidence(value="a deep_ep package (probably a source tree)", file=cwd_pkg)],
            "run DeepEP's tests from another directory (e.g. `deepep-env run ENV -- python $CONDA_PREFIX/share/deep-ep/tests/…`)",
        )
