"""rattler's exceptions as one :class:`~deepep_env.base.errors.UserError` line, with secrets redacted.

rattler raises its own types and, for some corrupt inputs, Rust panics (``PanicException`` is a
``BaseException``, field notes §5); its messages can carry channel URLs, so the text goes through
:func:`deepep_env.base.channels.auth.redact`. Kept out of :mod:`deepep_env.base.errors`, which imports nothing
from the project (it is on the activate fast path and every module imports it).
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable, Iterator, Optional

from deepep_env.base.channels.auth import redact
from deepep_env.base.errors import UserError


@contextlib.contextmanager
def rattler_errors(template: str, *, file: "str | Path | None" = None, field: str | None = None,
                   accepted: str | None = None, first_line: bool = False, limit: int = 600,
                   cleanup: Optional[Callable[[], object]] = None) -> Iterator[None]:
    """The one place rattler's exceptions become a :class:`UserError`. ``template`` gets
    ``{error}``: the error's first line (``first_line``) or all of it on one line, bounded, with any
    URL credentials redacted. Interrupts and our own errors pass through; ``cleanup`` runs before
    the error is raised."""
    try:
        yield
    except (KeyboardInterrupt, SystemExit, UserError):
        raise
    except BaseException as exc:  # noqa: BLE001 - see the docstring
        if cleanup is not None:
            cleanup()
        text = str(exc).strip()
        text = (text.splitlines()[0] if first_line else " ".join(text.split())) if text else type(exc).__name__
        if len(text) > limit:
            text = text[: limit - 1] + "…"
        raise UserError(template.replace("{error}", redact(text)), file=file, field=field, accepted=accepted) from None
