"""The layers of ``deepep_env``, lowest first, and the rules on imports between them: the one place
they are written down (issue 29.1, issue 41).

A module may import from its own layer and from the layers below it, never from one above;
tests/base/test_layers.py reads every import of the package (module-level, inside functions, under
``TYPE_CHECKING``) with ``ast`` and fails on an upward import or on an import cycle between
top-level modules/packages. There are no exceptions: an upward import is fixed by moving code to
the layer it belongs in.

Three more rules, checked by the same test:

- :data:`FORBIDDEN`: imports that "below" does not rule out but the design does (``overlay`` and
  ``platform`` read the host and the prefix; they never reach for the build, the sources, the
  lock, the installer or the spec). A violation is fixed in the code, never by editing the set.
- :data:`LAZY_REASON`: an import of a ``deepep_env`` module inside a function, outside ``cli/``,
  says why it is not at the module's top, in a comment on the import statement's lines that starts
  with ``# lazy:`` (``from deepep_env.launch.k8s import render_k8s  # lazy: yaml, for this target
  only``). The reasons are a cycle, or import cost on a path that otherwise loads less (the
  activate path, a target of ``launch``). Anything else goes to the top. ``cli/`` is exempt:
  every command module is imported on every run (``main.build_app``), so its library imports are
  local by rule (docs/architecture.md §2).

The order is the data flow: a spec is resolved and built; the packages published to a channel
and locked; the lock is installed into a prefix; the host is read and the overlay computed from
host and prefix (the overlay's rules sit below ``host/``, whose context applies them); records
of tests verify a lock on a host; doctor, launch and the command-level views sit on top; the CLI
above all. ``platform`` (profiles and probes, stdlib-only, depending on nothing but the base) sits
low because specs name its profiles; its facts enter the flow at the host context (``host/``).
docs/architecture.md draws it.

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
    ("publish", ("publish",), "built packages to a team's channel, left indexed"),
    ("lock", ("lock",), "pixi.lock: solve, check, diff, export; pixi.toml"),
    ("install", ("install",), "a lock environment installed into a prefix, with its marker"),
    ("overlay", ("overlay",), "host overlay rules and prefix activation"),
    ("host", ("host",), "one host read and one prefix per command: the host context"),
    ("verify", ("verify",),
     "test records bound to a lock digest, the host fingerprint they name; records shipped to a channel"),
    ("doctor", ("doctor", "launch"), "doctor checks over a context; launch scripts"),
    ("views", ("views", "fleet"),
     "command-level views: plan, tasks, the host view, publish (packages and records); the fleet report"),
    ("cli", ("cli",), "the typer commands"),
)

# Imports ruled out although the layer order allows them: {importer: the top-level names it never
# imports}. Data only. The host side of the flow (platform, overlay, host) reads the machine and a
# prefix; building, fetching, locking, installing and spec resolution happen before it or above it.
FORBIDDEN: dict[str, frozenset[str]] = {
    "platform": frozenset({"builder", "sources", "lock", "install", "envspec"}),
    "overlay": frozenset({"builder", "sources", "lock", "install", "envspec"}),
    "host": frozenset({"builder", "sources"}),
}

# The comment a function-level ``deepep_env`` import outside ``cli/`` carries, with its reason
# after it (see the module docstring); and the top-level packages exempt from that rule.
LAZY_REASON = "# lazy:"
LAZY_EXEMPT: frozenset[str] = frozenset({"cli"})


# The activation package (issue 50): the modules that compute the host overlay at every activation,
# shipped into each environment as its ``deepep-env`` package (recipes/deepep-env), while the tool
# itself is installed beside the environments. Its entry points are the conda hook and the stdlib-only
# ``activate`` fast path; tests/base/test_activation_closure.py checks that their import closure
# (function-level imports and ``TYPE_CHECKING`` blocks included) is exactly this set, so the package
# stays small, and the package's build id (builder/toolpkg.py: the tree of these files alone) moves
# only when one of them moves. A tool-only change (builder, lock, envspec, views, publish, launch, the
# other commands) leaves every lock and every GPU record as it was. Data only.
ACTIVATION_ENTRIES: tuple[str, ...] = ("deepep_env.cli.hook", "deepep_env.cli.fast_activate")
ACTIVATION: frozenset[str] = frozenset({
    "deepep_env", "deepep_env.cli", "deepep_env.cli.hook", "deepep_env.cli.fast_activate",
    "deepep_env.base", "deepep_env.base.atomic", "deepep_env.base.engines", "deepep_env.base.errors",
    "deepep_env.base.project", "deepep_env.base.readfile", "deepep_env.base.safetext",
    "deepep_env.formats", "deepep_env.formats.prefix", "deepep_env.formats.stamps",
    "deepep_env.host", "deepep_env.host.context",
    "deepep_env.overlay", "deepep_env.overlay.activation", "deepep_env.overlay.changes",
    "deepep_env.overlay.known_vars", "deepep_env.overlay.render", "deepep_env.overlay.rulebase",
    "deepep_env.overlay.rules", "deepep_env.overlay.rules_efa", "deepep_env.overlay.rules_v2",
    "deepep_env.platform", "deepep_env.platform.facts", "deepep_env.platform.gpus",
    "deepep_env.platform.libraries", "deepep_env.platform.probes", "deepep_env.platform.probes_gpu",
    "deepep_env.platform.probes_rdma", "deepep_env.platform.probing", "deepep_env.platform.profiles",
    "deepep_env.platform.profiles_data", "deepep_env.platform.rootfs", "deepep_env.platform.topology",
})


def layer_of(top: str) -> "tuple[int, str] | None":
    """(index, name) of the layer holding top-level module ``top``, or None when none does."""
    for i, (name, mods, _) in enumerate(LAYERS):
        if top in mods:
            return i, name
    return None
