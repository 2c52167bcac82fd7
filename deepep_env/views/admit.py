"""``deepep-env admit ENV``: is this node fit for an expert-parallel job? (issue 55, docs/admit.md)

Two ways in. :func:`admit_log` judges a captured run (``--test T --log FILE``: a scheduler's job, a
test on CPU). :func:`admit_node` runs on the node: doctor first (an error stops it), then a short
run of each engine test through the path ``deepep-env task`` uses (installed, activated,
:func:`~deepep_env.views.tasks.run_test_captured`) under a hard timeout, up to ``attempts`` times
(bandwidth flutters). Both compare each figure of each rank with the floors of the env's passing
records (:mod:`deepep_env.verify.floors`, :mod:`deepep_env.verify.admission`) and return an
admission record, written beside the records unless told not to.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Sequence

from deepep_env.base.errors import UserError
from deepep_env.base.project import pixi_env_name
from deepep_env.envspec.load import load_spec_file
from deepep_env.envspec.model import AdmitSpec, EnvSpec
from deepep_env.host.context import read_host
from deepep_env.verify.admission import TestAdmission, admission_record, judge_run, write_admission
from deepep_env.verify.figures import parse_figures, parse_rank_figures
from deepep_env.verify.fingerprint import host_fingerprint
from deepep_env.verify.floors import Floor, Scope, expected_ranks, floors_for, gpu_model
from deepep_env.verify.records import check_inputs, load_records, lock_identity, short_test
from deepep_env.verify.verdict import judge, ranks_in_args, ranks_in_output
from deepep_env.lock.pixi_model import load_manifest
from deepep_env.views.tasks import TIMED_OUT, list_tasks, plan_task, run_test_captured

if TYPE_CHECKING:  # annotations only
    from deepep_env.base.project import Project

ENGINE_TESTS = ("intranode", "low-latency", "elastic-ep")   # the tests with per-rank figures to judge
DEFAULT_TIMEOUT = 300.0
DEFAULT_ATTEMPTS = 3


@dataclass(frozen=True)
class Node:
    """The project, env and host an admission is about."""

    project: Project
    env: str
    spec: EnvSpec
    host: dict[str, Any]
    identity: dict[str, Any]

    @property
    def admit(self) -> AdmitSpec:
        return self.spec.admit


def read_node(project: Project, env: str, root: str, platform: Optional[str]) -> Node:
    check_inputs(project, env, "intranode", 0)     # an env of the project (one line otherwise)
    spec = load_spec_file(project.spec_path(env))
    host = host_fingerprint(read_host(root, platform, {}))
    return Node(project, env, spec, host, lock_identity(project, env))


def floors_of(node: Node, test: str, ranks: int) -> tuple[dict[str, Floor], list[str]]:
    """The floors for ``test`` on ``ranks`` ranks and the records behind them; with none, the one-line
    refusal that says what would make one."""
    scope = Scope(node.env, test, node.identity.get("digest"), str(node.host.get("platform")),
                  gpu_model(node.host), ranks)
    records, _ = load_records(node.project, node.env)
    matched = [r for r in records if scope.matches(r)]
    floors = floors_for(matched, ratio=node.admit.ratio, absolutes=node.admit.floors,
                        spec_file=f"env_specs/{node.env}.toml")
    if not floors:
        lock_env = node.identity.get("lock_env") or pixi_env_name(node.env)
        raise UserError(f"no floor for {scope.describe()}: no passing record of it in verified/{node.env}/ and no "
                        f"[admit] floors in env_specs/{node.env}.toml; make one on a known-good node with `deepep-env "
                        f"task deepep-test-{test} -e {lock_env} -- --num-processes {ranks}` (or `deepep-env record` of "
                        f"such a run), or set [admit] floors", field="--test", exit_code=3)
    return floors, [str(r.path.relative_to(node.project.root)) for r in matched]


def judge_output(node: Node, test: str, output: str, ranks: int, floors: dict[str, Floor], records: list[str], *,
                 exit_code: int = 0, timed_out: Optional[float] = None) -> TestAdmission:
    """One run's verdict: its own evidence (:func:`~deepep_env.verify.verdict.judge`) and each rank's figures
    against the floors."""
    verdict = judge(test, exit_code, output, parse_figures(output))
    figures = parse_rank_figures(output)
    stopped = f"timed out after {timed_out:g} s: a hang" if timed_out else "the run stopped before it: a hang or a crash"
    refusals = judge_run(test, figures, floors, ranks, rank_ratio=node.admit.rank_ratio, stopped=stopped)
    lines = [r.line() for r in refusals]
    if timed_out:
        silent = [r for r in expected_ranks(test, ranks) if not any(f in figures.get(r, {}) for f in floors)]
        lines.insert(0, f"timed out after {timed_out:g} s (a hang): rank(s) {', '.join(silent)} printed no figure" if silent
                     else f"timed out after {timed_out:g} s: every rank printed its figures, the run did not end")
    elif not verdict.passed:
        lines.insert(0, f"the run did not pass: {verdict.evidence}")
    admitted = verdict.passed and not refusals and not timed_out
    return TestAdmission(test, ranks, admitted, lines, figures, floors, records, evidence=verdict.evidence,
                         refusals=refusals)


def _ranks(given: Optional[int], args: Sequence[str], output: str, test: str) -> int:
    """The run's ranks: as given, else ``--num-processes`` among its arguments, else what its own output
    says (a run that stopped may not say it all), else DeepEP's default (8)."""
    return given or ranks_in_args(args) or ranks_in_output(output) or 8


