"""Issue 38.3: a record is evidence, not an exit code. A pass needs the test's own output to show that it
ran and passed (DeepEP's case lines or figures), exit code 0, and ``passed`` agreeing with ``exit_code``;
a record says how many ranks and GPUs the test used, and a pass with fewer ranks than the spec or the
user asks for does not verify the env. Fixtures: hand-written outputs in DeepEP's formats (verify_fixtures)."""
from __future__ import annotations

import json

import pytest

from cli_runner import cli_in_process
from verify_fixtures import (NOW, proj,  # noqa: F401 (proj: the fixture)
    ARGPARSE_ERROR_OUTPUT, DEEPEP_OUTPUT, ELASTIC_EP_OUTPUT, GIN_ASSERT_OUTPUT, HELP_OUTPUT,
                             LOW_LATENCY_OUTPUT)

from deepep_env.verify.figures import parse_figures
from deepep_env.verify.records import load_records, record_test
from deepep_env.verify.verdict import counts_as_pass, judge, ranks_in_args, ranks_of

AGRS_OUTPUT = """\
Config:
 > Ranks: 8
 > Shape: (4096, 7168)
 > Max inflight AGRS: 4

Running stress tests:
 > Seed 0 passed (128 ops)
 > Seed 1 passed (128 ops)
"""


def verdict(test, code, out):
    return judge(test, code, out, parse_figures(out))


@pytest.mark.parametrize("test,code,out,passed,why", [
    ("intranode", 0, DEEPEP_OUTPUT, True, "2 of 2 case(s) passed"),
    ("low-latency", 0, LOW_LATENCY_OUTPUT, True, "dispatch + combine measured (197.8 GB/s)"),
    ("elastic-ep", 0, ELASTIC_EP_OUTPUT, True, "1 EPv2 case(s) ran to the end"),
    ("elastic-agrs", 0, AGRS_OUTPUT, True, "2 stress seed(s) passed"),
    ("elastic-ep", 0, HELP_OUTPUT, False, "--help text"),                      # `-- --help`: exit 0, no run
    ("intranode", 2, ARGPARSE_ERROR_OUTPUT, False, "argparse usage error"),
    ("intranode", 0, "", False, "no output"),
    ("low-latency", 0, "  \n\n", False, "no output"),
    ("intranode", 1, DEEPEP_OUTPUT, False, "exit code 1 (although 2 of 2 case(s) passed)"),
    ("elastic-ep", 1, GIN_ASSERT_OUTPUT, False, "exit code 1"),                 # every rank died at nccl.cu:87
    ("intranode", 0, "Allocating buffer size: 2115.1 MB ...\n", False, "none of the lines"),
    ("intranode", 0, DEEPEP_OUTPUT.replace("... passed", "... failed", 1), False, "none of the lines"),
    ("low-latency", 0, DEEPEP_OUTPUT, False, "none of the lines"),            # another test's output
    ("my-smoke", 0, "ok\n", True, "1 line(s) of output"),                       # not DeepEP's: output and exit 0
    ("my-smoke", 0, HELP_OUTPUT, False, "--help text"),
    ("my-smoke", 3, "ok\n", False, "exit code 3"),
])
def test_a_pass_is_the_output_evidence_and_exit_0(test, code, out, passed, why):
    v = verdict(test, code, out)
    assert v.passed is passed and why in v.evidence, v


@pytest.mark.parametrize("data,ok", [
    ({"test": "intranode", "exit_code": 0, "passed": True, "figures": {"cases_passed": 24, "cases_failed": 0}}, True),
    ({"test": "intranode", "exit_code": 1, "passed": True, "figures": {"cases_passed": 24, "cases_failed": 0}}, False),
    ({"test": "intranode", "exit_code": 0, "passed": False, "figures": {"cases_passed": 24, "cases_failed": 0}}, False),
    ({"test": "intranode", "exit_code": 0, "passed": True, "figures": {}}, False),          # no case line
    ({"test": "intranode", "exit_code": False, "passed": True, "figures": {"cases_passed": 1}}, False),
    ({"test": "intranode", "exit_code": 0, "passed": "yes", "figures": {"cases_passed": 1}}, False),
    ({"test": "low-latency", "exit_code": 0, "passed": True, "figures": {"ll_rank0_gbps": 376.31}}, True),
    ({"test": "my-smoke", "exit_code": 0, "passed": True}, True),
])
def test_a_record_read_back_is_judged_again(data, ok):
    assert counts_as_pass(data) is ok


def test_ranks_from_the_output_then_the_arguments_then_deepeps_default():
    assert ranks_of("elastic-ep", ["--num-processes", "8"], ELASTIC_EP_OUTPUT) == 4     # what ran, not what was asked
    assert ranks_of("elastic-agrs", [], AGRS_OUTPUT) == 8
    assert ranks_of("low-latency", [], LOW_LATENCY_OUTPUT) == 2
    assert ranks_of("intranode", ["--num-processes", "4"], DEEPEP_OUTPUT) == 4
    assert ranks_of("intranode", [], DEEPEP_OUTPUT) == 8                                  # argparse default=8
    assert ranks_of("my-smoke", [], "ok\n") is None
    assert ranks_in_args(["--num-processes=2", "--x", "--num-processes", "3"]) == 3
    for bad in (["--num-processes"], ["--num-processes", "x"], ["--num-processes", "0"], ["--num-processes=-1"]):
        assert ranks_in_args(bad) is None, bad


