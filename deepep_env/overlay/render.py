"""Render an Overlay: bash, zsh, fish, json, dotenv, Kubernetes ``env:`` (YAML or JSON).

Every value is quoted so that it stays data in the target language — ``$(rm -rf /)``, quotes,
backslashes and newlines included — and every comment is one line (a newline in a fact cannot
start a command). Variable names are already validated (known_vars.NAME_RE).

``environ``: when given (``deepep-env activate``, which runs inside the shell it prints for), a
prepend-path is rendered as its final value computed here, de-duplicated, so activating twice
does not grow PATH; without it (``deepep-env overlay``) the script prepends at eval time.
"""
from __future__ import annotations

import json
from typing import Mapping, Optional, Union

from deepep_env.base.errors import UserError
from deepep_env.overlay.changes import Change, Note, Overlay, PrependPath, Set, Source, Unset, change_to_dict

FORMATS = ("bash", "zsh", "fish", "json", "dotenv", "k8s", "k8s-json")
SHELLS = ("bash", "zsh", "fish")


def _one_line(text: str) -> str:
    return " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())


def sh_quote(value: str) -> str:
    """POSIX single quotes: nothing inside is special; a ' is closed, escaped, reopened."""
    return "'" + value.replace("'", "'\\''") + "'"


def fish_quote(value: str) -> str:
    """fish single quotes: only \\\\ and \\' are escapes inside them."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _comment(c: Union[Change, Note], prefix: str = "# ") -> str:
    return prefix + _one_line(f"{c.rule}: {c.fact}")


def _render_sh(ov: Overlay, environ: Optional[Mapping[str, str]]) -> str:
    lines = [f"# deepep-env overlay for platform {_one_line(ov.platform)}: eval this in bash or zsh"]
    env = dict(environ) if environ is not None else None
    for c in ov.changes:
        if isinstance(c, Source) and c.shell != "sh":
            continue  # fish's own scripts
        lines.append(_comment(c))
        if isinstance(c, Set):
            lines.append(f"export {c.name}={sh_quote(c.value)}")
            if env is not None:
                env[c.name] = c.value
        elif isinstance(c, Unset):
            lines.append(f"unset {c.name}")
            if env is not None:
                env.pop(c.name, None)
        elif isinstance(c, PrependPath):
            if env is not None:
                c.apply(env)
                lines.append(f"export {c.name}={sh_quote(env[c.name])}")
            else:
                # Idempotent: an entry already in the list is not added again, so evaluating
                # the script twice (or in a nested shell) does not grow the variable. Entries go
                # in last-first so the first one ends up in front.
                n, sep = c.name, c.sep  # sep is ":" (or " "): literal inside double quotes
                for entry in reversed(c.entries):
                    lines.append(
                        f'case "{sep}${{{n}-}}{sep}" in *{sh_quote(sep + entry + sep)}*) ;; '
                        f'*) export {n}={sh_quote(entry)}"${{{n}:+{sep}${{{n}}}}}" ;; esac'
                    )
        elif isinstance(c, Source):
            lines.append(f". {sh_quote(c.path)}")
            env = None  # the script may change any variable: prepend at eval time from here on
    for note in ov.notes:
        lines.append(f"# note [{note.level}] " + _one_line(f"{note.rule}: {note.message} ({note.fact})"))
    return "\n".join(lines) + "\n"


def _fish_is_path_var(name: str) -> bool:
    # fish ≥ 3.0 treats variables whose names end in PATH as colon-separated lists.
    return name.endswith("PATH")


def _render_fish(ov: Overlay, environ: Optional[Mapping[str, str]]) -> str:
    lines = [f"# deepep-env overlay for platform {_one_line(ov.platform)}: eval this in fish"]
    env = dict(environ) if environ is not None else None
    for c in ov.changes:
        if isinstance(c, Source) and c.shell != "fish":
            continue  # bash/zsh scripts
        lines.append(_comment(c))
        if isinstance(c, Set):
            lines.append(f"set -gx {c.name} {fish_quote(c.value)}")
            if env is not None:
                env[c.name] = c.value
        elif isinstance(c, Unset):
            lines.append(f"set -e {c.name}")
            if env is not None:
                env.pop(c.name, None)
        elif isinstance(c, PrependPath):
            if env is not None:
                c.apply(env)
                value = env[c.name]
                if _fish_is_path_var(c.name) and c.sep == ":":
                    lines.append(f"set -gx {c.name} " + " ".join(fish_quote(p) for p in value.split(":") if p))
                else:
                    lines.append(f"set -gx {c.name} {fish_quote(value)}")
            elif _fish_is_path_var(c.name) and c.sep == ":":
                for entry in reversed(c.entries):  # idempotent, first entry ends up in front
                    lines.append(f"contains -- {fish_quote(entry)} ${c.name}; or set -gx {c.name} {fish_quote(entry)} ${c.name}")
            else:
                # `string join` drops the separator when the variable is unset or empty; `string
                # collect` keeps a value with newlines one element; `contains … ; or` leaves
                # status 0 (an if/else would not: fish's `set` does not reset $status).
                for entry in reversed(c.entries):
                    q, sep = fish_quote(entry), fish_quote(c.sep)
                    lines.append(
                        f"contains -- {q} (string split {sep} -- \"${c.name}\"); "
                        f"or set -gx {c.name} (string join {sep} -- {q} ${c.name} | string collect)"
                    )
        elif isinstance(c, Source):
            lines.append(f"source {fish_quote(c.path)}")
            env = None  # the script may change any variable: prepend at eval time from here on
    for note in ov.notes:
        lines.append(f"# note [{note.level}] " + _one_line(f"{note.rule}: {note.message} ({note.fact})"))
    return "\n".join(lines) + "\n"


def dotenv_quote(name: str, value: str) -> str:
    """python-dotenv / docker compose ``env_file`` quoting.

    Single quotes are literal in both (no ``${}`` interpolation); a value holding a ``'`` or a
    newline is written double-quoted with ``\\\\``, ``\\"`` and ``\\n`` escapes — unless it also
    holds ``${``, which double quotes would interpolate and no escape prevents portably.
    """
    if "'" not in value and "\n" not in value and "\r" not in value:
        return f"'{value}'"
    if "${" in value or "$" in value:
        raise UserError(
            f"value of {name} holds both a quote/newline and '$': not representable in a dotenv file",
            field=name,
            accepted="--format bash, fish, json or k8s",
        )
    esc = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{esc}"'


def _render_dotenv(ov: Overlay) -> str:
    lines = [f"# deepep-env overlay for platform {_one_line(ov.platform)} (dotenv: python-dotenv, docker compose env_file)"]
    for name, value in ov.env().items():
        if value is None:
            lines.append(f"# unset {name}: a dotenv file cannot unset; start the process without it")
        else:
            lines.append(f"{name}={dotenv_quote(name, value)}")
    prepends = sorted({c.name for c in ov.changes if isinstance(c, PrependPath)})
    if prepends:
        lines.append("# prepend-path values are given in full here; the original value is not kept: " + ", ".join(prepends))
    return "\n".join(lines) + "\n"


def _k8s_items(ov: Overlay) -> list[dict]:
    return [{"name": n, "value": v} for n, v in ov.env().items() if v is not None]


def _render_k8s_yaml(ov: Overlay) -> str:
    # Hand-written YAML with JSON-quoted scalars (JSON strings are valid YAML double-quoted
    # scalars): no PyYAML import, and no value can become a YAML tag, anchor or a second key.
    lines = [f"# deepep-env overlay for platform {_one_line(ov.platform)}: a container's env list"]
    last = {c.name: c for c in ov.changes if isinstance(c, (Set, Unset, PrependPath))}
    for name, value in ov.env().items():
        if value is None:
            lines.append(f"# unset {name}: a Kubernetes env list cannot unset a variable the image sets; "
                         "wrap the command with `deepep-env run` or `env -u`")
    lines.append("env:")
    for item in _k8s_items(ov):
        c = last.get(item["name"])
        if c is not None:
            lines.append("  " + _comment(c))
        lines.append(f"- name: {json.dumps(item['name'])}")
        lines.append(f"  value: {json.dumps(item['value'])}")
    return "\n".join(lines) + "\n"


def render(ov: Overlay, fmt: str, environ: Optional[Mapping[str, str]] = None) -> str:
    if fmt in ("bash", "zsh"):
        return _render_sh(ov, environ)
    if fmt == "fish":
        return _render_fish(ov, environ)
    if fmt == "json":
        return json.dumps(ov.to_dict(), indent=2) + "\n"
    if fmt == "dotenv":
        return _render_dotenv(ov)
    if fmt == "k8s":
        return _render_k8s_yaml(ov)
    if fmt == "k8s-json":
        return json.dumps(_k8s_items(ov), indent=2) + "\n"
    raise UserError(f"unknown format {fmt!r}", field="--format", accepted=", ".join(FORMATS))


__all__ = ["FORMATS", "SHELLS", "render", "sh_quote", "fish_quote", "dotenv_quote", "change_to_dict", "Note"]
