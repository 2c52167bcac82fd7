"""What to publish: the builder's manifest for an env, or explicit package files.

The builder writes ``<state>/builds/<ENV>.json`` (format ``deepep-env/build-manifest/v1``):
``{"env", "channel": "/abs/local/channel", "packages": [{"name", "version", "build", "subdir",
"file": "linux-64/x.conda", "build_id": "sha256:…"}]}``. Each package's metadata is re-read from
the archive itself (``info/index.json``) and must agree with the manifest: a package published
under the wrong subdir would be invisible to the solver.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Optional

from deepep_env.builder.copies import check_copy, store_sha
from deepep_env.base.errors import UserError
from deepep_env.formats.stamps import BUILD_MANIFEST
from deepep_env.base.hashing import file_sha256
from deepep_env.base.project import find_project
from deepep_env.publish.model import LocalPackage
from deepep_env.base.rattler_errors import rattler_errors
from deepep_env.base.readfile import MAX_CONFIG_BYTES, read_json

PACKAGE_SUFFIXES = (".conda", ".tar.bz2")


def state_dir(state: str | Path | None, project: str | Path | None = None) -> Path:
    """``--state`` > ``$DEEPEP_ENV_STATE`` > the project's ``.deepep-env`` > ``./.deepep-env``."""
    if state:
        return Path(state)
    if os.environ.get("DEEPEP_ENV_STATE"):
        return Path(os.environ["DEEPEP_ENV_STATE"])
    try:
        return find_project(project).state
    except UserError:
        if project:
            raise
        return Path.cwd() / ".deepep-env"


def manifest_path(env: str, state: str | Path | None, project: str | Path | None = None) -> Path:
    return state_dir(state, project) / "builds" / f"{env}.json"


def inspect_package(path: str | Path, *, build_id: str | None = None) -> LocalPackage:
    """Read name/version/build/subdir from the archive's ``info/index.json``."""
    path = Path(path)
    if not path.is_file():
        raise UserError("package file not found", file=path)
    if not path.name.endswith(PACKAGE_SUFFIXES):
        raise UserError("not a conda package file", file=path, accepted="*.conda, *.tar.bz2")
    from rattler.package import IndexJson

    with rattler_errors("cannot read the package's info/index.json: {error}", file=path, first_line=True):
        index = IndexJson.from_package_archive(path)
    subdir = index.subdir or ("noarch" if index.noarch and not index.noarch.none else None)
    if not subdir:
        raise UserError("package has no subdir in info/index.json", file=path)
    return LocalPackage(
        path=path.resolve(),
        subdir=str(subdir),
        name=index.name.normalized,
        version=str(index.version),
        build=str(index.build),
        sha256=file_sha256(path),
        size=path.stat().st_size,
        build_id=build_id,
    )


def _check_copy(pkg: LocalPackage, entry: dict, store: object, env: str, path: Path, field: str) -> None:
    """The channel file is the one the build recorded: its sha256 is the manifest's and, when the
    store still has the entry, the store's. Checked before anything is uploaded."""
    want = entry.get("sha256")
    if not isinstance(want, str) or not want:
        raise UserError(f"the manifest records no sha256: rebuild with `deepep-env build {env}`", file=path,
                        field=f"{field}.sha256")
    expected: list[tuple[str, Optional[str]]] = [(f"the build manifest {path}", want)]
    if isinstance(store, str) and store and isinstance(entry.get("build_id"), str):
        expected.append((f"the store {store}", store_sha(Path(store), entry["build_id"], entry["file"])))
    check_copy(pkg.path, expected, fix=f"nothing published; `deepep-env build {env}` copies it again from the store")


def read_manifest(env: str, state: str | Path | None, project: str | Path | None = None) -> list[LocalPackage]:
    path = manifest_path(env, state, project)
    data = read_json(path, what="build manifest", limit=MAX_CONFIG_BYTES,
                     missing=f"no build manifest for env {env!r}: run `deepep-env build {env}` first")
    BUILD_MANIFEST.check(data, file=path)
    channel = data.get("channel")
    if not isinstance(channel, str) or not channel:
        raise UserError("missing the local channel path", file=path, field="channel")
    entries = data.get("packages")
    if not isinstance(entries, list) or not entries:
        raise UserError(f"the manifest lists no packages: run `deepep-env build {env}` first",
                        file=path, field="packages")
    out = []
    for i, entry in enumerate(entries):
        field = f"packages[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            raise UserError("each package needs a `file` (relative to `channel`)", file=path, field=field)
        pkg = inspect_package(Path(channel) / entry["file"], build_id=entry.get("build_id"))
        _check_copy(pkg, entry, data.get("store"), env, path, field)
        for key in ("name", "version", "build", "subdir"):
            want = entry.get(key)
            have = getattr(pkg, key)
            if want is not None and str(want) != have:
                raise UserError(
                    f"manifest says {key}={want!r} but the archive says {have!r}: rebuild with "
                    f"`deepep-env build {env}`", file=path, field=f"{field}.{key}")
        out.append(pkg)
    return out


def collect(env: str | None, packages: Iterable[str | Path], state: str | Path | None,
            project: str | Path | None = None) -> list[LocalPackage]:
    files = list(packages)
    if files:
        pkgs = [inspect_package(f) for f in files]
    elif env:
        pkgs = read_manifest(env, state, project)
    else:
        raise UserError("nothing to publish", accepted="an env name (with a build manifest) or --package FILE")
    seen: dict[str, LocalPackage] = {}
    for p in pkgs:
        other = seen.get(p.key)
        if other is not None and other.sha256 != p.sha256:
            raise UserError(f"two different files would be published as {p.key}", file=p.path,
                            accepted="one file per channel path")
        seen[p.key] = p
    return sorted(seen.values(), key=lambda p: p.key)
