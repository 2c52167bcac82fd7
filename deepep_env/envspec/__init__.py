"""Env specs: abstract (model) → resolved, with compatibility rules and source catalogs."""
from deepep_env.envspec.load import load_spec_file, parse_spec_text
from deepep_env.envspec.model import EnvSpec
from deepep_env.envspec.resolve import load_resolved, resolve
from deepep_env.envspec.resolved import ResolvedSpec

__all__ = ["EnvSpec", "ResolvedSpec", "load_spec_file", "parse_spec_text", "resolve", "load_resolved"]
