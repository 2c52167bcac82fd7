"""Entry of bin/deepep-env in the deepep-env conda package: the package's own code first on sys.path
(never another deepep_env the interpreter may hold), then the CLI."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

from deepep_env.cli.main import entry  # noqa: E402

entry()
