"""``deepep-env prove ENV...``: install each env from its lock (``--reinstall``: again, from nothing but
the lock; ``--relock``: build and lock it here first), compare every installed package with the lock's
sha256, run the engine's tests on the host's GPUs through the code ``deepep-env task`` runs (so each
writes its test record), and return one row per env × test (issue 53).

A run keeps everything it writes in its own folder under the state folder, ``<state>/prove/<run>/``:
``progress.log`` (one line a step, as it happens), one log per test, and ``result.json`` once it is
over. Nothing is in the caller's working folder, so a second call can follow a run that is still
going (:func:`follow`), and a command that laid the checkout down again does not cut it off.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys

import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Sequence, TextIO

from deepep_env.base.atomic import write_text
from deepep_env.base.errors import UserError
from deepep_env.base.project import pixi_env_name
from deepep_env.builder.build import build_env
from deepep_env.envspec import load_resolved
from deepep_env.formats.installed import installed_records
from deepep_env.formats.lockfile import read_lock
from deepep_env.formats.prefix import pid_alive
from deepep_env.host.context import read_host
from deepep_env.install.carry import install_from_carry, unpack_carry
from deepep_env.install.installer import install_env
from deepep_env.lock.pixi_model import load_manifest
from deepep_env.lock.pixi import sync as sync_pixi
from deepep_env.lock.solve import lock_env
from deepep_env.verify.fingerprint import host_fingerprint
from deepep_env.verify.records import host_root, load_records
from deepep_env.views.tasks import RECORDED_PREFIX, list_tasks, plan_task, run_task

if TYPE_CHECKING:  # annotations only: no import at run time
    from deepep_env.base.project import Project

MODES = ("lock", "reinstall", "relock")
# The tests prove runs: one node's (internode needs several), DeepEP 2.x's EPv2 test on its first case
# (the all-gather/reduce-scatter test is run by hand: `deepep-env task deepep-test-elastic-agrs`).
TESTS = ("deepep-test-intranode", "deepep-test-low-latency", "deepep-test-elastic-ep")
EXTRA_ARGS: dict[str, tuple[str, ...]] = {"deepep-test-elastic-ep": ("--test-first-only",)}
RESULT = "result.json"
PROGRESS = "progress.log"


@dataclass
class TestRow:
    test: str
    result: str                 # "pass" | "fail"
    exit_code: int
    evidence: str = ""
    ranks: Optional[int] = None
    figures: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    log: str = ""               # relative to the run folder
    record: str = ""            # relative to the project


@dataclass
class EnvRow:
    env: str
    bytes: str = "-"            # "same N/N" | "differ: ..." | "refused: ..."
    same: bool = False
    tests: list[TestRow] = field(default_factory=list)
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.same and not self.error and bool(self.tests) and all(t.result == "pass" for t in self.tests)


@dataclass
class ProveResult:
    run: str
    mode: str
    ranks: int
    envs: list[EnvRow] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.envs) and all(e.ok for e in self.envs)

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "mode": self.mode, "ranks": self.ranks, "ok": self.ok,
                "envs": [{**asdict(e), "ok": e.ok} for e in self.envs]}


# --- the run folder ----------------------------------------------------------------------------

def runs_dir(project: Project) -> Path:
    return Path(project.state) / "prove"


def new_run(project: Project) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    d = runs_dir(project) / f"{stamp}-{os.getpid()}"
    d.mkdir(parents=True, exist_ok=False)
    return d


def latest_run(project: Project) -> Path:
    runs = sorted(p for p in runs_dir(project).glob("*") if p.is_dir()) if runs_dir(project).is_dir() else []
    if not runs:
        raise UserError(f"no prove run to follow in {runs_dir(project)}", field="--follow",
                        accepted="`deepep-env prove ENV...` first (its run folder is under the state folder)")
    return runs[-1]


class Progress:
    """Lines to ``progress.log`` (flushed each, for a follower) and to ``echo``."""

    def __init__(self, run: Path, echo: Optional[TextIO]) -> None:
        self.path = run / PROGRESS
        self.echo = echo

    def __call__(self, line: str) -> None:
        text = f"{datetime.now(timezone.utc).strftime('%H:%M:%S')} {line}\n"
        with open(self.path, "a") as fh:
            fh.write(text)
        if self.echo is not None:
            self.echo.write(text)
            self.echo.flush()


# --- proving -----------------------------------------------------------------------------------

def gpu_count(environ: Optional[dict[str, str]] = None) -> int:
    """The GPUs of the host a record describes (``$DEEPEP_ENV_HOST_ROOT``, else this machine)."""
    env = dict(os.environ if environ is None else environ)
    fp = host_fingerprint(read_host(host_root(env), env.get("DEEPEP_ENV_PLATFORM") or None, {}))
    return int(fp.get("gpu_count") or 0)


def ranks_for(project: Project, env: str, ranks: str, gpus: int) -> int:
    """``--ranks all`` (every GPU of the host) or a number; the spec's ``[verify] ranks`` is the least."""
    if ranks == "all":
        if gpus < 1:
            raise UserError("--ranks all: the host shows no GPU", field="--ranks",
                            accepted="a host with GPUs (or DEEPEP_ENV_HOST_ROOT of one), or --ranks N")
        n = gpus
    elif ranks.isdigit() and int(ranks) >= 1:
        n = int(ranks)
    else:
        raise UserError(f"not a rank count: {ranks!r}", field="--ranks", accepted="all, or a number from 1")
    least = load_resolved(env, project).verify.ranks
    if least and n < least:
        raise UserError(f"{env}: its spec's [verify] ranks is {least}, more than the {n} asked for", field="--ranks",
                        accepted=f"--ranks all on a host with {least} GPUs, or --ranks {least}")
    return n


