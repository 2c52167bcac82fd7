"""Test records: ``verified/ENV/<time>-<test>-<node>.json``, one per finished DeepEP test.

A record binds a result to what produced it: the environment and the digest of its locked package
set (:func:`deepep_env.lock.digest.section_digest`), the host fingerprint, the test, its
arguments and exit code, DeepEP's figures, the time and this tool's version. Records are plain
files in the project; a team commits those it vouches for. Nothing from the caller's environment
is kept (arguments are redacted like every message), so a record never holds a credential.

What is written is checked first (:func:`check_inputs`): an env of the project, a test name fit for a
file name, an exit status a process can have. ``passed`` is the verdict on the test's own output
(:mod:`deepep_env.verify.verdict`), with the ``evidence`` behind it and the ``ranks``/``gpus`` the run
used. Readers go through :func:`load_records`: every file read with a size and nesting bound, checked
field by field (:mod:`deepep_env.verify.schema`), anything else skipped with a warning naming it.
"""
from __future__ import annotations

import json
import os
import platform as _platform
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

from deepep_env import __version__
from deepep_env.base.atomic import write_text
from deepep_env.base.channels.auth import redact
from deepep_env.base.errors import UserError
from deepep_env.base.project import pixi_env_name
from deepep_env.base.readfile import decode, parse_json, read_bounded
from deepep_env.formats.lockfile import read_lock
from deepep_env.formats.stamps import TEST_RECORD
from deepep_env.host.context import read_host
from deepep_env.lock.digest import env_digests
from deepep_env.verify.figures import parse_figures, parse_rank_figures
from deepep_env.verify.fingerprint import host_fingerprint
from deepep_env.verify.schema import EXIT_CODES, check_record
from deepep_env.verify.verdict import judge, ranks_of

if TYPE_CHECKING:  # annotations only
    from deepep_env.lock.workspace import Workspace
    from deepep_env.base.project import Project

VERIFIED_DIR = "verified"
MAX_RECORD_BYTES = 1 << 20
OUTPUT_TAIL_BYTES = 8 << 20      # what of a test's output is kept in memory for the figures
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
TEST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def safe_name(text: str, limit: int = 64) -> str:
    """``text`` as one file-name component: ``[A-Za-z0-9._-]``, never empty, never dot-first."""
    out = _SAFE.sub("-", text).strip("-.")[:limit]
    return out or "x"


def short_test(name: str) -> str:
    """``deepep-test-intranode`` → ``intranode`` (a launch test name stays as it is)."""
    return name[len("deepep-test-"):] if name.startswith("deepep-test-") else name


def _subdir() -> str:
    m = _platform.machine().lower()
    return "linux-aarch64" if m in ("aarch64", "arm64") else "linux-64"


def lock_identity(project: Project, env: str, lock_platform: Optional[str] = None,
                  ws: Optional[Workspace] = None) -> dict[str, Any]:
    """``{lock_env, lock_platform, digest}`` of ``env`` from the project's pixi.lock; ``digest`` is
    None (with ``why``) when the env is not locked: such a record proves nothing about a lock.
    ``ws``: the command's workspace (the lock read once)."""
    lock_env = pixi_env_name(env)
    try:
        lock = ws.lock(project.pixi_lock) if ws is not None else read_lock(project.pixi_lock)
    except UserError as err:
        return {"lock_env": lock_env, "lock_platform": None, "digest": None, "why": str(err)}
    digests = env_digests(lock, lock_env)
    e = lock.env(lock_env)
    if lock_platform is None and len(digests) > 1 and e is not None:
        lock_platform = next((p for p in digests if e.subdirs.get(p) == _subdir()), None)
    if lock_platform is None and len(digests) == 1:
        lock_platform = next(iter(digests))
    if lock_platform not in digests:
        return {"lock_env": lock_env, "lock_platform": lock_platform, "digest": None,
                "why": f"{project.pixi_lock.name} has no locked packages for {lock_env}"
                       + (f" on {lock_platform}" if lock_platform else "")}
    return {"lock_env": lock_env, "lock_platform": lock_platform, "digest": digests[lock_platform]}


def host_root(environ: Optional[dict[str, str]] = None) -> str:
    """The host a record describes: ``$DEEPEP_ENV_HOST_ROOT`` (as activation reads it), else ``/``."""
    env = os.environ if environ is None else environ
    return env.get("DEEPEP_ENV_HOST_ROOT") or "/"


def record_prefix(project: Project, env: str, prefix: Optional[str] = None) -> Optional[str]:
    """The prefix whose activation a record of ``env`` keeps: ``prefix``, else ``$CONDA_PREFIX`` when it
    is an activated ``env``, else the project's prefix of ``env`` (None when none is installed)."""
    if prefix:
        return prefix
    active = os.environ.get("CONDA_PREFIX")
    if active and os.environ.get("CONDA_DEFAULT_ENV") in (env, pixi_env_name(env)):
        return active
    own = project.prefix_for(env)
    return str(own) if own.is_dir() else None


