"""TOML → :class:`EnvSpec`, with errors that name the file, the field, the line and the fix."""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from pydantic import ValidationError

from deepep_env.errors import UserError
from deepep_env.spec.model import SUPPORTED_FORMATS, EnvSpec


def _line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """Best-effort line of a dotted key path in TOML source (tomllib keeps no positions)."""
    keys = [str(k) for k in loc if not isinstance(k, int)]
    if not keys:
        return None
    lines = text.splitlines()
    table_start, table_end = 0, len(lines)
    if len(keys) > 1:
        header = re.compile(r"^\s*\[\s*" + re.escape(".".join(keys[:-1])) + r"\s*\]\s*(#.*)?$")
        for i, line in enumerate(lines):
            if header.match(line):
                table_start = i + 1
                for j in range(i + 1, len(lines)):
                    if re.match(r"^\s*\[", lines[j]):
                        table_end = j
                        break
                break
        else:
            header = None
    key = re.compile(r"^\s*[\"']?" + re.escape(keys[-1]) + r"[\"']?\s*=")
    for i in range(table_start, table_end):
        if key.match(lines[i]):
            return i + 1
    if len(keys) > 1:  # key inside an inline table or the header itself
        for i, line in enumerate(lines):
            if re.match(r"^\s*\[\s*" + re.escape(".".join(keys[:-1])) + r"\s*\]", line):
                return i + 1
    return None


def _accepted_for(err: dict[str, Any]) -> str | None:
    typ = err.get("type", "")
    ctx = err.get("ctx") or {}
    if typ == "extra_forbidden":
        return "only the documented keys (docs/spec-format.md)"
    if typ == "missing":
        return "add this key"
    if typ == "literal_error" and "expected" in ctx:
        return str(ctx["expected"])
    if typ == "string_pattern_mismatch" and "pattern" in ctx:
        return f"a value matching {ctx['pattern']}"
    if typ.endswith("_type") or typ.endswith("_parsing"):
        return typ.replace("_type", "").replace("_parsing", "")
    return None


def parse_spec_text(text: str, file: str | Path = "<spec>", expect_name: str | None = None) -> EnvSpec:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise UserError(f"malformed TOML: {exc}", file=file, line=int(m.group(1)) if m else None,
                        accepted="TOML 1.0") from None
    fmt = data.get("format")
    if fmt is None:
        raise UserError("missing format header", file=file, field="format",
                        accepted="format = " + " or ".join(map(str, SUPPORTED_FORMATS)))
    if not isinstance(fmt, int) or isinstance(fmt, bool) or fmt not in SUPPORTED_FORMATS:
        raise UserError(f"unknown spec format {fmt!r}; this deepep-env reads formats {list(SUPPORTED_FORMATS)}",
                        file=file, field="format", line=_line_of(text, ("format",)),
                        accepted="format = " + " or ".join(map(str, SUPPORTED_FORMATS)) + " (or upgrade deepep-env)")
    try:
        spec = EnvSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        field = ".".join(str(p) for p in loc)
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif "input" in err and err["type"] != "missing" and not isinstance(err["input"], (dict, list)):
            msg = f"{msg} (got {err['input']!r})"
        more = len(exc.errors()) - 1
        if more:
            msg += f" (+{more} more error{'s' if more > 1 else ''})"
        raise UserError(msg, file=file, field=field, line=_line_of(text, loc), accepted=_accepted_for(err)) from None
    if expect_name is not None and spec.name != expect_name:
        raise UserError(f"spec name {spec.name!r} does not match its file name", file=file, field="name",
                        line=_line_of(text, ("name",)), accepted=repr(expect_name))
    return spec


def load_spec_file(path: str | Path) -> EnvSpec:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError("no such spec file", file=path, accepted="a file in env_specs/ named <name>.toml") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read spec: {exc.__class__.__name__}", file=path) from None
    return parse_spec_text(text, file=path, expect_name=path.stem)
