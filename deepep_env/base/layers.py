"""The layers of ``deepep_env``, lowest first: the one place they are written down (issue 29.1).

A module may import from its own layer and from the layers below it, never from one above;
tests/base/test_layers.py reads every import of the package (module-level and inside functions) with
``ast`` and fails on an upward import or on an import cycle between top-level modules/packages.
There are no exceptions: an upward import is fixed by moving code to the layer it belongs in.

The order is the data flow: a spec is resolved, built, published and locked; the lock is
installed into a prefix; the host is read and the overlay computed from host and prefix (the
overlay's rules sit below ``host/``, whose context applies them); doctor, launch and the
command-level views sit on top; the CLI above all. ``platform`` (profiles and
probes, stdlib-only, depending on nothing but the base) sits low because specs name its profiles;
its facts enter the flow at the host context (``host/``). docs/architecture.md draws it.

Entries are top-level names under ``deepep_env`` (``""`` is the package's own ``__init__``).
A name that does not exist yet is allowed (modules on open branches); a module that exists and
is in no layer fails the test.
"""
from __future__ import annotations

# (layer, top-level modules/packages, what the layer holds), lowest first. Data only: no imports.
LAYERS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("base", ("", "base"),
     "typed errors, hashing, atomic writes, bounded reads, the project's paths, channel URLs and secrets in them"),
    ("formats", ("formats",),
     "the file formats: stamps, pixi.lock, lock platforms, the build inputs record, the prefix marker"),
    ("platform", ("platform",), "platform profiles, host probes and facts, read-only"),
    ("spec", ("envspec",), "env specs: load, validate, resolve against a platform profile"),
    ("sources", ("sources",), "source cache, host fingerprints"),
    ("builder", ("builder",),
     "recipe graph, the tool as a package, the build plan (build ids), rattler-build, the store, the build channel"),
    ("lock", ("lock",), "pixi.lock: solve, check, diff, export; pixi.toml"),
    ("install", ("install",), "a lock environment installed into a prefix, with its marker"),
    ("overlay", ("overlay",), "host overlay rules and prefix activation"),
    ("host", ("host",), "one host read and one prefix per command: the host context"),
    ("verify", ("verify",), "test records bound to a lock digest, the host fingerprint they name"),
    ("doctor", ("doctor", "launch"), "doctor checks over a context; launch scripts"),
    ("views", ("views", "publish", "fleet"),
     "command-level views: plan, tasks, the host view; publishing packages and records; the fleet report"),
    ("cli", ("cli",), "the typer commands"),
)


def layer_of(top: str) -> "tuple[int, str] | None":
    """(index, name) of the layer holding top-level module ``top``, or None when none does."""
    for i, (name, mods, _) in enumerate(LAYERS):
        if top in mods:
            return i, name
    return None
