"""Ask a library what it is, at run time, in a child process (live host only).

A file name, a wheel's dist-info or a header says what a library *should* be; the library's own
answer is what the process will get. DeepEP PR #712 guards against a downgraded NCCL with
``ncclGetVersion``: doctor asks the same question, in a child so that nothing is loaded into the
doctor itself, with a time limit, and the environment the caller gives (its ``LD_PRELOAD`` included).
"""
from __future__ import annotations

import sys
from typing import Mapping, Optional

from deepep_env.base.run import run_child

_TIMEOUT_S = 30
# dlopen the library, call ncclGetVersion(int*); print the code (NCCL >= 2.9: major*10000 + minor*100 + patch)
_NCCL_PROBE = (
    "import ctypes, sys\n"
    "lib = ctypes.CDLL(sys.argv[1])\n"
    "v = ctypes.c_int(0)\n"
    "rc = lib.ncclGetVersion(ctypes.byref(v))\n"
    "print(rc, v.value)\n"
)


def nccl_code_to_version(code: int) -> str:
    """NCCL's version code as ``major.minor.patch`` (2.9 and later: ``22809`` → ``2.28.9``)."""
    if code >= 20900:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def nccl_get_version(lib: str, env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """``ncclGetVersion`` of ``lib`` as this machine loads it; None when it cannot be asked."""
    r = run_child([sys.executable, "-c", _NCCL_PROBE, lib], timeout=_TIMEOUT_S, env=env)
    parts = r.stdout.split()
    if not r.ok or len(parts) != 2 or parts[0] != "0" or not parts[1].isdigit() or int(parts[1]) <= 0:
        return None
    return nccl_code_to_version(int(parts[1]))
