"""The host overlay: typed environment changes with provenance, and their renderings.

Entry points: :func:`overlay_for_host` (detect + rules), :func:`deepep_env.overlay.rules.build_overlay`
(rules over given facts), :func:`deepep_env.overlay.render.render`, and
:mod:`deepep_env.overlay.activation` for `activate`/`run`. Stdlib-only, like ``platform/``.
"""
from __future__ import annotations

import os
from typing import Mapping, Optional

from deepep_env.overlay.changes import Note, Overlay, PrependPath, Set, Source, Unset
from deepep_env.overlay.rules import build_overlay


def overlay_for_host(
    root: str | os.PathLike[str] = "/",
    platform: Optional[str] = None,
    prefix: Optional[str | os.PathLike[str]] = None,
    spec_env: Optional[Mapping[str, str]] = None,
    environ: Optional[Mapping[str, str]] = None,
) -> Overlay:
    """Detect the host under ``root`` and build its overlay.

    When ``prefix`` holds a deepep-env install (``conda-meta/deepep-env.json``) and ``spec_env``
    is not given, the install's recorded ``spec_env`` is used.
    """
    from deepep_env.platform import detect

    python_executable = None
    if prefix is not None and spec_env is None:
        from deepep_env.overlay.prefix import has_marker, read_prefix_meta

        if has_marker(prefix):
            meta = read_prefix_meta(prefix)
            spec_env = meta.spec_env
            python_executable = meta.python_executable
    # Kubernetes markers come from the environment only when probing this machine itself.
    live = os.path.realpath(os.fspath(root)) == "/"
    det = detect(root, platform, environ=environ if live else {})
    return build_overlay(
        det.facts, det.platform, prefix=prefix, spec_env=spec_env, python_executable=python_executable, environ=environ
    )


__all__ = ["Overlay", "Set", "Unset", "PrependPath", "Source", "Note", "build_overlay", "overlay_for_host"]
