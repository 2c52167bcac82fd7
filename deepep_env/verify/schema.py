"""What a readable test record holds: every field's type and range, checked once where records are read.

A record is a file anyone can commit or publish, so its values are data from outside: a figure that
is a string, a ``host`` that is a list or an exit code of 10**20 is refused here, in one line naming
the file and the field, and the readers (``verified``, ``plan``, ``diff``, ``publish``) skip it with
that line instead of failing later on a value they did not expect. Keys this version does not know
are left alone (a record is written by one tool version and read by others).
"""
from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

from deepep_env.base.errors import UserError
from deepep_env.formats.stamps import TEST_RECORD
from deepep_env.verify.activation import check_activation

EXIT_CODES = range(-255, 256)     # a shell's $? (0-255), or Python's -N for a child killed by signal N
MAX_RANKS = 1 << 20


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def number(v: Any) -> bool:
    """A finite JSON number (``true`` is not one)."""
    return (_int(v) or isinstance(v, float)) and math.isfinite(v)


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, bool)) or number(v)


def _mapping(of: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, dict) and all(isinstance(k, str) and of(x) for k, x in v.items())


def _rank_keys(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and k.isascii() and k.isdigit() and len(k) <= 7 for k in v)


def _optional(of: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or of(v)


def _utc_time(v: Any) -> bool:
    """``2026-11-25T12:00:00Z`` (what ``record`` writes), a real time, not past tomorrow: a record's time
    orders its cell, so ``"zzzz"`` or year 9999 stayed the newest forever (issue 52.10)."""
    if not isinstance(v, str) or not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?Z", v):
        return False
    try:
        when = datetime.fromisoformat(v[:-1]).replace(tzinfo=timezone.utc)
    except ValueError:
        return False
    return when <= datetime.now(timezone.utc) + timedelta(days=1)


_text = _optional(lambda v: isinstance(v, str))
# field → (required, test, what is accepted)
FIELDS: dict[str, tuple[bool, Callable[[Any], bool], str]] = {
    "env": (True, lambda v: isinstance(v, str) and v != "", "an env name"),
    "test": (True, lambda v: isinstance(v, str) and v != "", "a test name"),
    "exit_code": (True, lambda v: _int(v) and v in EXIT_CODES, "an integer from -255 to 255"),
    "passed": (True, lambda v: isinstance(v, bool), "true or false"),
    "host": (True, _mapping(_scalar), "an object of strings, finite numbers, booleans and nulls"),
    "time": (True, lambda v: _utc_time(v), "a UTC time no later than tomorrow (2026-11-25T12:00:00Z)"),
    "figures": (False, _mapping(number), "an object of finite numbers"),
    "rank_figures": (False, lambda v: _rank_keys(v) and _mapping(_mapping(number))(v),
                     "an object of ranks (\"0\", \"1\", …) → an object of finite numbers"),
    "args": (False, lambda v: isinstance(v, list) and all(isinstance(a, str) for a in v), "a list of strings"),
    "ranks": (False, _optional(lambda v: _int(v) and 1 <= v <= MAX_RANKS), "a number of processes (1 or more) or null"),
    "gpus": (False, _optional(lambda v: _int(v) and 0 <= v <= MAX_RANKS), "a number of GPUs or null"),
    "lock_env": (False, _text, "a string or null"),
    "lock_platform": (False, _text, "a string or null"),
    "digest": (False, _text, "a string or null"),
    "why": (False, _text, "a string or null"),
    "evidence": (False, _text, "a string or null"),
    "tool_version": (False, _text, "a string or null"),
    # v2: the activation the test ran under (verify/activation.py), its digest checked against its variables
    "activation": (False, check_activation, "null, or {package, variables: [{name, op, value, rule}], digest} "
                   "whose digest is the sha256 of its variables"),
}


def check_record(data: Any, path: Path) -> dict[str, Any]:
    """``data`` when it is a test record this version reads; else one-line :class:`UserError`."""
    TEST_RECORD.check(data, file=path)
    for key, (required, ok, accepted) in FIELDS.items():
        if key not in data:
            if required:
                raise UserError(f"record field {key!r} missing", file=path, field=key, accepted=accepted)
            continue
        if not ok(data[key]):
            raise UserError(f"record field {key!r} is not {accepted}", file=path, field=key, accepted=accepted)
    return data