def compare_bytes(project: Project, env: str, prefix: Path) -> tuple[bool, str]:
    """Every installed package against the lock's sha256: (all the same, the cell)."""
    le = read_lock(project.pixi_lock).env(pixi_env_name(env))
    locked = {q.name: q.sha256 for ps in (le.packages.values() if le else ()) for q in ps}
    have = {str(x.name.normalized): (x.sha256.hex() if x.sha256 else None) for x in installed_records(prefix)}
    differ = sorted(n for n in set(locked) | set(have) if locked.get(n) != have.get(n))
    if differ:
        return False, f"differ: {', '.join(differ)}"
    return True, f"same {len(locked)}/{len(locked)}"


def env_tests(project: Project, env: str, only: Sequence[str] = ()) -> list[str]:
    """The env's test tasks in pixi.toml that prove runs (``only``: those named)."""
    have = set(list_tasks(load_manifest(project.pixi_toml)).get(pixi_env_name(env), ()))
    want = [t if t.startswith(RECORDED_PREFIX) else RECORDED_PREFIX + t for t in only] or list(TESTS)
    return [t for t in want if t in have]


@contextlib.contextmanager
def _to_log(path: Path) -> Iterator[None]:
    """The test's output (stdout and stderr, as the task tees it) into its log, not the table's stream."""
    with open(path, "w") as fh, contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
        yield


def _newest_record(project: Project, env: str, before: set[Path]) -> Optional[dict[str, Any]]:
    recs, _ = load_records(project, env)
    new = [r for r in recs if r.path not in before]
    return {**new[-1].data, "_path": str(new[-1].path.relative_to(project.root))} if new else None


def run_test(project: Project, env: str, task: str, ranks: int, run: Path, signer: Optional[Any] = None) -> TestRow:
    args = ["--num-processes", str(ranks), *EXTRA_ARGS.get(task, ())]
    plan = plan_task(project, task, environment=pixi_env_name(env), args=args)
    before = {r.path for r in load_records(project, env)[0]}
    log = run / env / f"{task.removeprefix(RECORDED_PREFIX)}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with _to_log(log):
        rc = run_task(project, plan, install=False, record=True, signer=signer)
    rec = _newest_record(project, env, before) or {}
    if rec.get("_path"):   # the record beside the run too: a checkout laid down again loses verified/
        copy = run / "records" / env / Path(rec["_path"]).name
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(project.root / rec["_path"], copy)
    passed = rc == 0 and bool(rec.get("passed"))
    return TestRow(test=task.removeprefix(RECORDED_PREFIX), result="pass" if passed else "fail", exit_code=rc,
                   evidence=str(rec.get("evidence") or "no record written"), ranks=rec.get("ranks"),
                   figures=dict(rec.get("figures") or {}), seconds=round(time.monotonic() - t0, 1),
                   log=str(log.relative_to(run)), record=str(rec.get("_path") or ""))


