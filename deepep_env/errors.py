"""One kind of user-facing error: one line naming the file, the field and what would be accepted.

Every library function that rejects input raises :class:`UserError`; the CLI prints ``str(err)``
on one line and exits with ``err.exit_code`` (2 for bad input). Nothing else is printed, never a
traceback.
"""
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:  # pathlib costs milliseconds on the activate fast path
    from pathlib import Path


import re

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


class UserError(Exception):
    """Bad input or an unmet precondition, rendered as one line."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        file: "str | Path | None" = None,
        field: str | None = None,
        line: int | None = None,
        accepted: str | None = None,
        exit_code: int | None = None,
    ) -> None:
        self.message = message
        self.file = str(file) if file is not None else None
        self.field = field
        self.line = line
        self.accepted = accepted
        if exit_code is not None:
            self.exit_code = exit_code
        super().__init__(self.render())

    def render(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "")
        if self.field:
            where = f"{where}: {self.field}" if where else self.field
        text = f"{where}: {self.message}" if where else self.message
        if self.accepted:
            text += f" (accepted: {self.accepted})"
        # Always one line, and no raw terminal control: a hostile value with a newline must not forge
        # a second line, an ANSI or bidi sequence must not repaint the terminal.
        text = " ".join(text.split("\n"))
        return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text)


class UnknownEnvError(UserError):
    """An env name no spec of the project has (callers that can go on without the spec catch this
    type, never the message)."""


class SolveError(UserError):
    """A solver (rattler's, or rattler-build's for a build environment) found no solution."""


@contextlib.contextmanager
def rattler_errors(template: str, *, file: "str | Path | None" = None, field: str | None = None,
                   accepted: str | None = None, first_line: bool = False, limit: int = 600,
                   cleanup=None) -> Iterator[None]:
    """The one place rattler's exceptions become a :class:`UserError`: rattler raises its own types
    and, for some corrupt inputs, Rust panics (``PanicException`` is a ``BaseException``, field notes
    §5). ``template`` gets ``{error}``: the error's first line (``first_line``) or all of it on one
    line, bounded, with any URL credentials redacted. Interrupts and our own errors pass through;
    ``cleanup`` runs before the error is raised."""
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
        from deepep_env.lock.channels import redact   # lazy: errors.py is on the activate fast path

        raise UserError(template.replace("{error}", redact(text)), file=file, field=field, accepted=accepted) from None


class StaleError(UserError):
    """A check found drift (stale lock, pixi.toml out of step): exit 1, not a usage error."""

    exit_code = 1
