"""Command-level views over the stages below: ``plan`` (:mod:`~deepep_env.views.planning`, a spec
followed to doctor, as data), ``task`` (:mod:`~deepep_env.views.tasks`) and the host's view of a
prefix (:mod:`~deepep_env.views.hostview`). ``publish/`` and ``fleet/`` sit in the same layer.

Modules are imported directly; this package imports nothing.
"""
