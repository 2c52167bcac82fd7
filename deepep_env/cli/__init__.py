"""Thin command modules over the library. Each ``cli/<name>.py`` defines ``register(app)``, except the
stdlib-only activate path: ``fast_activate.py`` (argparse) and ``hook.py`` (the conda activation hook).

Every command module is imported to build the CLI on every run, so a command imports the library
it drives inside its function: `deepep-env doctor` does not load rattler, `deepep-env lock` does not
load the probes, and `activate`/`hook` never reach typer at all (cli/main.py's fast paths).
"""
