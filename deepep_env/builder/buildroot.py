"""Where every build runs, and what that does to ids.

Builds run under a fixed root, ``/tmp/deepep-env-build/<10 hex of the id>-<package>/`` (Nix's fixed
``/build``): compilers write the paths they are given into what they produce (``__FILE__`` in
NVSHMEM's and DeepEP's libraries, the staged source path in ``info/recipe``), so two machines make
the same package only under the same root. ``$DEEPEP_ENV_BUILD_ROOT`` moves it; a moved root is then
part of every build id (:func:`moved`), as Nix's store directory is part of every store path: the
same id always means the same bytes, and a build under another root gets another id instead of other
bytes under the lock's."""
from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Optional

from deepep_env.base.errors import UserError

DEFAULT_BUILD_ROOT = "/tmp/deepep-env-build"
ENV_VAR = "DEEPEP_ENV_BUILD_ROOT"
_SAFE = re.compile(r"[A-Za-z0-9._+/-]+")


def configured() -> Path:
    """``$DEEPEP_ENV_BUILD_ROOT``, else the default; refused in one line when not absolute. Reads only."""
    raw = os.environ.get(ENV_VAR) or DEFAULT_BUILD_ROOT
    accepted = f"an absolute directory below /, of letters, digits and . _ + - / only, e.g. {DEFAULT_BUILD_ROOT}"
    if not raw.startswith("/"):
        raise UserError(f"{ENV_VAR} must be an absolute path, not {raw!r}", field=ENV_VAR, accepted=accepted)
    if not _SAFE.fullmatch(raw):
        # the root is written into compiler flags and build scripts' paths: a space or a quote breaks them
        raise UserError(f"{ENV_VAR}={raw!r} has characters build scripts do not quote", field=ENV_VAR,
                        accepted=accepted)
    root = "/" + os.path.normpath(raw).lstrip("/")          # one spelling per folder: //a/./b/ is /a/b
    if root == "/":
        raise UserError(f"{ENV_VAR} must not be / (builds make and remove folders in it)", field=ENV_VAR,
                        accepted=accepted)
    return Path(root)


def moved() -> Optional[str]:
    """The configured root when it is not the default (it goes into every build id), else None
    (no field: the ids of every build under the default root stay what they were)."""
    root = str(configured())
    return None if root == DEFAULT_BUILD_ROOT else root


def ensure() -> Path:
    """The build root, created shared and sticky (like /tmp) so several users of one machine can build;
    one line when it cannot be written."""
    root = configured()
    try:
        if not root.is_dir():
            root.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):
                os.chmod(root, 0o1777)
        probe = root / f".write-test-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise UserError(f"build root {root} is not writable ({exc.strerror or exc})", field=ENV_VAR,
                        accepted=f"a writable absolute directory (set {ENV_VAR}; a moved root moves every build id)") \
            from None
    return root
