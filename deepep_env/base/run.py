"""One way to run a short child program: argv in, (exit status, output) or why it could not run out.

For the probes and commands deepep-env starts and waits for (the host fingerprint's compiler
queries, doctor's `ncclGetVersion` probe and traffic command): stdin closed, a time limit, and a
child that cannot be started or does not finish is a value, never an exception."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence


@dataclass(frozen=True)
class Ran:
    returncode: Optional[int]        # None: it did not run to the end (``why`` says why)
    stdout: str = ""
    stderr: str = ""
    why: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def run_child(argv: Sequence[str], *, timeout: Optional[float], env: Optional[Mapping[str, str]] = None,
              capture: bool = True) -> Ran:
    """Run ``argv`` to the end or ``timeout`` seconds. ``capture=False``: its output goes to ours (a
    command the user watches). ``env``: the child's whole environment (default: ours)."""
    try:
        p = subprocess.run(list(argv), env=dict(env) if env is not None else None, timeout=timeout, check=False,
                           stdin=subprocess.DEVNULL if capture else None, capture_output=capture, text=True,
                           errors="replace")
    except FileNotFoundError:
        return Ran(None, why=f"command not found: {argv[0]}")
    except PermissionError:
        return Ran(None, why=f"command not executable: {argv[0]}")
    except subprocess.TimeoutExpired:
        return Ran(None, why=f"timed out after {timeout}s")
    except OSError as exc:
        return Ran(None, why=f"cannot run: {exc.strerror or exc}")
    return Ran(p.returncode, p.stdout or "", p.stderr or "")
