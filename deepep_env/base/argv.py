"""Values that reach a subprocess as arguments stay operands: a user's revision, URL or tag that
starts with ``-`` would be read as an option (``git show --output=FILE:…`` writes FILE, ``git clone
--upload-pack=CMD`` runs CMD). Every such value passes :func:`operand` before it joins an argv; the
argv also ends its options (``--``, or ``--end-of-options`` where the command takes no ``--``)."""
from __future__ import annotations

from typing import Optional

from deepep_env.base.errors import UserError


def operand(value: str, *, field: str, file: Optional[str] = None, accepted: Optional[str] = None) -> str:
    """``value`` unchanged, or one line refusing a value a command would read as an option."""
    if value.startswith("-"):
        shown = value if len(value) <= 60 else value[:57] + "..."
        raise UserError(f"{shown!r} starts with '-', so a command would read it as an option", file=file,
                        field=field, accepted=accepted or "a value that does not start with '-'")
    return value


__all__ = ["operand"]
