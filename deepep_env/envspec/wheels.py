"""NVIDIA's NVSHMEM wheels as pinned options: ``recipes/nvshmem-wheel/sources.toml``.

Each ``[versions."V".cuNN.<subdir>]`` is one wheel of ``nvidia-nvshmem-cuNN==V`` (its PyPI file name,
URL and ``sha256``). :func:`nvshmem_options` is what ``deepep-env plan`` shows: every NVSHMEM version
either catalog pins (source by tree hash, wheel by sha256), its RC-QP layout class, and whether the
spec's rules accept it (DeepEP's revision, the 3.5.19 layout change, torch's pins) — so a spec that
cannot fetch a source tarball sees which pinned wheel it could use.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Optional

from pydantic import Field

from deepep_env.base.errors import UserError
from deepep_env.envspec.catalog import load_catalog
from deepep_env.envspec.load import show
from deepep_env.envspec.model import Strict
from deepep_env.envspec.wheel_pins import WheelPin, read_wheel_catalog
from deepep_env.envspec.resolved import ResolvedSpec
from deepep_env.envspec.rules import violations
from deepep_env.base.versions import version_cmp, version_lt

PACKAGE = "nvshmem-wheel"
LAYOUT_CHANGE = "3.5.19"  # NVSHMEM 3.5.21 release notes: RC-QP layout changed starting in 3.5.19


class WheelCatalog(Strict):
    format: int
    package: str
    versions: dict[str, dict[str, dict[str, WheelPin]]] = Field(default_factory=dict)  # V -> cuNN -> subdir -> pin


def load_wheels(recipes_dir: Path) -> WheelCatalog:
    path = recipes_dir / PACKAGE / "sources.toml"
    cat = read_wheel_catalog(path, WheelCatalog, PACKAGE, "wheel")
    for v, per_cuda in cat.versions.items():
        for cu, per_subdir in per_cuda.items():
            for sd, pin in per_subdir.items():
                if not pin.filename.startswith(f"nvidia_nvshmem_{cu}-{v}-") or pin.url.rsplit("/", 1)[-1] != pin.filename:
                    raise UserError(f"{pin.filename} is not nvidia-nvshmem-{cu}=={v}", file=path, field=f"versions.{v}.{cu}.{sd}")
    return cat


def wheel_pin(cat: WheelCatalog, version: str, cuda_version: str, subdir: str) -> Optional[WheelPin]:
    return cat.versions.get(version, {}).get(f"cu{cuda_version.split('.')[0]}", {}).get(subdir)


def require_wheel(recipes_dir: Path, version: str, cuda_version: str, subdir: str,
                  file: Optional[Path] = None) -> WheelPin:
    """The pinned wheel for ``nvshmem.provider = "wheel"``, or one line saying what is missing."""
    cat = load_wheels(recipes_dir)
    cu = f"cu{cuda_version.split('.')[0]}"
    where = f"recipes/{PACKAGE}/sources.toml"
    if version not in cat.versions:
        raise UserError(f"no pinned NVSHMEM wheel for version {show(version)} in {where}", file=file,
                        field="nvshmem.version",
                        accepted=", ".join(sorted(cat.versions, key=functools.cmp_to_key(version_cmp))))
    per_cuda = cat.versions[version]
    if cu not in per_cuda:
        raise UserError(f"NVSHMEM {version} has no pinned nvidia-nvshmem-{cu} wheel for CUDA {cuda_version} in {where}",
                        file=file, field="nvshmem.version",
                        accepted=f"CUDA majors with a wheel of {version}: " + ", ".join(sorted(per_cuda)))
    pin = per_cuda[cu].get(subdir)
    if pin is None:
        raise UserError(f"NVSHMEM {version} has no pinned nvidia-nvshmem-{cu} wheel for {subdir} in {where}",
                        file=file, field="subdirs", accepted=", ".join(sorted(per_cuda[cu])))
    return pin


def layout_class(version: str) -> str:
    return ">=3.5.19" if not version_lt(version, LAYOUT_CHANGE) else "<3.5.19"


def nvshmem_options(r: ResolvedSpec, project: Any) -> list[dict[str, Any]]:
    """Every catalogued NVSHMEM version for this spec: its source and wheel pins, layout class, and the
    first rule that refuses it for this spec (None: allowed)."""
    recipes = Path(project.recipes)
    wheels = load_wheels(recipes)
    try:
        src = load_catalog(recipes, "nvshmem").versions
    except UserError:
        src = {}
    subdir = r.subdirs[0] if r.subdirs else "linux-64"
    out = []
    for v in sorted(set(src) | set(wheels.versions), key=functools.cmp_to_key(version_cmp), reverse=True):
        entry = src.get(v)
        pin = wheel_pin(wheels, v, r.cuda.version, subdir)
        cand = r.model_copy(update={"nvshmem": r.nvshmem.model_copy(update={"version": v})})
        bad = violations(cand)
        out.append({
            "version": v,
            "layout": layout_class(v),
            "source": None if entry is None else ("pinned" if entry.source.pinned else "unpinned"),
            "wheel": None if pin is None else {"package": f"nvidia-nvshmem-cu{r.cuda.version.split('.')[0]}",
                                               "subdir": subdir, "filename": pin.filename, "url": pin.url,
                                               "sha256": pin.sha256, "size": pin.size},
            "refused_by": None if not bad else {"rule": bad[0][0].id, "message": bad[0][1]},
            "selected": v == r.nvshmem.version,
        })
    return out


def wheel_suggestion(r: ResolvedSpec, options: list[dict[str, Any]]) -> Optional[str]:
    """``plan``'s line where the spec builds NVSHMEM from a source that is not pinned (no tree hash:
    it cannot be built) and a wheel of that version is pinned: the spec edit that makes it buildable."""
    if r.nvshmem.provider != "source" or (r.nvshmem.source is not None and r.nvshmem.source.pinned):
        return None
    sel = next((o for o in options if o["selected"]), None)
    if sel is None or sel["wheel"] is None:
        return None
    w, v = sel["wheel"], r.nvshmem.version
    head = f"NVSHMEM {v}: its source is not pinned (it cannot be built); NVIDIA's wheel {w['package']}=={v} is pinned"
    if r.nvshmem.patches:   # a binary wheel takes no patch: offering it would drop the spec's patch
        names = ", ".join(p.name for p in r.nvshmem.patches)
        return (f"{head} but unpatched, and this spec patches NVSHMEM ({names}): only a pinned source will do "
                f"(`deepep-env fetch {r.name}` on a machine with network)")
    return (f"{head} ({w['sha256'][:19]}…): set [nvshmem] version = \"{v}\" (the wheel catalog pins exact "
            f"versions) and provider = \"wheel\"")
