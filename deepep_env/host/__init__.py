"""The host stage: one reading of the host per command (root, facts, platform choice, the caller's
environment) and, with a prefix, its marker and overlay (:mod:`~deepep_env.host.context`:
``HostContext``, ``EnvContext``). Doctor, launch, the views and the activation commands consume it.

Modules are imported directly; this package imports nothing (the activate fast path imports
``host.context``, stdlib-only on that path).
"""
