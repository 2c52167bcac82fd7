"""Version comparison and conda-style ranges, by conda's rules (rattler's implementation).

rattler is imported inside the functions, so the activate path (which never compares versions)
does not pay for it. Strings rattler cannot parse fall back to a plain dotted-number order.

Versions are dotted numbers with optional suffixes ('3.5.19', '2.10.0', '12.9'); ranges are
comma-joined clauses ('>=3.3.9,<3.6', '==2.28.9', '3.4.5').
"""
from __future__ import annotations

import re

_CLAUSE = re.compile(r"^\s*(==|>=|<=|!=|~=|>|<)?\s*([0-9][0-9A-Za-z.+_*-]*)\s*$")


def _key(v: str) -> tuple:
    parts = []
    for piece in re.split(r"[.+_-]", v):
        m = re.match(r"^(\d+)(.*)$", piece)
        if m:
            parts.append((int(m.group(1)), m.group(2)))
        else:
            parts.append((-1, piece))
    while parts and parts[-1] == (0, ""):
        parts.pop()
    return tuple(parts)


def version_cmp(a: str, b: str) -> int:
    """-1/0/1 by conda's ordering (pre-releases before the release: 1.0rc1 < 1.0; 2.11.0rc2 < 2.11.0)."""
    try:
        from rattler import Version

        va, vb = Version(a), Version(b)
    except Exception:  # noqa: BLE001 - not a conda version: dotted-number order
        ka, kb = _key(a), _key(b)
        return (ka > kb) - (ka < kb)
    return (va > vb) - (va < vb)


def version_lt(a: str, b: str) -> bool:
    return version_cmp(a, b) < 0


def is_exact(v: str) -> bool:
    m = _CLAUSE.match(v)
    return m is not None and (m.group(1) in (None, "==")) and "," not in v and "*" not in v


def exact_value(v: str) -> str:
    m = _CLAUSE.match(v)
    assert m
    return m.group(2)


def _starts(version: str, head: str) -> bool:
    """``12.9.*`` matches 12.9 and 12.9.1, not 12.90 (conda's prefix match is by segment)."""
    v, h = version.split("."), head.split(".")
    return all(version_cmp(x, y) == 0 for x, y in zip(v, h)) and len(v) >= len(h)


def version_matches(version: str, spec: str) -> bool:
    for clause in spec.split(","):
        m = _CLAUSE.match(clause)
        if not m:
            raise ValueError(f"bad version clause {clause!r}")
        op, ref = m.group(1) or "==", m.group(2)
        c = version_cmp(version, ref)
        if op == "==" and ref.endswith("*"):
            ok = _starts(version, ref.rstrip("*").rstrip("."))
        elif op == "==":
            ok = c == 0
        elif op == "!=":
            ok = c != 0
        elif op == ">=":
            ok = c >= 0
        elif op == "<=":
            ok = c <= 0
        elif op == ">":
            ok = c > 0
        elif op == "<":
            ok = c < 0
        else:  # ~= compatible release
            head = ref.split(".")[:-1]
            ok = c >= 0 and version.split(".")[: len(head)] == head
        if not ok:
            return False
    return True