def check_inputs(project: Project, env: str, test: str, exit_code: int) -> None:
    """What a record is about, refused in one line before anything is read or written: an env this
    project has a spec for (a path or an unknown name is not one), a test name that is a file-name
    word, an exit status a process can have."""
    if env not in project.spec_names():
        raise UserError(f"unknown env {env!r}", field="ENV", accepted=", ".join(project.spec_names()) or "no specs in env_specs/")
    if not TEST_NAME.match(test):
        raise UserError(f"not a test name: {test!r}", field="--test",
                        accepted="a letter or digit, then up to 63 letters, digits, '.', '_' or '-' (intranode, low-latency)")
    if isinstance(exit_code, bool) or exit_code not in EXIT_CODES:
        raise UserError(f"not an exit status: {exit_code}", field="--exit-code",
                        accepted="an integer from -255 to 255 (the shell's $?, or -N for a process killed by signal N)")


def _result(test: str, args: Sequence[str], exit_code: int, output: str, gpu_count: int) -> dict[str, Any]:
    """The run's verdict from its own output, its figures, and the ranks and GPUs it used."""
    figures = parse_figures(output)
    verdict = judge(test, exit_code, output, figures)
    ranks = ranks_of(test, args, output)
    return {"exit_code": exit_code, "passed": verdict.passed, "evidence": verdict.evidence, "figures": figures,
            "rank_figures": parse_rank_figures(output), "ranks": ranks, "gpus": min(ranks, gpu_count) if ranks else None}


def build_record(project: Project, env: str, test: str, args: Sequence[str], exit_code: int, output: str, *,
                 root: str = "/", platform: Optional[str] = None, lock_platform: Optional[str] = None,
                 now: Optional[datetime] = None, activation: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The record of one finished test. ``activation``: what the environment's own activation set for
    it (verify/activation.py); the tool's version is metadata, never part of what the record binds to."""
    name = short_test(test)
    check_inputs(project, env, name, exit_code)
    host = host_fingerprint(read_host(root, platform, {}))
    when = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).replace(microsecond=0)
    return {
        "format": TEST_RECORD.stamp,
        "env": env,
        **lock_identity(project, env, lock_platform),
        "host": host,
        "test": name,
        "args": [redact(a) for a in args],
        **_result(name, args, exit_code, output, int(host.get("gpu_count") or 0)),
        "activation": activation,
        "time": when.isoformat().replace("+00:00", "Z"),
        "tool_version": __version__,
    }


def record_path(project: Project, rec: dict[str, Any]) -> Path:
    stamp = rec["time"].replace("-", "").replace(":", "")
    name = f"{stamp}-{safe_name(rec['test'])}-{safe_name(str(rec['host'].get('node') or 'host'))}.json"
    return project.root / VERIFIED_DIR / safe_name(rec["env"], 128) / name


def write_record(project: Project, rec: dict[str, Any]) -> Path:
    """Atomic write; a second record of the same second, test and node gets a ``-N`` suffix."""
    path = record_path(project, rec)
    n = 1
    while path.exists():
        n += 1
        path = path.with_name(f"{record_path(project, rec).stem}-{n}.json")
    return write_text(path, json.dumps(rec, indent=1, sort_keys=True) + "\n")


def record_test(project: Project, env: str, test: str, args: Sequence[str], exit_code: int, output: str,
                **kw: Any) -> Path:
    return write_record(project, build_record(project, env, test, args, exit_code, output, **kw))


@dataclass(frozen=True)
class Record:
    path: Path
    data: dict[str, Any]

    @property
    def key(self) -> tuple[str, str, str]:
        d = self.data
        return (str(d.get("env")), str((d.get("host") or {}).get("platform")), str(d.get("test")))


def read_record(path: Path) -> Record:
    """One record file, bounded (size, nesting) and checked field by field."""
    text = decode(read_bounded(path, MAX_RECORD_BYTES, accepted="a JSON test record"), path, what="test record")
    return Record(path, check_record(parse_json(text, path, accepted="a test record (JSON)"), path))


def load_records(project: Project, env: Optional[str] = None,
                 base: Optional[Path] = None) -> tuple[list[Record], list[str]]:
    """Every readable record under ``verified/`` (of ``env`` only, when given), oldest first, and a
    warning line for each file skipped. ``base``: another ``verified/`` folder (a channel's)."""
    base = project.root / VERIFIED_DIR if base is None else base
    out: list[Record] = []
    warnings: list[str] = []
    if not base.is_dir():
        return out, warnings
    dirs = [base / safe_name(env, 128)] if env else sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink())
    for d in dirs:
        if not d.is_dir():
            continue
        for f in sorted(d.glob("*.json")):
            try:
                out.append(read_record(f))
            except UserError as err:
                warnings.append(f"skipped: {err}")
    out.sort(key=lambda r: (r.data["time"], len(r.path.name), r.path.name))   # "x.json" before "x-2.json"
    return out, warnings