def admit_log(project: Project, env: str, test: str, output: str, args: Sequence[str], *, root: str,
              platform: Optional[str] = None, ranks: Optional[int] = None, exit_code: int = 0,
              source: str = "log", valid_hours: float = 24.0, write: bool = True) -> dict[str, Any]:
    """The admission record of one captured run of ``test``."""
    name = short_test(test)
    check_inputs(project, env, name, exit_code)
    node = read_node(project, env, root, platform)
    n = _ranks(ranks, args, output, name)
    floors, records = floors_of(node, name, n)
    result = judge_output(node, name, output, n, floors, records, exit_code=exit_code)
    return _finish(node, [result], source, valid_hours, write)


def _finish(node: Node, results: list[TestAdmission], source: str, valid_hours: float, write: bool) -> dict[str, Any]:
    rec = admission_record(node.env, node.identity, node.host, results, source=source, valid_hours=valid_hours)
    if write:
        rec["path"] = str(write_admission(node.project, rec))
    return rec


def default_tests(project: Project, env: str) -> list[str]:
    """The env's engine tests: the ``deepep-test-*`` tasks pixi.toml has for it, of :data:`ENGINE_TESTS`."""
    tasks = list_tasks(load_manifest(project.pixi_toml)).get(pixi_env_name(env), [])
    return [t for t in ENGINE_TESTS if f"deepep-test-{t}" in tasks]


def _doctor_first(node: Node, root: str, platform: Optional[str]) -> None:
    from deepep_env.doctor.run import run_doctor   # lazy: import cost; the doctor's checks load only on a node run

    report = run_doctor(node.env, root=root, platform=platform, project=node.project)
    errors = report.errors
    if errors:
        raise UserError(f"doctor found {len(errors)} error(s) ({', '.join(f.id for f in errors)}): not admitted; "
                        f"`deepep-env doctor {node.env}` says what and how to fix it", field="ENV", exit_code=2)


def admit_node(project: Project, env: str, tests: Sequence[str], *, root: str = "/", platform: Optional[str] = None,
               ranks: Optional[int] = None, args: Sequence[str] = (), timeout: float = DEFAULT_TIMEOUT,
               attempts: int = DEFAULT_ATTEMPTS, valid_hours: float = 24.0, write: bool = True,
               install: bool = True, doctor: bool = True) -> dict[str, Any]:
    """Doctor, then each test run on this node and judged, up to ``attempts`` times each."""
    node = read_node(project, env, root, platform)
    names = [short_test(t) for t in tests] or default_tests(project, env)
    if not names:
        raise UserError(f"{env} has no engine test task in pixi.toml", field="--tests", accepted=", ".join(ENGINE_TESTS))
    n = ranks or ranks_in_args(args) or node.spec.verify.ranks or int(node.host.get("gpu_count") or 0) or 8
    planned = {t: floors_of(node, t, n) for t in names}     # every refusal for want of a floor before any run
    if doctor:
        _doctor_first(node, root, platform)
    results = [_attempts(node, t, n, planned[t], args, timeout, attempts, install) for t in names]
    return _finish(node, results, "run", valid_hours, write)


def _attempts(node: Node, test: str, ranks: int, planned: tuple[dict[str, Floor], list[str]], args: Sequence[str],
              timeout: float, attempts: int, install: bool) -> TestAdmission:
    floors, records = planned
    given = [] if ranks_in_args(args) else ["--num-processes", str(ranks)]
    plan = plan_task(node.project, f"deepep-test-{test}", environment=pixi_env_name(node.env), args=[*given, *args])
    result: Optional[TestAdmission] = None
    for i in range(1, attempts + 1):
        rc, output = run_test_captured(node.project, plan, timeout=timeout, install=install and i == 1)
        result = judge_output(node, test, output, ranks, floors, records, exit_code=rc,
                              timed_out=timeout if rc == TIMED_OUT else None)
        result.attempts = i
        verdict = "admitted" if result.admitted else "refused: " + "; ".join(result.lines[:3])
        print(f"deepep-env admit: {test} attempt {i}/{attempts}: {verdict}", file=sys.stderr, flush=True)
        if result.admitted:
            break
    assert result is not None
    return result


def render_text(rec: dict[str, Any]) -> str:
    """One line per test, then one per refusal; the last line the decision."""
    out = []
    for t in rec["tests"]:
        n = len(t["records"])
        src = f"{n} record(s)" if n else "the spec's [admit] floors"
        out.append(f"{t['test']}: {'admitted' if t['admitted'] else 'REFUSED'} ({t['ranks']} rank(s), "
                   f"{len(t['floors'])} floor(s) from {src}, attempt(s) {t['attempts']})")
        out += [f"  {line}" for line in t["lines"]]
    verdict = "ADMITTED" if rec["admitted"] else "REFUSED"
    out.append(f"{rec['env']} on {rec['host'].get('node') or 'this node'}: {verdict}, valid until {rec['valid_until']}"
               + (f"; record {rec['path']}" if rec.get("path") else ""))
    return "\n".join(out) + "\n"
