"""The base every stage imports: typed errors, hashing, atomic writes, bounded file reads, the
project's paths (and the default prefix), child processes, versions, channel URLs and the secrets
in them (:mod:`~deepep_env.base.channels`), rattler's errors as one line, and the layers
themselves (:mod:`~deepep_env.base.layers`).

Modules are imported directly; this package imports nothing, so the activate fast path (which
imports ``errors``, ``project``, ``readfile`` and ``atomic``) stays stdlib-only.
"""
