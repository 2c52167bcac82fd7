"""Source cache: fetch, verify by content, stage and patch (docs/build-id.md §3).

- :class:`SourceCache` — ``<cache>/trees/<hex>/`` and ``<cache>/patches/<hex>``, content-addressed.
- :func:`fetch` — fill the cache from the cache itself, a local folder (``--from``), URLs, then git.
- :func:`wants_for_nodes` — what a list of build nodes needs from the cache.
- :func:`stage` — copy verified trees into a work dir and apply patches, for a ``path:`` source.
"""
from deepep_env.sources.cache import SourceCache, unpack
from deepep_env.sources.fetch import FetchItem, FetchReport, Want, fetch, import_dir, require_present, wants_for_nodes
from deepep_env.sources.stage import primary_source, stage

__all__ = [
    "SourceCache", "unpack", "FetchItem", "FetchReport", "Want", "fetch", "import_dir", "require_present",
    "wants_for_nodes", "stage", "primary_source",
]
