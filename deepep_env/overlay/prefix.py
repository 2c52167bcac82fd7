"""Find an installed env prefix and read the small JSON file the installer leaves in it.

``<prefix>/conda-meta/deepep-env.json`` (written by the install step)::

    {"env": "gcp-b200", "platforms": ["gcp-b200"],
     "python": {"provider": "host" | "conda", "version": "3.12", "executable": "/opt/…/python3"},
     "spec_env": {"NVSHMEM_QP_DEPTH": "1024"}}

``python.executable`` is optional. Unknown keys are ignored (a newer installer may add some).

Where the prefix is, in order: ``--prefix``; ``$DEEPEP_ENV_PREFIX`` (the prefix itself); else where
``deepep-env install`` and pixi put it: ``<project>/.pixi/envs/<ENV>`` (deepep_env/project.py).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Optional

from deepep_env.errors import UserError
from deepep_env.formats import PREFIX_MARKER
from deepep_env.project import envs_dir, nearest_root, pixi_env_name
from deepep_env.readfile import MAX_CONFIG_BYTES, read_json

META_RELPATH = os.path.join("conda-meta", "deepep-env.json")


def marker_path(prefix: "str | os.PathLike[str]") -> Path:
    """The one place that says where a prefix's deepep-env marker is."""
    return Path(prefix) / META_RELPATH


def has_marker(prefix: "str | os.PathLike[str]") -> bool:
    return marker_path(prefix).is_file()
ENV_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
PREFIX_ENV_VAR = "DEEPEP_ENV_PREFIX"


class PrefixMeta(NamedTuple):
    env: str
    prefix: str
    platforms: tuple[str, ...]
    python_provider: str  # "host" | "conda"
    python_version: Optional[str]
    python_executable: Optional[str]
    spec_env: Mapping[str, str]

    def site_packages(self) -> Optional[str]:
        if not self.python_version:
            return None
        return os.path.join(self.prefix, "lib", f"python{self.python_version}", "site-packages")


def check_env_name(env: str) -> str:
    if not ENV_NAME_RE.match(env or ""):
        raise UserError(f"not an env name: {env!r}", field="ENV", accepted="letters, digits, '.', '_', '-' (no '/')")
    return env


def default_prefix(env: str, cwd: Optional[str] = None, environ: Optional[Mapping[str, str]] = None) -> Path:
    check_env_name(env)
    environ = os.environ if environ is None else environ
    if environ.get(PREFIX_ENV_VAR):
        return Path(environ[PREFIX_ENV_VAR])
    # Where install put it: Project.prefix_for, by the same rules (deepep_env.project): pixi's layout.
    here = Path(cwd or os.getcwd())
    return envs_dir(nearest_root(here, environ) or here) / pixi_env_name(env)


def find_prefix(
    env: str,
    prefix: Optional[str | os.PathLike[str]] = None,
    cwd: Optional[str] = None,
    environ: Optional[Mapping[str, str]] = None,
) -> Path:
    check_env_name(env)
    return Path(prefix) if prefix is not None else default_prefix(env, cwd, environ)


def read_prefix_meta(prefix: str | os.PathLike[str], env: Optional[str] = None) -> PrefixMeta:
    """Read ``<prefix>/conda-meta/deepep-env.json``; UserError when missing, malformed, or
    naming another env than ``env``."""
    prefix = os.path.abspath(os.fspath(prefix))
    path = os.path.join(prefix, META_RELPATH)
    if not os.path.lexists(path):
        what = f"env {env!r} is not installed there" if env else "no deepep-env install there"
        raise UserError(f"{what} (no {META_RELPATH})", file=prefix, accepted=f"run `deepep-env install {env or 'ENV'}` first, or pass --prefix")
    data: Any = read_json(path, what="install marker", limit=MAX_CONFIG_BYTES)
    if not isinstance(data, dict):
        raise UserError("expected a JSON object", file=path)
    PREFIX_MARKER.check(data, file=path, missing=1)   # markers before stamps had none: read as v1
    name = data.get("env")
    if not isinstance(name, str) or not ENV_NAME_RE.match(name):
        raise UserError("missing or invalid", file=path, field="env")
    if env is not None and name != env:
        raise UserError(f"this prefix holds env {name!r}, not {env!r}", file=path, field="env")
    platforms = data.get("platforms", [])
    if not isinstance(platforms, list) or not all(isinstance(p, str) for p in platforms):
        raise UserError("must be a list of platform names", file=path, field="platforms")
    py = data.get("python") or {}
    if not isinstance(py, dict):
        raise UserError("must be an object", file=path, field="python")
    provider = py.get("provider", "conda")
    if provider not in ("host", "conda"):
        raise UserError(f"unknown provider {provider!r}", file=path, field="python.provider", accepted="host, conda")
    version = py.get("version")
    if version is not None and not (isinstance(version, str) and re.match(r"^3\.\d+$", version)):
        raise UserError(f"not a Python major.minor: {version!r}", file=path, field="python.version")
    executable = py.get("executable")
    if executable is not None and not isinstance(executable, str):
        raise UserError("must be a path", file=path, field="python.executable")
    spec_env = data.get("spec_env") or {}
    if not isinstance(spec_env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in spec_env.items()):
        raise UserError("must map names to strings", file=path, field="spec_env")
    return PrefixMeta(
        env=name,
        prefix=prefix,
        platforms=tuple(platforms),
        python_provider=provider,
        python_version=version,
        python_executable=executable,
        spec_env=dict(spec_env),
    )
