"""TOML → :class:`EnvSpec`, with errors that name the file, the field, the line and the fix."""
from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from deepep_env.base.channels.auth import redact
from deepep_env.base.errors import UserError
from deepep_env.base.readfile import decode, parse_toml, read_bytes
from deepep_env.envspec.model import ENV_NAME_RE, KNOWN_ARCHS, NAME_RE, SUPPORTED_FORMATS, EnvSpec

# Specs are a few KiB. The caps turn a hostile input (/dev/zero, a FIFO, a 1 GB file, a 1 MB
# string echoed into an error line) into one refusal line instead of a hang or a flood.
MAX_SPEC_BYTES = 1 << 20
MAX_STRING = 4096
MAX_KEY = 128
MAX_DEPTH = 16
SHOW_MAX = 60
# Terminal controls (C0, DEL, C1) and the bidi overrides of "Trojan source" (CVE-2021-42574): a
# spec value reaches error lines, `spec show`, overlays and activate scripts, so none may carry them.
_BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")
_CTRL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f]")


def show(value: Any, limit: int = SHOW_MAX) -> str:
    """A value for an error line: ascii() (escapes controls, and shows look-alikes such as a
    Cyrillic 'і' in 'nvlіnk' as \\u0456), cut to ``limit`` characters."""
    text = ascii(value)
    if len(text) > limit:
        text = text[: limit - 1] + "\u2026"
    return _CTRL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _field(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) if not isinstance(p, str) or re.match(r"^[A-Za-z0-9_-]+$", p) else show(p, 40)
                    for p in loc) or "<top>"


def _hygiene(data: Any, loc: tuple[Any, ...] = ()) -> tuple[tuple[Any, ...], str, str] | None:
    """First string or key that no field may hold: (where, problem, accepted)."""
    if len(loc) > MAX_DEPTH:
        return loc, "nested too deeply", f"at most {MAX_DEPTH} levels"
    if isinstance(data, dict):
        for k, v in data.items():
            if len(k) > MAX_KEY:
                return loc, f"a key of {len(k)} characters", f"keys of at most {MAX_KEY} characters"
            if _CTRL.search(k) or not k:
                return loc, f"key {show(k)} has control characters or is empty", "printable keys"
            bad = _hygiene(v, (*loc, k))
            if bad:
                return bad
    elif isinstance(data, list):
        for i, v in enumerate(data):
            bad = _hygiene(v, (*loc, i))
            if bad:
                return bad
    elif isinstance(data, str):
        if len(data) > MAX_STRING:
            return loc, f"a string of {len(data)} characters", f"at most {MAX_STRING} characters"
        m = _CTRL.search(data)
        if m:
            name = unicodedata.name(m.group(), f"U+{ord(m.group()):04X}")
            return loc, f"control character {name} in {show(data)}", "printable text on one line"
    return None


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
    key = re.compile(r"^\s*[\"']?" + re.escape(keys[-1]) + r"[\"']?\s*=")
    for i in range(table_start, table_end):
        if key.match(lines[i]):
            return i + 1
    # key inside an inline table, or a whole table ([env], [python]) that is wrong as such
    for table in (keys, keys[:-1]) if len(keys) > 1 else (keys,):
        for i, line in enumerate(lines):
            if re.match(r"^\s*\[\[?\s*" + re.escape(".".join(table)) + r"\s*\]", line):
                return i + 1
    return None


_VERSIONS = "a version such as '3.4.5' or a range such as '>=3.3.9,<3.6'"
_URL = "an http(s)/file/s3/gcs/oci URL without user:token@, ?query, #fragment or /t/<token>/"
# What a custom validator's field accepts (pydantic's value_error carries no "expected").
_ACCEPTED_BY_FIELD = {
    "cuda.architectures": "compute capabilities " + ", ".join(KNOWN_ARCHS) + " ('a' from 9.0, 'f' from 10.0)",
    "channels": "channel names ('local', 'conda-forge') or " + _URL,
    "publish_url": _URL,
    "platforms": "distinct profile names (letters, digits, '.', '_', '-')",
    "subdirs": "distinct 'linux-64' / 'linux-aarch64'",
    "env": "names matching " + ENV_NAME_RE.pattern,
    "host.driver_params": "{ NVregName = integer 0..4294967295 }",
    "host.kernel_modules": "distinct module names such as 'nvidia_peermem'",
    "host.prepare": "one printable line of 1 to 200 characters: the command that makes the host externals",
    "python": "python.executable only with provider = 'host'",
    "cuda": "cuda.prefix only with provider = 'host'",
    **{f: _VERSIONS for f in ("pytorch.version", "nccl.version", "nvshmem.version", "host.driver",
                              "host.doca_ofed", "host.rdma_core")},
    **{f: "distinct names (letters, digits, '.', '_', '-')" for f in ("nvshmem.patches", "deepep.patches", "deepep.require")},
}


