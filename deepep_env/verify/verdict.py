"""What a test record proves: a pass is evidence in the test's own output, never an exit code alone.

A record passes only when the exit code is 0 *and* the output shows that the test ran and passed:
for DeepEP's tests, the lines they print when a case passes or a measurement ends (the figures of
:mod:`deepep_env.verify.figures`); for any other test, some output that is not a ``--help`` text or an
argparse error. Readers never trust ``passed`` alone: :func:`counts_as_pass` wants ``passed`` true,
``exit_code`` 0 and, for DeepEP's tests, the figures that show it (so a record edited to ``passed:
true`` with exit 1, or one without a case line, is a fail wherever it is read).

How many ranks (processes) a test used: its own output where it says so, else ``--num-processes``,
else DeepEP's default (8: the argparse default of every DeepEP test, tests/*.py at v1.2.1,
tests/legacy/ and tests/elastic/ at dd758ca).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from deepep_env.verify.schema import MAX_RANKS

DEEPEP_DEFAULT_RANKS = 8
# test name (a record's ``test``) → what in the figures shows that it ran and passed, in words.
Rule = Callable[[dict[str, Any]], Optional[str]]


def _cases(f: dict[str, Any]) -> Optional[str]:
    ok, bad = f.get("cases_passed", 0), f.get("cases_failed", 0)
    return f"{ok} of {ok + bad} case(s) passed" if ok and not bad else None


def _low_latency(f: dict[str, Any]) -> Optional[str]:
    v = f.get("ll_rank0_gbps", f.get("ll_min_rank_gbps"))
    return f"dispatch + combine measured ({v:g} GB/s)" if v else None


def _elastic_ep(f: dict[str, Any]) -> Optional[str]:
    n = f.get("ep_cases_run", 0)
    return f"{n} EPv2 case(s) ran to the end" if n else None


def _agrs(f: dict[str, Any]) -> Optional[str]:
    n = f.get("agrs_seeds_passed", 0)
    return f"{n} stress seed(s) passed" if n else None


EVIDENCE: dict[str, Rule] = {
    "intranode": _cases,            # "[testing] Running with … passed" per case (test_intranode.py)
    "internode": _cases,            # the same lines in test_internode.py
    "low-latency": _low_latency,    # "[rank 0] Dispatch + combine bandwidth: …" (test_low_latency.py)
    "elastic-ep": _elastic_ep,      # " > Testing with …" per case, asserts in between (tests/elastic/test_ep.py)
    "elastic-agrs": _agrs,          # " > Seed N passed (128 ops)" (tests/elastic/test_agrs.py)
}

# lines a crashed rank leaves in a DeepEP test's output, wherever they are (a pass needs none of them)
_CRASH = re.compile(r"^.*(?:Traceback \(most recent call last\)|Segmentation fault|core dumped|Fatal Python error"
                    r"|terminate called after throwing|ChildFailedError|CUDA error: ).*$", re.M)
_USAGE = re.compile(r"^usage: \S", re.M)
_ARGPARSE = re.compile(r"^\S+: error: |show this help message and exit", re.M)


@dataclass(frozen=True)
class Verdict:
    passed: bool
    evidence: str        # what in the output showed the pass, or why it is not one


def judge(test: str, exit_code: int, output: str, figures: dict[str, Any]) -> Verdict:
    """The verdict on one finished run of ``test`` (a record's short name) from its own output."""
    if not output.strip():
        return Verdict(False, "no output: nothing shows that the test ran")
    if _USAGE.search(output) and _ARGPARSE.search(output):
        return Verdict(False, "the output is a --help text or an argparse usage error, not a test run")
    rule = EVIDENCE.get(test)
    shown = rule(figures) if rule else None
    if exit_code != 0:
        return Verdict(False, f"exit code {exit_code}" + (f" (although {shown})" if shown else ""))
    if rule is None:
        return Verdict(True, f"exit code 0 and {len(output.splitlines())} line(s) of output ({test} is not one of "
                             "DeepEP's tests: no case line or figure to look for)")
    if shown is None:
        return Verdict(False, f"exit code 0, but none of the lines DeepEP's {test} test prints when it passes")
    crash = _CRASH.search(output)
    if crash:   # a launcher that swallows a rank's failure still exits 0 (issue 52.6)
        return Verdict(False, f"exit code 0 and {shown}, but the output has a failure line: {crash.group(0).strip()[:120]!r}")
    return Verdict(True, shown)


def verifies(test: str) -> bool:
    """Whether a passing record of ``test`` may verify an env: DeepEP's own tests only (the ones with an
    evidence rule); a record of any other name is shown beside, never as the proof (issue 52.5)."""
    return test in EVIDENCE


def counts_as_pass(data: dict[str, Any]) -> bool:
    """Whether a record read back shows a pass: ``passed`` true, ``exit_code`` 0, and for DeepEP's tests
    the figures that show it — ``passed`` is never trusted alone."""
    if data.get("passed") is not True or data.get("exit_code") != 0 or isinstance(data.get("exit_code"), bool):
        return False
    rule = EVIDENCE.get(str(data.get("test")))
    return rule is None or rule(data.get("figures") or {}) is not None


# -- ranks -----------------------------------------------------------------------------------------------
_LOG_RANKS = (
    re.compile(r"^\s*[*#@+-] EP:\s*\d+/\s*(\d+) \|", re.M),        # tests/elastic/test_ep.py, per rank
    re.compile(r"^\s*> Rank:\s*\d+/\s*(\d+) \|", re.M),            # tests/elastic/test_agrs.py
    re.compile(r"^\s*> Ranks: (\d+)(?: x (\d+))?\s*$", re.M),      # both elastic tests' Config block
)
_LL_RANK = re.compile(r"^\[rank (\d+)\] (?:Dispatch|Dispatch \+ combine) bandwidth", re.M)


def ranks_in_output(output: str) -> Optional[int]:
    """The ranks the test itself says it ran with, when it says so."""
    for pat in _LOG_RANKS:
        m = pat.search(output)
        if m:
            return _bounded(math.prod(int(g) for g in m.groups() if g))
    ll = {int(r) for r in _LL_RANK.findall(output)}
    return _bounded(max(ll) + 1) if ll else None


def _bounded(n: int) -> Optional[int]:
    """``n`` ranks when it is a number of processes a record may hold (1 to 2**20), else None: a printed
    ``[rank 5000000]`` or ``Ranks: 99999 x 99999`` says nothing true (issue 52.10)."""
    return n if 1 <= n <= MAX_RANKS else None


def ranks_in_args(args: Sequence[str]) -> Optional[int]:
    """``--num-processes N`` (or ``=N``) among the test's arguments; the last one wins, as in argparse."""
    found: Optional[int] = None
    for i, a in enumerate(args):
        value = a.split("=", 1)[1] if a.startswith("--num-processes=") else \
            (args[i + 1] if a == "--num-processes" and i + 1 < len(args) else None)
        if value is None:
            continue
        try:            # as argparse's type=int reads it (``８`` is 8); ``²`` passed isdigit() and crashed int()
            n = int(value)
        except ValueError:
            continue
        if 0 < n <= MAX_RANKS:
            found = n
    return found


def ranks_of(test: str, args: Sequence[str], output: str) -> Optional[int]:
    """How many ranks (processes) the run used: its output, else its arguments, else DeepEP's default
    for DeepEP's tests; None when nothing says."""
    return ranks_in_output(output) or ranks_in_args(args) or (DEEPEP_DEFAULT_RANKS if test in EVIDENCE else None)
