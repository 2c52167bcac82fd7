"""EnvSpec (abstract) → ResolvedSpec (concrete), enforcing the compatibility rules.

Components deepep-env builds (NVSHMEM, GDRCopy, DeepEP) resolve against the source catalogs in
``recipes/<package>/sources.toml``; ranges pick the highest catalogued version that breaks no rule.
Components it does not build (CUDA, PyTorch, NCCL, Python) must be exact: the lock pins their builds.
"""
from __future__ import annotations

from functools import cmp_to_key
from pathlib import Path

from deepep_env.base.errors import UnknownEnvError, UserError
from deepep_env.platform.profiles_data import PROFILES
from deepep_env.base.project import Project, find_project
from deepep_env.envspec.catalog import Catalog, load_catalog
from deepep_env.envspec.load import load_spec_file, show
from deepep_env.envspec.model import EnvSpec
from deepep_env.envspec.resolved import (
    RCuda, RDeepEP, RGdrcopy, RNccl, RNvshmem, RPatch, RPytorch, RPython, ResolvedSpec,
)
from deepep_env.envspec.rules import Rule, violations
from deepep_env.envspec.wheels import require_wheel
from deepep_env.envspec.wheel_pins import wheel_source
from deepep_env.envspec.cuda_wheels import require_toolkit
from deepep_env.envspec.test_wheels import require_test_wheels
from deepep_env.envspec.torch_wheels import require_torch
from deepep_env.envspec.wheel_pins import PyPIWheel
from deepep_env.base.versions import exact_value, is_exact, version_cmp, version_matches


def _exact(value: str, field: str, file: Path | None) -> str:
    if not is_exact(value):
        raise UserError(f"{show(value)} is a range; deepep-env does not build this component, so give the exact version "
                        "the lock must pin", file=file, field=field, accepted="an exact version such as '2.10.0'")
    return exact_value(value)


def _patches(names: list[str], catalog: Catalog, field: str, file: Path | None) -> list[RPatch]:
    out = []
    for n in names:
        if n not in catalog.patches:
            raise UserError(f"unknown patch {show(n)}", file=file, field=field,
                            accepted=", ".join(sorted(catalog.patches)) or "no patches are catalogued")
        out.append(RPatch(name=n, pin=catalog.patches[n]))
    return out


def _source_candidates(version: str, provider: str, catalog: Catalog | None, field: str, what: str,
                       file: Path | None) -> list[str]:
    """Versions to try, highest first: the catalogued ones a range matches when we build the
    component (``provider = "source"``), else the one exact version the lock must pin."""
    if provider != "source":
        return [_exact(version, field, file)]
    assert catalog is not None
    cands = [v for v in catalog.versions if version_matches(v, version)]
    if not cands:
        raise UserError(f"no catalogued {what} source matches {show(version)}", file=file, field=field,
                        accepted=", ".join(sorted(catalog.versions, key=cmp_to_key(version_cmp))))
    return sorted(cands, key=cmp_to_key(version_cmp), reverse=True)


def _check_platforms(spec: EnvSpec, file: Path | None) -> None:
    # A profile name the overlay does not know would otherwise pass validation and only surface
    # later, when detection/overlay look the profile up; the profiles table is plain data, cheap to read.
    for p in spec.platforms:
        if p not in PROFILES:
            raise UserError(f"unknown platform profile {show(p)}", file=file, field="platforms",
                            accepted=", ".join(sorted(PROFILES)))


def _test_wheels(spec: EnvSpec, recipes: Path, file: Path | None) -> dict[str, PyPIWheel]:
    """``[tests] wheels``' pins for the spec's Python, read up front (an unpinned project is refused in one line)."""
    if not spec.tests.wheels:
        return {}
    py = _exact(spec.python.version, "python.version", file)
    return require_test_wheels(recipes, spec.tests.wheels, py, spec.subdirs[0], file)


