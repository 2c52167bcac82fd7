"""Where a deepep-env project lives: the folder holding env_specs/, recipes/, pixi.toml, pixi.lock.

Found from ``--project``, else ``$DEEPEP_ENV_PROJECT``, else the nearest parent of the current
directory that has ``env_specs/``. Tool state (store, local channel, sources) lives in
``<project>/.deepep-env/`` unless overridden, so two checkouts never share half-built state;
installed environments live where pixi puts them, ``<project>/.pixi/envs/<env>``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from deepep_env.base.errors import UserError

STATE_DIRNAME = ".deepep-env"


# The two rules below are the only place that says where a project and its state are. They import
# nothing heavy: the activate fast path (formats/prefix.py) uses them too.
def nearest_root(cwd: Path, environ: Optional[Mapping[str, str]] = None) -> Optional[Path]:
    """``$DEEPEP_ENV_PROJECT``, else the nearest of ``cwd`` and its parents with ``env_specs/``."""
    environ = os.environ if environ is None else environ
    if environ.get("DEEPEP_ENV_PROJECT"):
        return Path(environ["DEEPEP_ENV_PROJECT"])
    return next((d for d in (cwd, *cwd.parents) if (d / "env_specs").is_dir()), None)


def pixi_env_name(spec_name: str) -> str:
    """pixi environment names allow ``[a-z0-9-]`` only; spec names may also have ``.`` and ``_``."""
    return spec_name.replace(".", "-").replace("_", "-")


# The default prefix, written once: pixi's environments folder under the workspace, one folder per
# environment. :func:`envs_dir` and :meth:`Project.prefix_for` build it; CLI help and docs quote
# DEFAULT_PREFIX (``ENV`` stands for the env's pixi name, :func:`pixi_env_name`).
ENVS_DIR = ".pixi/envs"
DEFAULT_PREFIX = f"{ENVS_DIR}/ENV"


def envs_dir(root: Path) -> Path:
    """pixi's environments folder for a workspace at ``root``."""
    return root / ENVS_DIR


def state_dir(root: Path, environ: Optional[Mapping[str, str]] = None) -> Path:
    """``$DEEPEP_ENV_STATE``, else ``<root>/.deepep-env``."""
    environ = os.environ if environ is None else environ
    return Path(environ.get("DEEPEP_ENV_STATE") or (root / STATE_DIRNAME))


@dataclass(frozen=True)
class Project:
    root: Path

    @property
    def env_specs(self) -> Path:
        return self.root / "env_specs"

    @property
    def recipes(self) -> Path:
        return self.root / "recipes"

    @property
    def pixi_toml(self) -> Path:
        return self.root / "pixi.toml"

    @property
    def pixi_lock(self) -> Path:
        """The one lock of the project, every environment in it: where pixi reads it."""
        return self.root / "pixi.lock"

    @property
    def state(self) -> Path:
        return state_dir(self.root)

    @property
    def store(self) -> Path:
        return self.state / "store"

    @property
    def channel(self) -> Path:
        return self.state / "channel"

    @property
    def source_cache(self) -> Path:
        return Path(os.environ.get("DEEPEP_ENV_SOURCE_CACHE") or (self.state / "sources"))

    def prefix_for(self, env: str) -> Path:
        """Where an environment is installed: pixi's own layout, ``<project>/.pixi/envs/<env>``, so
        ``pixi run``, ``deepep-env task`` and ``deepep-env activate`` use one prefix."""
        return envs_dir(self.root) / pixi_env_name(env)

    def spec_path(self, name: str) -> Path:
        return self.env_specs / f"{name}.toml"

    def spec_names(self) -> list[str]:
        return sorted(p.stem for p in self.env_specs.glob("*.toml"))


def find_project(start: str | Path | None = None) -> Project:
    explicit = start or os.environ.get("DEEPEP_ENV_PROJECT")
    if explicit:
        root = Path(explicit).resolve()
        if not (root / "env_specs").is_dir():
            raise UserError("not a deepep-env project (no env_specs/ folder)", file=root,
                            accepted="a folder with env_specs/ and recipes/, e.g. a clone of deepep-env")
        return Project(root)
    found = nearest_root(Path.cwd().resolve(), {})
    if found is not None:
        return Project(found)
    raise UserError("no deepep-env project found from the current directory (looked for env_specs/)",
                    accepted="run inside a clone of deepep-env, or pass --project DIR / set DEEPEP_ENV_PROJECT")
