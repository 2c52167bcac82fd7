"""Children die with their parent: a build script, a compiler or an upload must not outlive a
``deepep-env`` that was killed (``kill -9``, a lost terminal, a CI timeout).

rattler-build and the upload clients start their processes from Rust, so they cannot be given a
process group or ``PR_SET_PDEATHSIG`` of ours. Instead a small watchdog process is forked at the start
of a command that runs such children. While the command lives, the watchdog keeps a snapshot of the
command's process tree (from ``/proc``); when the command ends in any way — the pipe between them
closes, which the kernel does even on SIGKILL — it terminates what is left of that tree (SIGTERM,
then SIGKILL a second later). Linux only; elsewhere it does nothing.
"""
from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
import time
from typing import Iterator, Optional

SNAPSHOT_EVERY_S = 0.5


def _stat(pid: int) -> Optional[list[str]]:
    """Fields of /proc/PID/stat after the command name (state, ppid, …), or None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return None
    # "pid (comm) state ppid …": comm may hold spaces and parentheses, so split after the last ')'
    return text.rsplit(")", 1)[-1].split()


def _start_time(pid: int) -> Optional[str]:
    """When the process started (clock ticks since boot): with the pid, an identity that survives
    pid reuse."""
    f = _stat(pid)
    return f[19] if f and len(f) > 19 else None


def _ppids() -> dict[int, int]:
    out: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        rest = _stat(int(name))
        if rest and len(rest) > 1 and rest[1].isdigit():
            out[int(name)] = int(rest[1])
    return out


def descendants(root: int) -> set[int]:
    """Every live process below ``root`` (children, their children, …)."""
    children: dict[int, list[int]] = {}
    for pid, ppid in _ppids().items():
        children.setdefault(ppid, []).append(pid)
    seen: set[int] = set()
    stack = list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        if pid not in seen:
            seen.add(pid)
            stack.extend(children.get(pid, ()))
    return seen


def _terminate(known: dict[int, Optional[str]]) -> None:
    """Signal each process of the snapshot that is still the same process (pid and start time)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = False
        for pid, started in known.items():
            if started is None or _start_time(pid) != started:
                continue                          # gone, or the pid now belongs to someone else
            try:
                os.kill(pid, sig)
                alive = True
            except (ProcessLookupError, PermissionError):
                continue
        if not alive:
            return
        time.sleep(1.0)


def _watch(read_fd: int, parent: int) -> None:
    """The watchdog's life: snapshot the parent's tree until the pipe closes, then clean up."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # a Ctrl-C is for the command; cleanup comes after
    me = os.getpid()
    known: dict[int, Optional[str]] = {}
    while True:
        ready, _, _ = select.select([read_fd], [], [], SNAPSHOT_EVERY_S)
        if ready:
            break
        known = {pid: _start_time(pid) for pid in descendants(parent) - {me}}
    # The parent is gone: its children were re-parented, so use the last snapshot (and what it spawned).
    for pid in list(known):
        if _start_time(pid) == known[pid]:
            known.update({d: _start_time(d) for d in descendants(pid) if d != me})
    _terminate(known)


def start_watchdog() -> bool:
    """Fork the watchdog (once per process); True when one runs."""
    if not os.path.isdir("/proc/self") or os.environ.get("DEEPEP_ENV_NO_WATCHDOG"):
        return False
    read_fd, write_fd = os.pipe()          # not inherited by exec'd children (O_CLOEXEC)
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:                            # the watchdog
        try:
            os.close(write_fd)
            os.setsid()                     # out of the terminal's process group
            _watch(read_fd, parent)
        finally:
            os._exit(0)
    os.close(read_fd)                       # the command keeps write_fd open until it ends
    return True


@contextlib.contextmanager
def cleanup_on_sigterm() -> Iterator[None]:
    """While the block runs, SIGTERM raises ``SystemExit(143)`` in the main thread, so the block's
    ``finally`` clauses remove what they made (Python's default ends the process at once: a fetch
    killed so left its partial download in the cache's ``.tmp/`` for ever, issue 39.6). For blocks
    that run Python: a long call into native code would hold the signal until it returns. Elsewhere
    than the main thread it changes nothing (only that thread may set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _exit(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    old = signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
