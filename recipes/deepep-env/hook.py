"""The activation hook of the deepep-env package (etc/conda/activate.d runs it): the package's own
modules first on sys.path (never another deepep_env the interpreter may hold), then
``hook --shell SHELL --prefix PREFIX`` (cli/fast_activate.py: stdlib only)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

from deepep_env.cli.fast_activate import hook_main  # noqa: E402

sys.exit(hook_main(sys.argv[1:]))
