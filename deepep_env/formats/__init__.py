"""The file formats deepep-env reads and writes, below every stage that uses them.

- :mod:`~deepep_env.formats.stamps`: format stamps (``deepep-env/<name>/v<N>``) and the one refusal
  of a stamp the tool cannot read. Stdlib only.
- :mod:`~deepep_env.formats.prefix`: a prefix's install marker (``conda-meta/deepep-env``,
  :class:`~deepep_env.formats.prefix.PrefixMarker`) and where a prefix is. Stdlib only: the
  activate fast path reads it.
- :mod:`~deepep_env.formats.lockfile`: the ``pixi.lock`` reader and writer (:class:`LockData`).
- :mod:`~deepep_env.formats.lock_platforms`: lock platforms (subdir + CUDA → name and virtual
  packages), pure data.
- :mod:`~deepep_env.formats.build_inputs`: ``lockfiles/build-inputs.json``, the build inputs record
  ``lock`` writes and the planner and the realiser read back.

Modules are imported directly; this package imports nothing, so importing one (the activate path
imports ``stamps`` and ``prefix``) never loads rattler.
"""