def _torch_closure(spec: EnvSpec, recipes: Path, file: Path | None) -> dict[str, PyPIWheel]:
    """A wheel-provided PyTorch's pinned closure, read up front (a torch with none is refused in one line)."""
    if spec.pytorch.provider != "wheel":
        return {}
    return require_torch(recipes, _exact(spec.pytorch.version, "pytorch.version", file), spec.subdirs[0], file)


def resolve(spec: EnvSpec, project: Project, file: Path | None = None) -> ResolvedSpec:
    decisions: list[str] = []
    _check_platforms(spec, file)
    recipes = project.recipes
    deepep_cat = load_catalog(recipes, "deep-ep")
    matches = [rev for rev in deepep_cat.revisions if rev.startswith(spec.deepep.revision)]
    if len(matches) != 1:
        what = "unknown" if not matches else "ambiguous"
        raise UserError(f"{what} DeepEP revision {show(spec.deepep.revision)}", file=file, field="deepep.revision",
                        accepted=", ".join(f"{r[:12]} ({e.label})" for r, e in deepep_cat.revisions.items()))
    rev = matches[0]
    rentry = deepep_cat.revisions[rev]

    nvshmem_cat = load_catalog(recipes, "nvshmem") if spec.nvshmem.provider == "source" else None
    nccl_cat = load_catalog(recipes, "nccl") if spec.nccl.provider == "source" else None
    gdr = None
    if spec.gdrcopy is not None:
        gcat = load_catalog(recipes, "gdrcopy")
        if spec.gdrcopy.version not in gcat.versions:
            raise UserError(f"unknown GDRCopy version {show(spec.gdrcopy.version)}", file=file, field="gdrcopy.version",
                            accepted=", ".join(sorted(gcat.versions)))
        gdr = RGdrcopy(version=spec.gdrcopy.version, source=gcat.versions[spec.gdrcopy.version].source)

    nic = spec.nvshmem.nic_handler
    if nic == "auto":
        # Field notes §1 failure 2: the CPU handler hangs internode dispatch on GCP B200; the GPU
        # handler needs neither GDRCopy nor its LD_PRELOAD. Choose it unless the spec says cpu.
        nic = "gpu"
        decisions.append("nvshmem.nic_handler: auto -> gpu (no GDRCopy needed; CPU handler hangs on GCP B200, seed 000)")

    arch_list = ";".join(spec.cuda.architectures)
    cuda = RCuda(**spec.cuda.model_dump())   # its wheels, when pinned, are read below
    base = dict(
        name=spec.name, version=spec.version, description=spec.description, platforms=spec.platforms,
        subdirs=list(spec.subdirs), channels=spec.channels, publish_url=spec.publish_url,
        python=RPython(**spec.python.model_dump()),
        cuda=cuda,
        pytorch=RPytorch(**{**spec.pytorch.model_dump(), "version": _exact(spec.pytorch.version, "pytorch.version", file),
                            "wheels": _torch_closure(spec, recipes, file)}),
        gdrcopy=gdr,
        deepep=RDeepEP(
            revision=rev, version=rentry.version, label=rentry.label, engine=rentry.engine,
            features=rentry.features, nvshmem_range=rentry.nvshmem, nccl_range=rentry.nccl,
            pytorch_range=rentry.pytorch, cuda_range=rentry.cuda, source=rentry.source,
            patches=_patches(spec.deepep.patches, deepep_cat, "deepep.patches", file),
            require=spec.deepep.require, aggressive_ptx=spec.deepep.aggressive_ptx, torch_cuda_arch_list=arch_list,
        ),
        toolchain=spec.toolchain, packages=list(spec.packages), host=spec.host, verify=spec.verify, env=spec.env,
        test_wheels=_test_wheels(spec, recipes, file),
    )
    nccls = [RNccl(version=v, provider=spec.nccl.provider, source=nccl_cat.versions[v].source if nccl_cat else None)
             for v in _source_candidates(spec.nccl.version, spec.nccl.provider, nccl_cat, "nccl.version", "NCCL", file)]
    if spec.cuda.provider == "wheel":   # read up front: a CUDA with no pinned toolkit is refused here
        base["cuda"] = cuda.model_copy(update={"wheels": require_toolkit(recipes, spec.cuda.version, spec.subdirs[0], file)})
    wheel = None
    if spec.nvshmem.provider == "wheel":
        wheel = wheel_source(require_wheel(recipes, _exact(spec.nvshmem.version, "nvshmem.version", file),
                                           spec.cuda.version, spec.subdirs[0], file))
        if spec.nvshmem.patches:
            raise UserError("a binary wheel takes no patches", file=file, field="nvshmem.patches",
                            accepted="[] (or provider = \"source\")")
    nvshmems = [RNvshmem(
        version=v, provider=spec.nvshmem.provider, ibgda=spec.nvshmem.ibgda, gdrcopy=spec.nvshmem.gdrcopy,
        nic_handler=nic, source=nvshmem_cat.versions[v].source if nvshmem_cat else wheel,
        patches=_patches(spec.nvshmem.patches, nvshmem_cat, "nvshmem.patches", file) if nvshmem_cat else [],
    ) for v in _source_candidates(spec.nvshmem.version, spec.nvshmem.provider, nvshmem_cat, "nvshmem.version", "NVSHMEM", file)]
    return _first_valid(spec, base, nccls, nvshmems, decisions, file)


