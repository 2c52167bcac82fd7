"""``deepep-env fetch``: fill the source cache with everything an env (or a recipe folder) builds from.

The GPU machine has no network: its cache is filled from upstream copies carried in a local folder
(``fetch ENV --from .gpu/sources``), matched by content, so a tarball's file name or origin never
matters — only that it unpacks to the pinned tree.

It plans the env (:mod:`deepep_env.builder.plan`) to know what to fetch, so it sits with the builder,
above ``sources/`` (the cache itself), not in it: docs/architecture.md, layers.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

from deepep_env.builder.graph import nodes_from_recipe_dirs, recipe_dirs_under
from deepep_env.builder.plan import plan
from deepep_env.base.errors import UserError
from deepep_env.sources.cache import SourceCache
from deepep_env.sources.fetch import FetchReport, fetch, unpinned_error, wants_for_nodes
from deepep_env.envspec import load_resolved

if TYPE_CHECKING:  # annotations only: no import at run time
    from deepep_env.base.project import Project


def fetch_sources(env: Optional[str], project: Project, *, recipes_dir: Optional[Path] = None,
                  cache: Optional[Path] = None, offline: bool = False,
                  from_dir: Optional[Path] = None) -> FetchReport:
    """Fetch and verify every source and patch of env ``env`` (or of the recipes under
    ``recipes_dir``). Offline, anything still absent is an error naming it."""
    if recipes_dir is not None:
        nodes = nodes_from_recipe_dirs(recipe_dirs_under(Path(recipes_dir)))
        hint = f"deepep-env fetch --recipes {recipes_dir}"
    else:
        if not env:
            raise UserError("name an env (or pass --recipes DIR)", field="ENV",
                            accepted=", ".join(project.spec_names()) or "a spec in env_specs/")
        nodes = list(plan(load_resolved(env, project), project).nodes)
        hint = f"deepep-env fetch {env}"
    root = Path(cache) if cache is not None else project.source_cache
    report = fetch(wants_for_nodes(nodes), SourceCache(root), offline=offline, from_dir=from_dir)
    if report.missing:
        w = report.missing[0].want
        more = f" (and {len(report.missing) - 1} more)" if len(report.missing) > 1 else ""
        where = f" nor in {from_dir}" if from_dir else ""
        if w.digest is None:  # nothing to look for offline: the pin itself is missing
            raise unpinned_error(w, hint, more)
        raise UserError(f"package {w.package}: {w.kind} {w.name} ({w.digest}) is not in the source cache {root}"
                        f"{where} and --offline is set{more}",
                        accepted=f"`{hint}` with network, or `{hint} --from DIR` with local upstream copies")
    return report
