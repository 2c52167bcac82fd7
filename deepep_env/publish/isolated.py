"""Run rattler's networked calls (``index_s3``, rattler-build uploads) in a child interpreter.

Why: with py-rattler 0.28, a process that awaited one of rattler's async functions can abort
while the interpreter finalizes (``Fatal Python error: PyGILState_Release: thread state … must
be current when releasing``, exit 134/139). Measured here: a script that only runs
``asyncio.run(index_fs(...))`` on one package and returns crashed in 7 of 12 runs; after
``index_s3`` or a failed ``Gateway.query``, similar rates; with ``os._exit`` after flushing, 0
of 20. Background runtime threads still hold Python objects when Python tears down. A publish that succeeded must not exit 134, so the call runs in a child that reports its
result on stdout and leaves with ``os._exit`` (no finalization). The rattler-build uploads also
hold the interpreter for their whole duration; in a child they cannot stall the parent.

Secrets travel to the child on stdin (never argv, which ``ps`` shows) and every line that comes
back is redacted.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from deepep_env.base.channels.auth import redact
from deepep_env.base.errors import UserError

MARK = "@@deepep-env-isolated@@ "


class IsolatedError(UserError):
    """The child's call failed; ``kind`` is the exception class name it raised."""

    def __init__(self, message: str, kind: str) -> None:
        self.kind = kind
        super().__init__(message)


def call(name: str, **kwargs: Any) -> Any:
    payload = json.dumps({"call": name, "kwargs": kwargs})
    proc = subprocess.run(
        [sys.executable, "-m", "deepep_env.publish.isolated"],
        input=payload, capture_output=True, text=True, env=os.environ.copy(),
    )
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARK):
            result = json.loads(line[len(MARK):])
            if result.get("ok"):
                return result.get("value")
            raise IsolatedError(redact(result.get("error") or "failed"), result.get("kind") or "Error")
    tail = [ln for ln in (proc.stderr or "").splitlines() if ln.strip()]
    detail = redact(tail[-1]) if tail else f"exit status {proc.returncode}"
    raise IsolatedError(f"{name} crashed: {detail}", "Crash")


# ---------------------------------------------------------------------------------------------
# what the child can run


def _index_fs(channel: str, subdirs: list[str] | None, derived: bool) -> None:
    import asyncio

    from rattler.index import index_fs
    from rattler.platform import Subdir

    for sd in subdirs if subdirs is not None else [None]:
        asyncio.run(index_fs(channel_directory=Path(channel), target_platform=Subdir(sd) if sd else None,
                             write_zst=derived, write_shards=derived))


def _index_s3(channel: str, credentials: dict[str, Any], subdirs: list[str]) -> None:
    import asyncio

    from rattler.index import S3Credentials, index_s3
    from rattler.platform import Subdir

    cred = S3Credentials(**credentials)
    for sd in subdirs:
        asyncio.run(index_s3(channel_url=channel, credentials=cred, target_platform=Subdir(sd)))


def _upload_quetz(files: list[str], server: str, channel: str, api_key: str | None) -> None:
    from rattler_build import upload_package_to_quetz

    upload_package_to_quetz(files, server, channel, api_key=api_key)


def _upload_prefix(files: list[str], server: str, channel: str, api_key: str | None) -> None:
    from rattler_build import upload_package_to_prefix

    upload_package_to_prefix(files, server, channel, api_key=api_key, skip_existing=False, force=False)


CALLS: dict[str, Callable[..., Any]] = {"index_fs": _index_fs, "index_s3": _index_s3, "upload_quetz": _upload_quetz, "upload_prefix": _upload_prefix}


def _child() -> None:
    request = json.loads(sys.stdin.read())
    try:
        value = CALLS[request["call"]](**request["kwargs"])
        result = {"ok": True, "value": value}
    except BaseException as exc:  # rattler panics surface as BaseException subclasses
        text = " ".join(str(exc).split()) or type(exc).__name__
        result = {"ok": False, "error": redact(text), "kind": type(exc).__name__}
    sys.stdout.write(MARK + json.dumps(result) + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter finalization: see the module docstring


if __name__ == "__main__":
    _child()