def install_step(project: Project, env: str, *, mode: str, say: Callable[[str], None], offline: bool = False,
                 carry: Optional[Path] = None) -> EnvRow:
    """Phase one for ENV, in this process: (relock: build and lock,) install, and compare the bytes."""
    row = EnvRow(env)
    try:
        if mode == "relock":
            say(f"{env}: build")
            build_env(env, project, offline=offline)
            say(f"{env}: lock")
            lock_env(env, project)
            say(f"{env}: pixi.toml in step (the env's test tasks)")
            sync_pixi(project)   # an env locked here for the first time has no tasks there yet
        say(_install_line(env, mode, carry))
        if carry is not None:
            up, res = install_from_carry(env, project, carry, force=mode != "lock")
            if up.rdma_core and not os.environ.get("DEEPEP_ENV_RDMA_CORE"):
                os.environ["DEEPEP_ENV_RDMA_CORE"] = str(up.rdma_core)   # for a rebuild: the carried headers
                say(f"{env}: DEEPEP_ENV_RDMA_CORE={up.rdma_core} (the carry's rdma-core headers; the path is in each "
                    "rebuilt package's rendered recipe, not in its id: a lock built with another path gives other bytes "
                    "here, so set DEEPEP_ENV_RDMA_CORE to the lock's path, e.g. the debs unpacked at /tmp/deepep-rdma)")
        else:
            res = install_env(env, project, force=mode != "lock")
        row.same, row.bytes = compare_bytes(project, env, res.prefix)
        say(f"{env}: {row.bytes} (sha256 against the lock)")
    except UserError as exc:
        row.bytes, row.error = "refused", str(exc)
        say(f"{env}: refused: {exc}")
    return row


def _install_line(env: str, mode: str, carry: Optional[Path]) -> str:
    return (f"{env}: install from the lock" + (" (again, from nothing but the lock)" if mode != "lock" else "")
            + (f", packages from {carry}" if carry else ""))


def install_cmd(project: Project, env: str, mode: str, carry: Optional[Path]) -> list[str]:
    """``deepep-env install ENV`` as phase one runs it in a child process (``--jobs``)."""
    return [sys.executable, "-m", "deepep_env.cli.main", "install", env, "--project", str(project.root),
            *(["--force"] if mode != "lock" else []), *(["--from-carry", str(carry)] if carry else [])]


def install_children(envs: Sequence[str], project: Project, *, mode: str, run: Path, jobs: int,
                     say: Callable[[str], None], carry: Optional[Path] = None) -> dict[str, EnvRow]:
    """Phase one for every env, ``jobs`` at a time, each ``deepep-env install`` a child process with its
    own build-package cache (rattler-build reads one per process) and its log in the run folder; builds
    of one id take turns on the store's lock. Then each prefix's bytes against the lock, here."""
    if carry is not None:   # once, before the children: they find every tree in the source cache
        say(f"unpack {carry}")
        unpack_carry(carry, project)
    pending = list(envs)
    running: dict[str, subprocess.Popen[bytes]] = {}
    rows: dict[str, EnvRow] = {}
    while pending or running:
        while pending and len(running) < jobs:
            env = pending.pop(0)
            log = run / env / "install.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            child_env = {**os.environ, "DEEPEP_ENV_BUILD_PKGS_DIR": str(run / "build-pkgs" / env)}
            say(_install_line(env, mode, carry) + f" (child process; log {log.relative_to(run)})")
            with open(log, "wb") as fh:
                running[env] = subprocess.Popen(install_cmd(project, env, mode, carry), stdin=subprocess.DEVNULL,
                                                stdout=fh, stderr=subprocess.STDOUT, env=child_env)
        time.sleep(0.5)
        for env, proc in list(running.items()):
            if proc.poll() is None:
                continue
            del running[env]
            rows[env] = _installed_row(project, env, proc.returncode, run / env / "install.log", say)
    shutil.rmtree(run / "build-pkgs", ignore_errors=True)
    return rows