def _range_note(field: str, asked: str, got: str, tried: list[str], i: int) -> str:
    skipped = tried[:i]
    note = f"{field}: {asked!r} -> {got} (highest catalogued that breaks no rule"
    return note + (f"; skipped {', '.join(skipped)})" if skipped else ")")


def _first_valid(spec: EnvSpec, base: dict, nccls: list[RNccl], nvshmems: list[RNvshmem], decisions: list[str],
                 file: Path | None) -> ResolvedSpec:
    """The first candidate (highest NCCL, then highest NVSHMEM) that breaks no rule; else the first
    violation seen, as the error."""
    first_error: tuple[Rule, str] | None = None
    for i, nccl in enumerate(nccls):
        for j, nv in enumerate(nvshmems):
            cand = ResolvedSpec(**base, nccl=nccl, nvshmem=nv, decisions=list(decisions))
            bad = violations(cand)
            if bad:
                first_error = first_error or bad[0]
                continue
            notes = list(decisions)
            for field, asked, tried, k in (("nccl.version", spec.nccl.version, [n.version for n in nccls], i),
                                           ("nvshmem.version", spec.nvshmem.version, [n.version for n in nvshmems], j)):
                if len(tried) > 1 or not is_exact(asked):
                    notes.append(_range_note(field, asked, tried[k], tried, k))
            return cand.model_copy(update={"decisions": notes})
    assert first_error is not None   # both candidate lists are non-empty (_source_candidates)
    rule, msg = first_error
    raise UserError(f"{msg} [rule {rule.id}: {rule.source}]", file=file, field=rule.field)


def load_resolved(name_or_path: str, project: Project | None = None) -> ResolvedSpec:
    """Resolve a spec by name (``env_specs/<name>.toml``) or by path."""
    project = project or find_project()
    p = Path(name_or_path)
    if p.suffix == ".toml" or "/" in name_or_path:
        path = p
    else:
        path = project.spec_path(name_or_path)
        if path.is_symlink() and not path.exists():   # exists() is False for a loop or a dangling link
            raise UserError("the spec is a symbolic link that resolves to nothing (a loop, or a target that is "
                            "gone)", file=path, accepted="a regular TOML file, or a link to one")
        if not path.exists():
            raise UnknownEnvError(f"unknown env {name_or_path!r}", field="ENV",
                            accepted=", ".join(project.spec_names()) or "no specs in env_specs/")
    spec = load_spec_file(path)
    return resolve(spec, project, file=path)
