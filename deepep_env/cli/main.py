"""Entry point of the ``deepep-env`` console script.

Commands live one per module in this package, each exposing ``register(app)``. ``activate`` has a
fast path that imports neither typer nor pydantic: shells run it on every new terminal
(benchmarks/bench_activate.py holds it under 150 ms).
"""
from __future__ import annotations

import importlib
import sys

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
    "diff",
    "export",
    "pixi",
    "task",
    "doctor",
    "publish",
    "launch",
)


def build_app():
    import typer

    app = typer.Typer(
        name="deepep-env",
        help="Install, verify and run DeepEP from versioned, locked, hardware-aware environments.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"deepep_env.cli.{name}")
        except ModuleNotFoundError as exc:  # a command not written yet must not break the others
            if exc.name == f"deepep_env.cli.{name}":
                continue
            raise
        module.register(app)
    return app


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["activate"]:
        from deepep_env.cli import fast_activate

        return fast_activate.main(argv[1:])
    from deepep_env.errors import UserError

    app = build_app()
    try:
        app(args=argv, prog_name="deepep-env", standalone_mode=False)
    except UserError as err:
        print(f"deepep-env: error: {err}", file=sys.stderr)
        return err.exit_code
    except SystemExit as exc:
        return int(exc.code or 0)
    except Exception as exc:  # click's usage errors
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            return 2
        if isinstance(exc, click.exceptions.Abort):
            return 130
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