def test_a_real_multi_rank_log_passes_with_its_ranks(proj, host_tree, capsys):
    root = str(host_tree("h200x8-nvlink"))
    path = record_test(proj, "h200-nvlink-v2", "deepep-test-elastic-ep", ["--num-processes", "4", "--test-first-only"], 0,
                       ELASTIC_EP_OUTPUT, root=root, now=NOW)
    rec = json.loads(path.read_text())
    assert rec["passed"] is True and (rec["ranks"], rec["gpus"]) == (4, 4) and rec["host"]["gpu_count"] == 8
    assert rec["evidence"] == "1 EPv2 case(s) ran to the end" and rec["figures"]["ep_dispatch_su_gbps"] == 289
    rc, out, err = cli_in_process(capsys, "verified", "--json", "--project", proj.root)
    (cell,) = json.loads(out)["cells"]
    # the committed GPU specs ask for 2 ranks at least ([verify] ranks: a one-rank pass proves nothing)
    assert rc == 0 and cell["ranks"] == 4 and cell["status"] == "pass" and cell["ranks_required"] == 2 and cell["verified"]
    rc, out, _ = cli_in_process(capsys, "verified", "--project", proj.root)
    assert "ranks" in out and " 4/2 " in out                      # ran / the spec needs


def test_records_that_must_not_pass_do_not(proj, host_tree, capsys, tmp_path):
    root = str(host_tree("h200x8-nvlink"))
    for i, (code, out) in enumerate(((0, HELP_OUTPUT), (2, ARGPARSE_ERROR_OUTPUT), (0, ""), (1, GIN_ASSERT_OUTPUT))):
        log = tmp_path / f"{i}.log"
        log.write_text(out)
        rc, o, err = cli_in_process(capsys, "record", "h200-nvlink-v2", "--test", "elastic-ep", "--exit-code", str(code),
                                    "--log", str(log), "--root", root, "--project", proj.root, "--json")
        assert rc == 0, err
        assert json.loads(o)["passed"] is False
    # a record edited to say `passed: true` over exit 1 stays a fail wherever it is read
    path = record_test(proj, "h200-nvlink", "intranode", [], 1, DEEPEP_OUTPUT, root=root, now=NOW)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "passed": True}))
    rc, out, _ = cli_in_process(capsys, "verified", "--json", "--project", proj.root)
    assert {c["test"]: c["status"] for c in json.loads(out)["cells"]} == {"elastic-ep": "fail", "intranode": "fail"}
    assert not any(c["verified"] for c in json.loads(out)["cells"])
    from deepep_env.verify.matrix import plan_verification

    assert plan_verification(proj, "h200-nvlink")["status"] == "failing"


def test_a_one_rank_pass_does_not_verify_a_multi_gpu_claim(proj, host_tree, capsys):
    root = str(host_tree("h200x8-nvlink"))
    record_test(proj, "h200-nvlink", "low-latency", ["--num-processes", "1"], 0,
                "[rank 0] Dispatch + combine bandwidth: 376.31 GB/s, avg_t=40.10 us, min_t=39.00 us, max_t=41.20 us\n",
                root=root, now=NOW)
    rc, out, _ = cli_in_process(capsys, "verified", "--json", "--project", proj.root)
    (cell,) = json.loads(out)["cells"]
    # the committed spec asks for 2 ranks ([verify] ranks = 2): one rank is a pass that verifies nothing
    assert cell["ranks"] == 1 and cell["status"] == "pass" and cell["ranks_required"] == 2 and not cell["verified"]
    rc, out, _ = cli_in_process(capsys, "verified", "--json", "--ranks", "8", "--project", proj.root)
    (cell,) = json.loads(out)["cells"]
    assert cell["status"] == "pass" and cell["ranks_required"] == 8 and not cell["verified"]
    from deepep_env.verify.matrix import plan_verification

    assert plan_verification(proj, "h200-nvlink")["status"] == "too few ranks"
    spec = proj.spec_path("h200-nvlink")
    assert "ranks = 2" in spec.read_text()
    spec.write_text(spec.read_text().replace("ranks = 2", "ranks = 8"))   # the spec asks for a whole node
    v = plan_verification(proj, "h200-nvlink")
    assert v["status"] == "too few ranks" and v["short"][0]["ranks"] == 1 and v["ranks_required"] == 8
    rc, out, _ = cli_in_process(capsys, "verified", "--json", "--project", proj.root)
    assert json.loads(out)["cells"][0]["ranks_required"] == 8 and not json.loads(out)["cells"][0]["verified"]
    record_test(proj, "h200-nvlink", "intranode", [], 0, DEEPEP_OUTPUT, root=root, now=NOW)   # 8 ranks (default)
    assert plan_verification(proj, "h200-nvlink")["status"] == "verified"
    (rec,) = [r for r in load_records(proj)[0] if r.data["test"] == "intranode"]
    assert rec.data["ranks"] == 8


