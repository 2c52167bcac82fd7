"""Typed environment changes, each carrying the rule and the host fact that produced it.

Spack's ``EnvironmentModifications`` habit (style.md): the overlay is a recorded list, not a
script — it can be rendered for any shell, applied to a dict for ``deepep-env run``, shown as JSON
with provenance, or diffed. A :class:`Note` records a decision that changes nothing (a rule that
stayed quiet, a setting DeepEP overwrites) so ``overlay --format json`` explains itself.
"""
from __future__ import annotations

from typing import Any, Mapping, MutableMapping, NamedTuple, Optional, Union

from deepep_env.formats.stamps import OVERLAY_DOC

# NamedTuple rather than dataclasses: defined on every `deepep-env activate` (see
# deepep_env/platform/facts.py for the cost).


class Set(NamedTuple):
    name: str
    value: str
    rule: str
    fact: str

    @property
    def op(self) -> str:
        return "set"

    def apply(self, env: MutableMapping[str, str]) -> None:
        env[self.name] = self.value


class Unset(NamedTuple):
    name: str
    rule: str
    fact: str

    @property
    def op(self) -> str:
        return "unset"

    def apply(self, env: MutableMapping[str, str]) -> None:
        env.pop(self.name, None)


class PrependPath(NamedTuple):
    """Put ``entries`` (in order) before the variable's current value, ``sep``-joined."""

    name: str
    entries: tuple[str, ...]
    rule: str
    fact: str
    sep: str = ":"

    @property
    def op(self) -> str:
        return "prepend-path"

    @property
    def value(self) -> str:
        return self.sep.join(self.entries)

    def apply(self, env: MutableMapping[str, str]) -> None:
        old = [p for p in env.get(self.name, "").split(self.sep) if p and p not in self.entries]
        env[self.name] = self.sep.join(list(self.entries) + old)


class Source(NamedTuple):
    """Run a shell script in the activated shell (conda's ``etc/conda/activate.d``)."""

    path: str
    shell: str  # "sh" (bash/zsh) | "fish"
    rule: str
    fact: str

    @property
    def op(self) -> str:
        return "source"

    @property
    def name(self) -> str:  # so every change has a name for listings
        return self.path


class Note(NamedTuple):
    """A decision with no effect on the environment, kept for the record."""

    rule: str
    fact: str
    message: str
    level: str = "info"  # "info" | "warning"

    @property
    def op(self) -> str:
        return "note"


Change = Union[Set, Unset, PrependPath, Source]


def change_to_dict(c: Union[Change, Note]) -> dict[str, Any]:
    d: dict[str, Any] = {"op": c.op}
    if isinstance(c, Set):
        d.update(name=c.name, value=c.value)
    elif isinstance(c, Unset):
        d.update(name=c.name, value=None)
    elif isinstance(c, PrependPath):
        d.update(name=c.name, value=c.value, entries=list(c.entries), sep=c.sep)
    elif isinstance(c, Source):
        d.update(path=c.path, shell=c.shell)
    elif isinstance(c, Note):
        d.update(message=c.message, level=c.level)
    d.update(rule=c.rule, fact=c.fact)
    return d


class Overlay(NamedTuple):
    """The result: platform, ordered changes, notes."""

    platform: str
    changes: tuple[Change, ...]
    notes: tuple[Note, ...] = ()

    def env(self) -> dict[str, Optional[str]]:
        """name → value (``None`` = unset), applying the changes to an empty environment.

        A prepend-path shows only what it prepends; ``changes`` says it prepends.
        """
        out: dict[str, Optional[str]] = {}
        for c in self.changes:
            if isinstance(c, Set):
                out[c.name] = c.value
            elif isinstance(c, Unset):
                out[c.name] = None
            elif isinstance(c, PrependPath):
                prev = out.get(c.name)
                entries = list(c.entries) + [p for p in (prev or "").split(c.sep) if p and p not in c.entries]
                out[c.name] = c.sep.join(entries)
        return out

    def apply(self, environ: Mapping[str, str]) -> dict[str, str]:
        """A copy of ``environ`` with every change applied (Source changes are skipped: running
        scripts is the caller's business, see :func:`deepep_env.overlay.activation.run_environment`)."""
        env = dict(environ)
        for c in self.changes:
            if not isinstance(c, Source):
                c.apply(env)
        return env

    def warnings(self) -> list[Note]:
        return [n for n in self.notes if n.level == "warning"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "_meta": OVERLAY_DOC.meta(),
            "platform": self.platform,
            "env": self.env(),
            "changes": [change_to_dict(c) for c in self.changes],
            "notes": [change_to_dict(n) for n in self.notes],
        }
