"""`deepep-env activate` and `deepep-env hook` without typer: argparse only, stdlib imports only.

cli/main.py sends `deepep-env activate …` here before importing typer (~100 ms) or pydantic
(~75 ms): shells run activation on every new terminal, and the activation benchmark (docs/benchmarks.md)
holds the whole command under 150 ms. Nothing on this path may import typer, rich, pydantic or rattler
(check: python -X importtime -m deepep_env.cli.main activate …).
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Callable, ContextManager, Mapping, NamedTuple, NoReturn, Optional

if TYPE_CHECKING:  # annotations only: argparse loads in _parser
    import argparse

    from deepep_env.formats.prefix import NeedsProject, PrefixMeta
    from deepep_env.host.context import EnvContext


class ToolSide(NamedTuple):
    """What only the full tool can do for ``activate`` (cli/main.py passes it; the activation package's
    own code never needs it): build a bundled demo host, and read a prefix the marker alone does not
    describe (pixi installed it, or nothing is installed: install/prefixes.py)."""

    demo_root: Callable[[str, Optional[str]], ContextManager[str]]
    resolve: Callable[["NeedsProject"], "PrefixMeta"]

SHELL_CHOICES = ("bash", "zsh", "fish", "json")


def default_shell(environ: Optional[Mapping[str, str]] = None) -> str:
    name = os.path.basename((environ or os.environ).get("SHELL", ""))
    return name if name in ("bash", "zsh", "fish") else "bash"


def run_activate(
    env: str,
    *,
    root: str = "/",
    shell: Optional[str] = None,
    prefix: Optional[str] = None,
    platform: Optional[str] = None,
    demo_host: Optional[str] = None,
    tool: Optional[ToolSide] = None,
) -> int:
    from deepep_env.base.errors import UserError

    try:
        if shell is not None and shell not in SHELL_CHOICES:
            raise UserError(f"unknown shell {shell!r}", field="--shell", accepted=", ".join(SHELL_CHOICES))
        shell = shell or default_shell()
        act = _activation(env, root, prefix, platform, demo_host, tool)
        if shell == "json":
            import json

            doc = act.overlay.to_dict()
            doc["env_name"] = act.env_name
            doc["prefix"] = act.prefix
            doc["warnings"] = list(act.warnings)
            text = json.dumps(doc, indent=2) + "\n"
        else:
            from deepep_env.overlay.render import render

            # The activate process runs inside the shell it prints for: compute PATH-like
            # values here, de-duplicated, so nested activations do not grow them.
            text = render(act.overlay, shell, environ=os.environ)
    except UserError as err:
        print(f"deepep-env: error: {err}", file=sys.stderr)
        return err.exit_code
    for w in act.warnings:
        print(f"deepep-env: warning: {w}", file=sys.stderr)
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0


def _activation(env: str, root: str, prefix: Optional[str], platform: Optional[str],
                demo_host: Optional[str], tool: Optional[ToolSide]) -> EnvContext:
    """The activation of ``env``'s prefix on the host under ``root``, or on a bundled capture
    (``--demo-host``, read from a temporary tree only while the overlay is computed: only the
    demo path loads the capture's code, through the tool)."""
    from deepep_env.base.errors import UserError
    from deepep_env.formats.prefix import NeedsProject
    from deepep_env.host.context import activation_context

    if demo_host is not None and tool is None:
        raise UserError("--demo-host needs the deepep-env tool", field="--demo-host", accepted="`deepep-env activate`")
    if tool is None or demo_host is None:
        try:
            return activation_context(env, root=root, prefix=prefix, platform=platform)
        except NeedsProject as need:
            if tool is None:
                raise
            return activation_context(env, root=root, platform=platform, meta=tool.resolve(need))
    with tool.demo_root(root, demo_host) as host_dir:
        return _activation(env, host_dir, prefix, platform, None, tool)


def hook_main(argv: list[str]) -> int:
    """``deepep-env hook --shell SHELL [--prefix P]``: the overlay for a conda ``activate.d`` script."""
    from deepep_env.cli.hook import SHELLS, run_hook

    parser = _parser("deepep-env hook", "Print the host overlay for an activate.d script to eval (with its undo).")
    parser.add_argument("--shell", choices=SHELLS, default="sh")
    parser.add_argument("--prefix", default=None, help="the environment (default $CONDA_PREFIX)")
    args = parser.parse_args(argv)
    text, warnings = run_hook(args.shell, args.prefix, os.environ)
    for w in warnings:
        print(f"deepep-env: warning: {w}", file=sys.stderr)
    sys.stdout.write(text)
    return 0


def _parser(prog: str, description: str) -> argparse.ArgumentParser:
    import argparse

    class OneLineParser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:  # a usage error is one line naming what is accepted
            sys.stderr.write(f"deepep-env: error: {' '.join(message.split())} (see `{self.prog} --help`)\n")
            raise SystemExit(2)

    # A fixed width: HelpFormatter otherwise imports shutil (and bz2, lzma) to ask the terminal, on
    # every add_argument.
    return OneLineParser(formatter_class=lambda prog: argparse.HelpFormatter(prog, width=100), prog=prog,
                         description=description)


def main(argv: list[str], tool: Optional[ToolSide] = None) -> int:
    from deepep_env.base.project import DEFAULT_PREFIX   # stdlib only; host.context imports it anyway

    parser = _parser("deepep-env activate",
                     "Print a script for eval that activates ENV's installed prefix plus the host overlay.")
    parser.add_argument("env", metavar="ENV", help="installed env name")
    parser.add_argument("--root", default="/", help="read the host under this directory (default /)")
    parser.add_argument("--shell", choices=SHELL_CHOICES, default=None, help="default: from $SHELL, else bash")
    parser.add_argument("--prefix", default=None, help=f"the env's prefix (default $DEEPEP_ENV_PREFIX, else the project's {DEFAULT_PREFIX})")
    parser.add_argument("--platform", default=None, help="platform profile (default: detected)")
    parser.add_argument("--demo-host", default=None, metavar="NAME",
                        help="a bundled captured host (gcp-b200-demo, h200x8-nvlink) instead of this machine")
    args = parser.parse_args(argv)
    return run_activate(args.env, root=args.root, shell=args.shell, prefix=args.prefix, platform=args.platform,
                        demo_host=args.demo_host, tool=tool)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
