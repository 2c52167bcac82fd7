"""Print rattler's activation script for a prefix (the code pixi runs for `pixi run`/`pixi shell`),
for bash: `eval "$(python rattler_activate.py PREFIX)"`. The GPU runs use it to show that an
environment's own activation (its packages' activate.d: deepep-env's host overlay) is all a process
needs — no deepep-env wrapper."""
import os
import sys
from pathlib import Path

from rattler.shell import ActivationVariables, Shell, activate

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: rattler_activate.py PREFIX")
    path = os.environ.get("PATH", "").split(os.pathsep)
    print(activate(Path(sys.argv[1]).resolve(), ActivationVariables(None, path), Shell.bash).script)
