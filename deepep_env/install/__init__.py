"""The install stage: a lock environment installed into a prefix, verified, swapped in whole and
marked (:mod:`~deepep_env.install.installer`; the marker's type is
:mod:`deepep_env.formats.prefix`).

Modules are imported directly; this package imports nothing.
"""
