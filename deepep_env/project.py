"""Where a deepep-env project lives: the folder holding env_specs/, recipes/, lockfiles/, pixi.toml.

Found from ``--project``, else ``$DEEPEP_ENV_PROJECT``, else the nearest parent of the current
directory that has ``env_specs/``. Tool state (store, local channel, installed prefixes) lives in
``<project>/.deepep-env/`` unless overridden, so two checkouts never share half-built state.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from deepep_env.errors import UserError

STATE_DIRNAME = ".deepep-env"


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
    def lockfiles(self) -> Path:
        return self.root / "lockfiles"

    @property
    def pixi_toml(self) -> Path:
        return self.root / "pixi.toml"

    @property
    def state(self) -> Path:
        return Path(os.environ.get("DEEPEP_ENV_STATE") or (self.root / STATE_DIRNAME))

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
        return self.state / "envs" / env

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
    here = Path.cwd().resolve()
    for cand in (here, *here.parents):
        if (cand / "env_specs").is_dir():
            return Project(cand)
    raise UserError("no deepep-env project found from the current directory (looked for env_specs/)",
                    accepted="run inside a clone of deepep-env, or pass --project DIR / set DEEPEP_ENV_PROJECT")
