"""What a prefix holds, read from its package records (``conda-meta/*.json``), and the install
marker made from them (:class:`~deepep_env.formats.prefix.PrefixMarker`).

The installer writes a marker from these (:func:`new_marker`); the host context reads a prefix pixi
installed, which has package records but no marker of ours, through :func:`unmarked_prefix_meta`:
the marker's fields as the spec gives them, the interpreter as the prefix holds it. Here, in
``formats/``, so that ``host/`` reads a prefix without importing the installer (issue 41). rattler
is imported where a record is read (its import costs ~100 ms; the marked fast path never needs it).
"""
from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any, Iterable

from deepep_env.base.channels.auth import redact
from deepep_env.formats.prefix import LEGACY_RELPATH, PrefixMarker, PrefixMeta
from deepep_env.formats.stamps import PREFIX_MARKER


def current_subdir() -> str:
    """This machine's conda subdir (``linux-64``), as rattler names it."""
    from rattler import Subdir

    return str(Subdir.current())


def installed_records(prefix: Path) -> list[Any]:
    """The package records of ``prefix`` (rattler ``PrefixRecord``s), name order; a foreign or
    half-written record is skipped (rattler replaces it on the next install)."""
    from rattler import PrefixRecord

    meta = prefix / "conda-meta"
    out = []
    if meta.is_dir():
        for p in sorted(meta.glob("*.json")):
            if p.name == Path(LEGACY_RELPATH).name:   # the marker deepep-env < 0.3 wrote
                continue
            try:
                out.append(PrefixRecord.from_path(p))
            except Exception:  # noqa: BLE001 - a foreign or half-written record: let rattler replace it
                continue
    return out


def new_marker(env: str, pfx: Path, lock: Path, lock_sha: str, subdir: str, marker_base: dict[str, Any],
               installed: Iterable[Any], locked: Iterable[Any]) -> PrefixMarker:
    """A new marker: the lock's packages, the spec's fields (``marker_base``), the interpreter installed."""
    installed = list(installed)
    packages = [{"name": p.name, "version": p.version, "build": p.build, "sha256": p.sha256 or "", "url": redact(p.url)}
                for p in sorted(locked, key=lambda p: p.name)]
    python = dict(marker_base.get("python") or {})
    if python.get("provider") == "conda" or (not python and any(x.name.normalized == "python" for x in installed)):
        # The interpreter is the env's own: record the exact version the lock installed. "version"
        # is major.minor (what activate/run read: lib/python3.X/site-packages).
        full = next((str(x.version) for x in installed if x.name.normalized == "python"), python.get("version") or "")
        python = {"provider": "conda", "version": ".".join(full.split(".")[:2]), "full_version": full,
                  "executable": str(pfx / "bin" / "python")}
    return PrefixMarker({
        "format": PREFIX_MARKER.stamp,
        "env": env,
        **{k: v for k, v in marker_base.items() if k != "python"},
        "platforms": list(marker_base.get("platforms") or []),
        "python": python,
        "subdir": subdir,
        "spec_env": dict(marker_base.get("spec_env") or {}),
        "lock": str(lock.resolve()),
        "lock_sha256": lock_sha,
        "installed_at": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "packages": packages,
    })


def unmarked_prefix_meta(env: str, spec_env: str, pfx: "str | Path", spec_fields: dict[str, Any]) -> PrefixMeta:
    """What the marker would say of a prefix pixi (or rattler) installed, which has none of ours:
    the spec's fields (``spec_fields``, :func:`deepep_env.envspec.resolved.spec_marker` of the spec
    named ``spec_env``), and the interpreter the prefix holds. Read-only (``install`` adopts it)."""
    pfx = Path(pfx)
    m = new_marker(spec_env, pfx, Path(""), "", current_subdir(), spec_fields, installed_records(pfx), [])
    return PrefixMarker(m.fields, str(pfx / "conda-meta")).meta(str(pfx), env)