def _installed_row(project: Project, env: str, rc: int, log: Path, say: Callable[[str], None]) -> EnvRow:
    row = EnvRow(env)
    if rc != 0:
        tail = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-1:] or ["(no output)"]
        row.bytes, row.error = "refused", f"install exited {rc}: {tail[0]}"
        say(f"{env}: refused: {row.error}")
        return row
    row.same, row.bytes = compare_bytes(project, env, project.prefix_for(env))
    say(f"{env}: {row.bytes} (sha256 against the lock)")
    return row


def test_step(project: Project, row: EnvRow, *, ranks: int, run: Path, say: Callable[[str], None],
              tests: Sequence[str] = (), signer: Optional[Any] = None) -> EnvRow:
    """Phase two for one env whose bytes are the lock's: each test on ``ranks`` GPUs, in turn."""
    if not row.same:
        return row
    names = env_tests(project, row.env, tests)
    if not names:
        row.error = "no test task in pixi.toml for it (`deepep-env pixi sync`)"
    for task in names:
        say(f"{row.env}: {task} on {ranks} rank(s)")
        t = run_test(project, row.env, task, ranks, run, signer)
        say(f"{row.env}: {t.test}: {t.result} ({t.evidence}; {t.seconds} s; log {t.log})")
        row.tests.append(t)
    return row


def prove_env(project: Project, env: str, *, mode: str, ranks: int, run: Path, say: Callable[[str], None],
              tests: Sequence[str] = (), offline: bool = False, carry: Optional[Path] = None,
              signer: Optional[Any] = None) -> EnvRow:
    row = install_step(project, env, mode=mode, say=say, offline=offline, carry=carry)
    return test_step(project, row, ranks=ranks, run=run, say=say, tests=tests, signer=signer)


def check_request(envs: Sequence[str], project: Project, mode: str, ranks: str) -> tuple[int, dict[str, int]]:
    """Every refusal before any work: (the host's GPU count, env → rank count)."""
    if mode not in MODES:
        raise UserError(f"not a prove mode: {mode!r}", field="mode", accepted=", ".join(MODES))
    if not envs:
        raise UserError("name at least one environment to prove", field="ENV", accepted=", ".join(project.spec_names()))
    unknown = [e for e in envs if e not in project.spec_names()]
    if unknown:
        raise UserError(f"unknown env {unknown[0]!r}", field="ENV", accepted=", ".join(project.spec_names()))
    gpus = gpu_count()
    return gpus, {e: ranks_for(project, e, ranks, gpus) for e in envs}


def prove(envs: Sequence[str], project: Project, *, mode: str = "lock", ranks: str = "all",
          tests: Sequence[str] = (), echo: Optional[TextIO] = None, run: Optional[Path] = None,
          offline: bool = False, carry: Optional[Path] = None, signer: Optional[Any] = None,
          jobs: int = 1) -> ProveResult:
    """``deepep-env prove``: every env in turn; the result is also written to ``<run>/result.json``.
    ``signer``: each test record is signed with it (verify/attest.py), as ``task --sign`` does.
    ``jobs`` > 1 (not with relock): every env is installed first, that many at a time in child processes
    (the builds are the long part), then the tests run env by env (they need the GPUs to themselves)."""
    try:
        gpus, counts = check_request(envs, project, mode, ranks)
    except UserError as exc:
        if run is not None:   # a detached run: its follower reads the refusal
            write_text(run / RESULT, json.dumps({"run": str(run), "ok": False, "error": str(exc), "envs": []}) + "\n")
        raise
    run = run or new_run(project)
    say = Progress(run, echo)
    say(f"prove {' '.join(envs)} ({mode}; {gpus} GPU(s) on the host; run {run})")
    result = ProveResult(run=str(run), mode=mode, ranks=max(counts.values()))
    try:
        if jobs > 1 and mode != "relock":
            rows = install_children(envs, project, mode=mode, run=run, jobs=jobs, say=say, carry=carry)
            for env in envs:
                result.envs.append(test_step(project, rows[env], ranks=counts[env], run=run, say=say, tests=tests,
                                             signer=signer))
        else:
            for env in envs:
                result.envs.append(prove_env(project, env, mode=mode, ranks=counts[env], run=run, say=say,
                                             tests=tests, offline=offline, carry=carry, signer=signer))
    finally:
        write_text(run / RESULT, json.dumps(result.to_dict(), indent=1) + "\n")
        say(f"done: {'ok' if result.ok else 'NOT ok'}")
    return result


