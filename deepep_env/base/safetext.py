"""Data shown as data: the one place text read from files (records, node reports, host facts) is made
safe to print on a terminal or to write into XML.

- :func:`terminal`: control characters (C0, DEL, C1: ESC, BEL, CR, a newline that would start a forged
  line), the bidirectional overrides that reorder what a reader sees (U+202A-202E, U+2066-2069) and
  other invisible format characters become visible escapes (``\\x1b``, ``\\n``, ``\\u202e``), so one
  value prints as one line of what it holds. Rich markup is not interpreted where the caller prints
  through :func:`markup_free` (rich's own escape) or a ``rich.text.Text``.
- :func:`xml`: the same escapes for the characters XML 1.0 forbids (every C0 control but tab, newline
  and carriage return, U+FFFE/U+FFFF, lone surrogates), then ``&<>"'`` escaped: the result is
  well-formed as element text and as an attribute value (the SVG of ``detect --svg``, the fleet page).

Stdlib only (``detect``, the fleet report and :mod:`deepep_env.base.errors` import it; ``re`` alone at
import time, for the activate fast path).
"""
from __future__ import annotations

import re
from typing import Any

# C0 controls, DEL, C1 controls; bidi embeddings/overrides/isolates; zero-width and other format
# characters that hide or reorder text (U+200B-200F, U+2028/2029 line/paragraph separators, BOM); lone
# surrogates (a JSON "\ud800" escape), which no terminal encoding can write.
_TERMINAL_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]")
# What XML 1.0 cannot hold at all (section 2.2 Char), besides the terminal-unsafe set it shares.
_XML_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff"
                         "\ud800-\udfff\ufffe\uffff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible(m: "re.Match[str]") -> str:
    c = m.group(0)
    if c in _NAMED:
        return _NAMED[c]
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def terminal(value: Any) -> str:
    """``value`` as text that prints as what it holds on one line: controls and invisible reorderings
    shown as escapes (a backslash itself is left alone: the escapes only need to be seen)."""
    return _TERMINAL_UNSAFE.sub(_visible, value if isinstance(value, str) else str(value))


def markup_free(value: Any) -> str:
    """:func:`terminal`, with rich's markup (``[link=…]``, ``[/red]``) escaped: for text printed
    through a rich console."""
    from rich.markup import escape as rich_escape

    return rich_escape(terminal(value))


def xml(value: Any) -> str:
    """``value`` as XML 1.0 character data or an attribute value (quotes escaped)."""
    from html import escape   # lazy: errors.py imports this module on the activate fast path, which never writes XML

    text = value if isinstance(value, str) else str(value)
    return escape(_XML_UNSAFE.sub(_visible, text), quote=True)


__all__ = ["markup_free", "terminal", "xml"]