def _accepted_for(err: ErrorDetails) -> str | None:
    typ = err.get("type", "")
    ctx = err.get("ctx") or {}
    if typ == "value_error":
        loc = [str(p) for p in err.get("loc", ()) if not isinstance(p, int)]
        for n in range(len(loc), 0, -1):
            if ".".join(loc[:n]) in _ACCEPTED_BY_FIELD:
                return _ACCEPTED_BY_FIELD[".".join(loc[:n])]
    if typ == "extra_forbidden":
        return "only the documented keys (docs/spec-format.md)"
    if typ == "missing":
        return "add this key"
    if typ == "literal_error" and "expected" in ctx:
        return str(ctx["expected"])
    if typ == "string_pattern_mismatch" and "pattern" in ctx:
        return f"a value matching {ctx['pattern']}"
    if typ in ("model_type", "model_attributes_type", "dict_type"):
        where = ".".join(str(p) for p in err.get("loc", ()) if not isinstance(p, int))
        return f"a table: [{where}] with key = value lines, or {{ key = value }}"
    if typ.endswith("_type") or typ.endswith("_parsing"):
        return typ.replace("_type", "").replace("_parsing", "")
    return None


def parse_spec_text(text: str, file: str | Path = "<spec>", expect_name: str | None = None) -> EnvSpec:
    data = parse_toml(text, file)
    fmt = data.get("format")
    if fmt is None:
        raise UserError("missing format header", file=file, field="format",
                        accepted="format = " + " or ".join(map(str, SUPPORTED_FORMATS)))
    if not isinstance(fmt, int) or isinstance(fmt, bool) or fmt not in SUPPORTED_FORMATS:
        raise UserError(f"unknown spec format {show(fmt)}; this deepep-env reads formats {list(SUPPORTED_FORMATS)}",
                        file=file, field="format", line=_line_of(text, ("format",)),
                        accepted="format = " + " or ".join(map(str, SUPPORTED_FORMATS)) + " (or upgrade deepep-env)")
    bad = _hygiene(data)
    if bad:
        loc, problem, accepted = bad
        raise UserError(redact(problem), file=file, field=_field(loc), line=_line_of(text, loc), accepted=accepted)
    try:
        spec = EnvSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        field = _field(loc)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif loc and loc[0] in ("channels", "publish_url"):
            pass  # never echo a URL: it may be the token itself (the validator names the entry)
        elif err["type"] == "value_error":
            pass  # our validators name the offending value themselves
        elif "input" in err and err["type"] != "missing" and not isinstance(err["input"], (dict, list)):
            msg = f"{msg} (got {show(err['input'])})"
        more = len(exc.errors()) - 1
        if more:
            msg += f" (+{more} more error{'s' if more > 1 else ''})"
        raise UserError(redact(msg), file=file, field=field, line=_line_of(text, loc), accepted=_accepted_for(err)) from None
    if expect_name is not None and spec.name != expect_name:
        raise UserError(f"spec name {show(spec.name)} does not match its file name", file=file, field="name",
                        line=_line_of(text, ("name",)), accepted=show(expect_name))
    return spec


def read_spec_bytes(path: Path) -> bytes:
    """The file's bytes, refusing what is not a regular file of sane size (the one bounded reader,
    :mod:`deepep_env.base.readfile`)."""
    return read_bytes(path, what="spec", accepted="a regular file in env_specs/ named <name>.toml",
                      missing="no such spec file", limit=MAX_SPEC_BYTES)


def load_spec_file(path: str | Path) -> EnvSpec:
    path = Path(path)
    if _CTRL.search(str(path)):
        # The path itself goes into the error line: print it escaped. (No spec name can contain
        # these, so such a file could never match its name anyway.)
        raise UserError("the file name has control characters", file=show(str(path), 200),
                        accepted="env_specs/<name>.toml with a name matching " + NAME_RE)
    text = decode(read_spec_bytes(path), path, what="spec", accepted="a UTF-8 TOML file")
    return parse_spec_text(text, file=path, expect_name=path.stem)