def detach(argv: Sequence[str], project: Project, *, envs: Sequence[str], mode: str, ranks: str) -> Path:
    """Start ``deepep-env prove ARGV`` as its own session (it outlives this command and the terminal) in
    a new run folder; its console output goes to ``console.log`` there. Returns the run folder."""
    check_request(envs, project, mode, ranks)
    run = new_run(project)
    cmd = [sys.executable, "-m", "deepep_env.cli.main", "prove", *argv, "--run-dir", str(run),
           "--project", str(project.root)]
    with open(run / "console.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=run,
                                start_new_session=True)
    (run / "pid").write_text(f"{proc.pid}\n")
    return run


KEY_FIGURES = ("dispatch_bf16_gbps", "combine_bf16_gbps", "ll_min_rank_gbps", "ep_dispatch_su_gbps",
               "ep_combine_su_gbps", "cases_passed", "ep_cases_run")


def key_figures(figures: dict[str, Any], limit: int = 3) -> str:
    keys = [k for k in KEY_FIGURES if k in figures] or sorted(figures)
    return ", ".join(f"{k}={figures[k]:g}" if isinstance(figures[k], (int, float)) else f"{k}={figures[k]}"
                     for k in keys[:limit])


def table(result: dict[str, Any]) -> list[str]:
    """One line per env × test: env, test, bytes, result, ranks, key figures."""
    rows = [("env", "test", "bytes", "result", "ranks", "figures")]
    if result.get("error"):
        rows.append(("-", "-", "-", "FAIL", "-", str(result["error"])[:160]))
    for e in result["envs"]:
        if not e["tests"]:
            rows.append((e["env"], "-", e["bytes"], "FAIL" if not e["ok"] else "pass", "-", e["error"][:120]))
        for t in e["tests"]:
            rows.append((e["env"], t["test"], e["bytes"], t["result"], str(t["ranks"] or "?"),
                         key_figures(t["figures"]) or t["evidence"][:80]))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return ["  ".join(c.ljust(w) for c, w in zip(r[:5], widths)) + "  " + r[5] for r in rows]


def _gone(run: Path) -> bool:
    """A detached run whose process is no longer there (a run in this process has no pid file)."""
    try:
        pid = int((run / "pid").read_text())
    except (OSError, ValueError):
        return False
    if not pid_alive(pid):
        return True
    with contextlib.suppress(ChildProcessError, OSError):   # our own child, finished: reap it
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    return False


def follow(run: Path, out: TextIO, *, poll_s: float = 0.5, timeout_s: Optional[float] = None) -> dict[str, Any]:
    """Print ``run``'s progress from its start as it grows, until its result is written; the result."""
    pos = 0
    t0 = time.monotonic()
    while True:
        done = (run / RESULT).is_file()
        log = run / PROGRESS
        if log.is_file():
            with open(log) as fh:
                fh.seek(pos)
                chunk = fh.read()
                pos = fh.tell()
            out.write(chunk)
            out.flush()
        if done:
            return dict(json.loads((run / RESULT).read_text()))
        if _gone(run) and not (run / RESULT).is_file():
            raise UserError(f"the run in {run} stopped without a result", file=run / "console.log",
                            accepted="its console.log says why; start it again")
        if timeout_s is not None and time.monotonic() - t0 > timeout_s:
            raise UserError(f"the run in {run} is still going after {timeout_s:g} s of following", field="--follow",
                            accepted="`deepep-env prove --follow` again later", exit_code=3)
        time.sleep(poll_s)


__all__ = ["EnvRow", "ProveResult", "TestRow", "detach", "follow", "latest_run", "prove", "table"]

