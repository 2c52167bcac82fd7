"""Entry point of the ``deepep-env`` console script.

Commands live one per module in this package, each exposing ``register(app)``. ``activate`` has a
fast path that imports neither typer nor pydantic: shells run it on every new terminal
(docs/benchmarks.md: the activation benchmark holds it under 150 ms).
"""
from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:  # annotations only: typer loads after the fast paths
    from typing import Protocol

    import typer

    from deepep_env.cli import fast_activate
    from deepep_env.formats.prefix import NeedsProject, PrefixMeta

    class _ClickError(Protocol):
        """click's ``ClickException`` (click's own or typer's vendored copy): a usage error."""

        def format_message(self) -> str: ...

# Order is the order of `deepep-env --help`.
COMMAND_MODULES = (
    "spec",
    "plan",
    "detect",
    "overlay",
    "activate",
    "fetch",
    "build",
    "lock",
    "install",
    "carry",
    "repack",
    "diff",
    "export",
    "pixi",
    "task",
    "record",
    "key",
    "admit",
    "verified",
    "prove",
    "doctor",
    "fleet",
    "publish",
    "launch",
)


# `-h` as well as `--help`, as pixi, conda and rattler-build take: click's contexts inherit
# help_option_names, so every command and sub-command (fleet report, pixi …) takes both.
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}


def build_app() -> typer.Typer:
    import typer

    app = typer.Typer(
        name="deepep-env",
        help="Install, verify and run DeepEP from versioned, locked, hardware-aware environments.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        context_settings=CONTEXT_SETTINGS,
    )

    def _version(value: bool) -> None:
        if value:
            from deepep_env.cli.version import print_version

            print_version()
            raise typer.Exit(0)

    @app.callback()
    def _root(
        version: bool = typer.Option(False, "--version", "-V", is_eager=True, callback=_version,
                                     help="print the tool's version, this checkout's build id, and the versions "
                                          "of rattler-build and py-rattler it drives"),
    ) -> None:
        """Install, verify and run DeepEP from versioned, locked, hardware-aware environments."""

    for name in COMMAND_MODULES:   # a command module that fails to import is an error, never a silent gap
        importlib.import_module(f"deepep_env.cli.{name}").register(app)
    return app


def _usage_line(exc: _ClickError) -> str:
    """click's usage errors in one line: the message, with the command to ask for help."""
    msg = " ".join(str(exc.format_message()).split())
    ctx = getattr(exc, "ctx", None)
    path = getattr(ctx, "command_path", None) if ctx is not None else None
    return f"{msg} (see `{path} --help`)" if path else msg


def _typer_exceptions() -> tuple[type[Exception], type[Exception], type[Exception]]:
    """What ``app(standalone_mode=False)`` raises, taken from typer's public names only: usage errors
    (the ``ClickException`` base of ``typer.BadParameter``), ``typer.Abort`` and ``typer.Exit``. These
    are click's own classes in typer 0.12 and the classes of typer's vendored click (``typer._click``)
    in typer 0.29, so both are covered without probing module names; a typer that drops the
    hierarchy fails here, loudly, rather than letting a usage error out as a traceback. (click's own
    exceptions are not caught: nothing in deepep-env raises them.)"""
    import typer

    usage = next((c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"), None)
    if usage is None or not issubclass(usage, Exception):  # pragma: no cover - not click's hierarchy
        raise RuntimeError("typer.BadParameter has no ClickException base: this typer is not supported")
    return usage, typer.Abort, typer.Exit


def _error(line: str) -> None:
    """The one error line, redacted: whatever a message quotes (a spec entry, a URL, an argument),
    no credential reaches the terminal or a CI log."""
    from deepep_env.base.channels.auth import redact

    print(f"deepep-env: error: {redact(line)}", file=sys.stderr)


def tool_activation() -> "fast_activate.ToolSide":
    """What the tool adds to the stdlib-only ``activate`` (cli/fast_activate.py): bundled demo hosts and
    prefixes the marker alone does not describe. Each loads its code only when it is used."""
    from contextlib import contextmanager
    from typing import Iterator, Optional

    from deepep_env.cli.fast_activate import ToolSide

    @contextmanager
    def demo_root(root: str, demo_host: Optional[str]) -> Iterator[str]:
        from deepep_env.platform.demo import host_root

        with host_root(root, demo_host) as d:
            yield d

    def resolve(need: "NeedsProject") -> "PrefixMeta":
        from deepep_env.install.prefixes import resolve as resolve_need

        return resolve_need(need)

    return ToolSide(demo_root, resolve)


_HELP = frozenset({"-h", "--help"})


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["activate"] and not _HELP & set(argv[1:]):   # -h/--help: typer's help, as every command's
        from deepep_env.cli import fast_activate   # the fast paths: stdlib only, no typer (module docstring)

        # --json (the tool's spelling on every command) is the fast path's --shell json: said here, so the
        # activation's own code (base/layers.py ACTIVATION) is not touched for a tool habit
        rest = [a for x in argv[1:] for a in (["--shell", "json"] if x == "--json" else [x])]
        return fast_activate.main(rest, tool_activation())
    if argv[:1] == ["hook"]:   # run by every conda activation of an env with the deepep-env package
        from deepep_env.cli import fast_activate

        return fast_activate.hook_main(argv[1:])
    # imports stay below the fast paths: activate and hook load only what they use
    from deepep_env.base.errors import UserError
    from deepep_env.base.readfile import NotRegular, TooLarge, as_user_error

    app = build_app()
    usage_exc, abort_exc, exit_exc = _typer_exceptions()
    try:
        rv = app(args=argv, prog_name="deepep-env", standalone_mode=False)
    except UserError as err:
        _error(str(err))
        return err.exit_code
    except (NotRegular, TooLarge) as exc:  # the bounded reader's refusal, where no caller worded it
        print(f"deepep-env: error: {as_user_error(exc, exc.filename)}", file=sys.stderr)
        return 2
    except SystemExit as exc:
        return int(exc.code or 0)
    except usage_exc as exc:
        _error(_usage_line(cast("_ClickError", exc)))   # usage_exc is ClickException
        return 2
    except abort_exc as exc:
        # typer turns an EOFError that escaped a command into Abort (a KeyboardInterrupt into exit
        # 130). No command reads the terminal, so that EOFError is data that ended early (a truncated
        # archive, say) that no library call turned into a UserError: an error, never Ctrl-C.
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, EOFError):
            _error(f"a file or stream ended before its data did ({cause or 'EOFError'}): truncated or corrupt input")
            return 1
        print("deepep-env: aborted (interrupted, or input ended)", file=sys.stderr)
        return 130
    except exit_exc as exc:
        return int(getattr(exc, "exit_code", 0) or 0)
    # standalone_mode=False: a command's `raise typer.Exit(n)` comes back as the return value.
    return rv if isinstance(rv, int) else 0


# Commands whose children (build scripts, compilers, uploads) must not outlive a killed deepep-env.
WATCHED_COMMANDS = frozenset({"build", "publish", "fetch", "install", "task"})   # not `run`: it execs


def entry() -> None:
    """Console-script entry. py-rattler 0.28's runtime can abort at interpreter shutdown after any of
    its async calls ran (PyGILState_Release, exit 134): flush, then leave without the shutdown dance."""
    if WATCHED_COMMANDS & set(sys.argv[1:2]):
        from deepep_env.base.children import start_watchdog   # local: activate/hook must not load it

        start_watchdog()
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


if __name__ == "__main__":
    entry()
