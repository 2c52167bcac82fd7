"""One kind of user-facing error: one line naming the file, the field and what would be accepted.

Every library function that rejects input raises :class:`UserError`; the CLI prints ``str(err)``
on one line and exits with ``err.exit_code`` (2 for bad input). Nothing else is printed, never a
traceback.

This module imports only :mod:`deepep_env.base.safetext` (stdlib only) from the project: every module
imports it, the activate fast path included. rattler's exceptions become a :class:`UserError` in :mod:`deepep_env.base.rattler_errors`,
which needs the redaction of :mod:`deepep_env.base.channels.auth`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pathlib costs milliseconds on the activate fast path
    from pathlib import Path

from deepep_env.base.safetext import terminal


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
        # a second line, an ANSI or bidi sequence must not repaint the terminal (safetext's one escaper).
        return terminal(" ".join(text.split("\n")))


class UnknownEnvError(UserError):
    """An env name no spec of the project has (callers that can go on without the spec catch this
    type, never the message)."""


class SolveError(UserError):
    """A solver (rattler's, or rattler-build's for a build environment) found no solution."""


class StaleError(UserError):
    """A check found drift (stale lock, pixi.toml out of step): exit 1, not a usage error."""

    exit_code = 1
