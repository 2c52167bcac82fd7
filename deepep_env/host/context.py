"""One context per command: the host read once, the env's prefix, and the overlay built from both.

``activate``/``run``, ``overlay``, ``hook``, ``plan`` and ``doctor`` all start from here, so the
pipeline *probe the root → choose the platform → read the prefix marker → run the overlay rules →
prepend the prefix's own activation → say when the platform is not one the env targets* exists once.
Whether the root is this machine's live ``/`` is decided by :func:`~deepep_env.platform.rootfs.is_live_root`
alone, and only then does the caller's environment feed detection (Kubernetes markers) and the
overlay (virtualenv, home directory).

Stdlib-only: ``deepep-env activate`` and the conda activation hook import it on every new shell.
"""
from __future__ import annotations

import os
from typing import Mapping, NamedTuple, Optional, Sequence

from deepep_env.base.errors import UserError
from deepep_env.overlay.activation import prefix_changes
from deepep_env.overlay.changes import Overlay
from deepep_env.formats.prefix import PrefixMeta, find_prefix, has_marker, marked_prefix_meta, read_prefix_meta
from deepep_env.overlay.rules import build_overlay
from deepep_env.platform import Detection, detect
from deepep_env.platform.facts import HostFacts
from deepep_env.platform.probes import check_root
from deepep_env.platform.profiles import PlatformChoice
from deepep_env.platform.rootfs import RootFS


class HostContext(NamedTuple):
    """The probed host: its root, whether it is this machine, the facts and the platform choice."""

    fs: RootFS
    environ: Mapping[str, str]  # the caller's environment (describes the host only when live)
    detection: Detection

    @property
    def root(self) -> str:
        return self.fs.root

    @property
    def live(self) -> bool:
        return self.fs.live

    @property
    def facts(self) -> HostFacts:
        return self.detection.facts

    @property
    def platform(self) -> PlatformChoice:
        return self.detection.platform


def read_host(root: "str | os.PathLike[str]" = "/", platform: Optional[str] = None,
              environ: Optional[Mapping[str, str]] = None) -> HostContext:
    """Probe ``root`` once. UserError for a root that is not a host tree, an unknown platform, or
    a tree so broken the probes trip (one line, never a traceback)."""
    environ = os.environ if environ is None else environ
    fs = check_root(root)
    try:
        det = detect(fs.root, platform, environ=environ if fs.live else {})
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - a hostile tree must not traceback the CLI
        text = " ".join(str(exc).split())[:300]
        raise UserError(f"cannot read the host: {type(exc).__name__}: {text}", file=fs.root, field="--root") from None
    return HostContext(fs, environ, det)


def platform_mismatch(platform: PlatformChoice, targets: Sequence[str], env_label: str) -> Optional[str]:
    """The sentence saying the chosen platform is not one the env targets, or None when it is (or
    the env names no platforms). ``env_label``: the env as the message shows it."""
    if not targets or platform.name in targets:
        return None
    how = "given" if platform.source == "override" else "detected"
    return f"{how} platform {platform.name!r} is not one env {env_label} targets ({', '.join(targets)})"


def host_overlay(host: HostContext, *, meta: Optional[PrefixMeta] = None, prefix: Optional[str] = None,
                 spec_env: Optional[Mapping[str, str]] = None,
                 site_dirs: Optional[Sequence[str]] = None) -> Overlay:
    """The platform's rules over the host for an env: its prefix and recorded ``[env]`` and Python
    when installed (``meta``), else a spec's ``[env]`` (``spec_env``)."""
    if meta is not None:
        prefix, spec_env = meta.prefix, meta.spec_env if spec_env is None else spec_env
    return build_overlay(host.facts, host.platform, prefix=prefix, spec_env=spec_env,
                         python_executable=meta.python_executable if meta else None,
                         environ=host.environ, site_dirs=site_dirs)


def with_prefix_activation(meta: PrefixMeta, ov: Overlay) -> Overlay:
    """The prefix's own activation (CONDA_PREFIX, PATH, activate.d scripts) first, then ``ov``."""
    changes, notes = prefix_changes(meta)
    return Overlay(ov.platform, tuple(changes) + ov.changes, tuple(notes) + ov.notes)


class EnvContext(NamedTuple):
    """What a command that activates, renders or checks an env works from, built once."""

    host: HostContext
    env_name: Optional[str]
    prefix: Optional[str]
    meta: Optional[PrefixMeta]  # the install marker, when the prefix has one
    overlay: Overlay  # the prefix's activation (when installed) then the host overlay
    warnings: tuple[str, ...]  # the platform mismatch and the overlay's warning notes

    @property
    def detection(self) -> Detection:
        return self.host.detection


def _warnings(host: HostContext, meta: Optional[PrefixMeta], ov: Overlay) -> tuple[str, ...]:
    mismatch = platform_mismatch(host.platform, meta.platforms, repr(meta.env)) if meta else None
    head = (f"{mismatch}; evidence: {'; '.join(host.platform.evidence)}",) if mismatch else ()
    return head + tuple(n.message for n in ov.warnings())


def activation_context(env: str, *, root: "str | os.PathLike[str]" = "/",
                       prefix: "Optional[str | os.PathLike[str]]" = None, platform: Optional[str] = None,
                       cwd: Optional[str] = None, environ: Optional[Mapping[str, str]] = None,
                       meta: Optional[PrefixMeta] = None) -> EnvContext:
    """``activate``/``run``: the installed prefix of ``env`` on this host. Its marker is read here
    (``NeedsProject`` for a prefix without one in a project: the tool resolves it, install/prefixes.py,
    and passes ``meta``)."""
    environ = os.environ if environ is None else environ
    if meta is None:
        meta = marked_prefix_meta(env, find_prefix(env, prefix, cwd, environ), cwd, environ)
    host = read_host(root, platform, environ)
    ov = with_prefix_activation(meta, host_overlay(host, meta=meta))
    return EnvContext(host, env, meta.prefix, meta, ov, _warnings(host, meta, ov))


def overlay_context(host: HostContext, prefix: "Optional[str | os.PathLike[str]]" = None, *,
                    spec_env: Optional[Mapping[str, str]] = None, env_name: Optional[str] = None) -> EnvContext:
    """``overlay``/``hook``/``plan``: the host overlay alone, for ``prefix`` when given. A prefix
    with a marker brings its recorded ``[env]`` and Python (``spec_env`` wins when given)."""
    pfx = os.path.abspath(os.fspath(prefix)) if prefix is not None else None
    meta = read_prefix_meta(pfx) if pfx is not None and has_marker(pfx) else None
    ov = host_overlay(host, meta=meta, prefix=pfx, spec_env=spec_env)
    return EnvContext(host, env_name or (meta.env if meta else None), pfx, meta, ov, _warnings(host, meta, ov))


__all__ = ["EnvContext", "HostContext", "activation_context", "host_overlay", "overlay_context",
           "platform_mismatch", "read_host", "with_prefix_activation"]
