"""What an overlay rule sees and adds to (:class:`RuleContext`), and the ``@rule`` mark.

Rule modules (``rules.py``, ``rules_v2.py``) import this and nothing of each other's registries;
:mod:`deepep_env.overlay.rules` collects every marked rule into ``RULES`` (one way: base → rule
modules → the collection). Stdlib-only: activation imports it.
"""
from __future__ import annotations

import os
from types import ModuleType
from typing import Callable, Mapping, Optional, Sequence

from deepep_env.overlay import known_vars
from deepep_env.overlay.changes import Change, Note, Overlay, PrependPath, Set, Unset
from deepep_env.platform.facts import AffinityEntry, HostFacts
from deepep_env.platform.profiles import Profile


class RuleContext:
    """What a rule sees (the facts, the profile, the prefix) and what it adds to."""

    def __init__(
        self,
        facts: HostFacts,
        profile: Profile,
        platform_source: str,
        prefix: Optional[str],
        site_dirs: tuple[str, ...],
        spec_env: dict[str, str],
        environ: Optional[Mapping[str, str]] = None,
    ) -> None:
        self.facts = facts
        self.profile = profile
        self.platform_source = platform_source
        self.prefix = prefix
        self.site_dirs = site_dirs
        self.spec_env = spec_env
        # The environment of the process being set up (HOME, XDG_CACHE_HOME for rules_v2's JIT cache).
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        self.changes: list[Change] = []
        self.notes: list[Note] = []

    # -- helpers used by the rules -------------------------------------------------------
    def set(self, name: str, value: str, rule: str, fact: str) -> None:
        known_vars.check_name(name, where=f"rule {rule}")
        self._replace(name, rule)
        self.changes.append(Set(name, value, rule, fact))

    def unset(self, name: str, rule: str, fact: str) -> None:
        known_vars.check_name(name, where=f"rule {rule}")
        self._replace(name, rule)
        self.changes.append(Unset(name, rule, fact))

    def prepend(self, name: str, entries: Sequence[str], rule: str, fact: str, sep: str = ":") -> None:
        known_vars.check_name(name, where=f"rule {rule}")
        self.changes.append(PrependPath(name, tuple(entries), rule, fact, sep))

    def note(self, rule: str, fact: str, message: str, level: str = "info") -> None:
        self.notes.append(Note(rule, fact, " ".join(message.split()), level))

    def _replace(self, name: str, rule: str) -> None:
        for old in [c for c in self.changes if isinstance(c, (Set, Unset)) and c.name == name]:
            self.changes.remove(old)
            self.note(rule, f"{old.rule} had set {name}", f"{name}: {rule} overrides {old.rule}")

    def value(self, name: str) -> Optional[str]:
        return Overlay("", tuple(self.changes)).env().get(name)

    # -- derived facts -------------------------------------------------------------------
    @property
    def displaced(self) -> list[AffinityEntry]:
        """GPUs whose nearest RDMA device cannot be named (``AffinityEntry.unnamed``)."""
        return [e for e in self.facts.affinity if e.unnamed]

    @property
    def mapping(self) -> list[AffinityEntry]:
        """The GPU→NIC mapping the rules set, or none when a GPU's nearest NIC cannot be named: a stand-in
        would be another GPU's NIC and one left out stops DeepEP's PR #466 (``device_mapping[device]``,
        KeyError), so NVSHMEM picks each PE's nearest NIC itself (issue 39.11)."""
        if self.displaced:
            return []
        return [e for e in self.facts.affinity if e.hca and e.port is not None]

    def mapped_hcas(self) -> list[str]:
        seen: list[str] = []
        for e in self.mapping:
            if e.hca and e.hca not in seen:  # mapping keeps only entries with an HCA
                seen.append(e.hca)
        return seen or [n.hca for n in self.facts.usable_nics()]


Rule = Callable[[RuleContext], None]


def rule(name: str) -> Callable[[Rule], Rule]:
    """Mark ``fn`` as the overlay rule ``name`` (profiles list rules by name)."""

    def deco(fn: Rule) -> Rule:
        fn.rule_name = name  # type: ignore[attr-defined]
        return fn

    return deco


def rules_of(module: ModuleType) -> dict[str, Rule]:
    """The rules a module defines, by name, in definition order."""
    return {fn.rule_name: fn for fn in vars(module).values() if callable(fn) and hasattr(fn, "rule_name")}
