"""The build stage: a resolved spec becomes a build plan, the plan becomes packages in a channel.

Modules, in the order the data flows through them:

- :mod:`~deepep_env.builder.recipegraph`: recipes read with rattler-build's parser; their edges
  and build order.
- :mod:`~deepep_env.builder.toolpkg`: the deepep-env package every env holds: the activation modules alone.
- :mod:`~deepep_env.builder.plan`: the build plan: :class:`BuildNode` per package, pre-images,
  build ids (docs/build-id.md).
- :mod:`~deepep_env.builder.build`: the builder: walk a plan in dependency order, build what the
  store does not have (:func:`build_env`, :func:`build_graph`, :func:`build_recipes`).
- :mod:`~deepep_env.builder.driver`, :mod:`~deepep_env.builder.resolution`,
  :mod:`~deepep_env.builder.normalize`, :mod:`~deepep_env.builder.store`,
  :mod:`~deepep_env.builder.channel`, :mod:`~deepep_env.builder.check`,
  :mod:`~deepep_env.builder.pkgcache`: rattler-build, its pre-resolution, reproducible archives,
  the store, the build channel, byte comparisons, the package cache.
- :mod:`~deepep_env.builder.realise`: substitute-or-build for an install; :mod:`~deepep_env.builder.copies`,
  verified copies of packages; :mod:`~deepep_env.builder.fetch_env`, :mod:`~deepep_env.builder.preview`.

The builder's entry points are re-exported here; the library imports them from
:mod:`deepep_env.builder.build`.
"""
from deepep_env.builder.build import (
    DEFAULT_BUILD_ROOT,
    BuildReport,
    CheckResult,
    NodeResult,
    Progress,
    build_env,
    build_graph,
    build_recipes,
    build_root,
    check_against_lock,
    mirror_aliases,
    spec_channels_for_build,
    write_manifest,
)

__all__ = ["DEFAULT_BUILD_ROOT", "BuildReport", "CheckResult", "NodeResult", "Progress", "build_env", "build_graph",
           "build_recipes", "build_root", "check_against_lock", "mirror_aliases", "spec_channels_for_build",
           "write_manifest"]
