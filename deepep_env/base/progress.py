"""Byte progress of long transfers (issue 56): ``fetch``'s downloads and ``publish``'s uploads report
here, and the CLI shows them (rich progress bars on a terminal; nothing in a log or with ``--quiet``).

The library reports to whatever :func:`reporting` installed for the current context, so no signature
between the command and the byte loop changes; by default nothing is reported. Stdlib only.
"""
from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import Iterator, Optional, Protocol


class Transfers(Protocol):
    """Receives the progress of named transfers (a file's name; ``total`` in bytes, None when unknown)."""

    def start(self, label: str, total: Optional[int]) -> None: ...

    def advance(self, label: str, nbytes: int) -> None: ...

    def finish(self, label: str) -> None: ...


class Silent:
    """The default: no progress anywhere."""

    def start(self, label: str, total: Optional[int]) -> None:
        pass

    def advance(self, label: str, nbytes: int) -> None:
        pass

    def finish(self, label: str) -> None:
        pass


_CURRENT: ContextVar[Transfers] = ContextVar("deepep_env_transfers", default=Silent())


def current() -> Transfers:
    """Where the transfer running now reports its bytes."""
    return _CURRENT.get()


@contextlib.contextmanager
def reporting(transfers: Transfers) -> Iterator[Transfers]:
    """Report every transfer inside the block to ``transfers``."""
    token = _CURRENT.set(transfers)
    try:
        yield transfers
    finally:
        _CURRENT.reset(token)