# -- issue 52.5, 52.6, 52.10 ----------------------------------------------------------------------------------

@pytest.mark.parametrize("tail", [
    "Traceback (most recent call last):\n  File \"test_intranode.py\", line 1\nRuntimeError: x\n",
    "Segmentation fault (core dumped)\n",
    "bash: line 1: 1234 Aborted (core dumped) python test_intranode.py\n",
    "terminate called after throwing an instance of 'c10::Error'\n",
    "Fatal Python error: Segmentation fault\n",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n",
    "RuntimeError: CUDA error: an illegal memory access was encountered\n",
])
def test_a_crash_line_after_the_passed_cases_is_a_fail_that_names_it(tail):
    """Issue 52.6: a launcher that swallows a rank's failure exits 0 after the passed lines."""
    for test, out in (("intranode", DEEPEP_OUTPUT), ("low-latency", LOW_LATENCY_OUTPUT), ("elastic-agrs", AGRS_OUTPUT)):
        v = verdict(test, 0, out + tail)
        assert not v.passed and "but the output has a failure line" in v.evidence, (test, v)
        assert tail.strip().splitlines()[0][:40] in v.evidence


@pytest.mark.parametrize("tail", ["", "done\n", "Testing error handling: passed\n", "[rank 0] traceback disabled\n"])
def test_neighbours_without_a_crash_line_still_pass(tail):
    assert verdict("intranode", 0, DEEPEP_OUTPUT + tail).passed


@pytest.mark.parametrize("out, ranks", [
    ("[rank 4999999] Dispatch + combine bandwidth: 1.0 GB/s\n", None),
    ("[rank 1048575] Dispatch + combine bandwidth: 1.0 GB/s\n", 1 << 20),
    (" > Ranks: 99999 x 99999\n", None),
    (" > Ranks: 1024 x 1024\n", 1 << 20),
    (" > Ranks: 0\n", None),
    (" > Ranks: 2 x 4\n", 8),
])
def test_ranks_read_from_the_output_are_bounded(out, ranks):
    """Issue 52.10: a record said 5,000,001 ranks, which `verified` then refused."""
    from deepep_env.verify.verdict import ranks_in_output

    assert ranks_in_output(out) == ranks
    assert ranks_in_args(["--num-processes", "\u00b2"]) is None and ranks_in_args(["--num-processes", "1048577"]) is None
    assert ranks_in_args(["--num-processes", "\uff18"]) == 8                 # argparse's int() reads it so


@pytest.mark.parametrize("time, ok", [
    ("2026-11-25T12:00:00Z", True), ("2026-11-25T12:00:00.5Z", True),
    ("zzzz", False), ("9999-12-31T23:59:59Z", False), ("2026-13-01T00:00:00Z", False),
    ("2026-11-25 12:00:00", False), ("2026-11-25T12:00:00+00:00", False), ("\uff12026-11-25T12:00:00Z", False),
])
def test_a_record_time_is_a_real_utc_time_not_past_tomorrow(time, ok):
    from pathlib import Path

    from deepep_env.base.errors import UserError
    from deepep_env.formats.stamps import TEST_RECORD
    from deepep_env.verify.schema import check_record

    rec = {"format": TEST_RECORD.stamp, "env": "e", "test": "intranode", "exit_code": 0, "passed": True, "host": {},
           "time": time}
    if ok:
        assert check_record(rec, Path("r.json")) is rec
    else:
        with pytest.raises(UserError, match="record field 'time'"):
            check_record(rec, Path("r.json"))


@pytest.mark.parametrize("test", ["smoke", "Intranode", "my-smoke"])
def test_plan_is_verified_only_by_deepeps_own_tests(proj, host_tree, capsys, tmp_path, test):
    """Issue 52.5: `record --test smoke` with "hello" made plan say verified."""
    from deepep_env.verify.matrix import plan_verification

    root = str(host_tree("h200x8-nvlink"))
    log = tmp_path / "hello.log"
    log.write_text("hello\n")
    rc, o, err = cli_in_process(capsys, "record", "h200-nvlink", "--test", test, "--exit-code", "0", "--log", str(log),
                                "--root", root, "--project", proj.root, "--json", "--", "--num-processes", "8")
    assert rc == 0, err
    v = plan_verification(proj, "h200-nvlink")
    assert v["status"] == "unverified" and v["other_tests"] == [test] and v["passing"] == []
    rc, out, err = cli_in_process(capsys, "plan", "h200-nvlink", "--root", root, "--project", proj.root)
    assert "verified: no passing record" in out and f"passing records of {test} beside" in out
    record_test(proj, "h200-nvlink", "intranode", ["--num-processes", "8"], 0, DEEPEP_OUTPUT, root=root, now=NOW)
    assert plan_verification(proj, "h200-nvlink")["status"] == "verified"      # the neighbour: DeepEP's own test
