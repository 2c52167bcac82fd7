"""The host overlay: typed environment changes with provenance, and their renderings.

Modules, one job each (imported directly; this package imports nothing, so importing one never
drags in the others): ``changes`` (the typed changes), ``rulebase`` + ``rules`` + ``rules_v2`` (facts
→ changes), ``known_vars`` (what names may be set), ``prefix`` (an installed prefix and its marker),
``activation`` (a prefix's own activation), ``render`` (shells and manifests), ``hook`` (conda's
activate.d). The pipeline that combines them for a command is :mod:`deepep_env.host.context`.
Stdlib-only, like ``platform/``.
"""
