"""EP admission (issue 55): a run's DeepEP figures, per rank and phase, against the floors of the
env's passing records — on a captured H200 host, with records written by `deepep-env record`."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from cli_runner import cli_in_process
from verify_fixtures import proj  # noqa: F401 (proj: the fixture)

from deepep_env.base.errors import UserError
from deepep_env.verify.figures import parse_rank_figures
from deepep_env.verify.records import load_records, read_record

HOST = "h200x8-nvlink"     # the captured 8 x H200 NVLink host


def intranode_log(gbps: float = 1.0, us: float = 1.0, stop_after_cases: bool = False) -> str:
    """test_intranode.py on 2 ranks (only local rank 0 prints), figures of the 2 x H200 records."""
    cases = ("[config] num_tokens=4096, hidden=7168, num_topk=8\n"
             "[testing] Running with BF16, without top-k (async=False, previous=False) ... passed\n"
             "[testing] Running with FP8, with top-k (async=True, previous=False) ... passed\n")
    if stop_after_cases:
        return cases
    return cases + (
        f"[tuning] SMs 24, NVL chunk 4: {150 * gbps:.2f} GB/s (NVL), avg_t: {600 * us:.2f} us\n"
        f"[tuning] Best dispatch (FP8): SMs 24, NVL chunk 20, {204.8 * gbps:.2f} GB/s (NVL), t: {190.1 * us:.2f} us\n"
        f"[tuning] Best dispatch (BF16): SMs 24, NVL chunk 16, {339.4 * gbps:.2f} GB/s (NVL), t: {222.5 * us:.2f} us\n"
        f"[tuning] Best combine: SMs 24, NVL chunk 8: {287.1 * gbps:.2f} GB/s (NVL), t: {263.0 * us:.2f} us\n")


def ll_log(rank_speed: tuple[float, ...] = (1.0, 1.0), total: tuple[tuple[float, float, float, float], ...] = (),
           stop_after_rank0: bool = False) -> str:
    """test_low_latency.py on 2 ranks: every rank prints its own lines (2 x H200, 2026-11-28)."""
    base = [(262.4, 257.3), (365.2, 358.1)]      # dispatch, combine GB/s of ranks 0 and 1
    total = total or ((301.2, 73.21, 70.48, 77.95), (297.7, 74.07, 70.61, 78.40))
    lines = ["Allocating buffer size: 2115.111296 MB ..."]
    for r, s in enumerate(rank_speed):
        if stop_after_rank0 and r:
            break
        gb, avg, lo, hi = total[r]
        lines.append(f"[rank {r}] Dispatch + combine bandwidth: {gb * s:.2f} GB/s, avg_t={avg / s:.2f} us, "
                     f"min_t={lo / s:.2f} us, max_t={hi / s:.2f} us")
        lines.append(f"[rank {r}] Dispatch bandwidth: {base[0][r] * s:.2f} GB/s, avg_t={27.81 / s:.2f} us | "
                     f"Combine bandwidth: {base[1][r] * s:.2f} GB/s, avg_t={39.95 / s:.2f} us")
        lines.append(f"[rank {r}] Dispatch send/recv time: 12.10 + 8.22 us | Combine send/recv time: 14.01 + 9.35 us")
    return "\n".join(lines) + "\n"


def _log(tmp_path: Path, text: str) -> Path:
    path = tmp_path / f"run-{len(list(tmp_path.glob('run-*')))}.log"
    path.write_text(text)
    return path


def record(capsys, proj, root: Path, tmp_path: Path, test: str, text: str) -> None:  # noqa: F811
    rc, out, err = cli_in_process(capsys, "record", "h200-nvlink", "--test", test, "--exit-code", "0",
                                  "--log", _log(tmp_path, text), "--root", root, "--project", proj.root,
                                  "--", "--num-processes", "2")
    assert rc == 0, err


def admit(capsys, proj, root: Path, tmp_path: Path, test: str, text: str, *extra: str):  # noqa: F811
    return cli_in_process(capsys, "admit", "h200-nvlink", "--test", test, "--log", _log(tmp_path, text),
                          "--root", root, "--project", proj.root, *extra, "--", "--num-processes", "2")


def test_rank_figures_per_phase():
    ll = parse_rank_figures(ll_log())
    assert ll["1"]["ll_dispatch_gbps"] == 257.3 and ll["1"]["ll_combine_gbps"] == 358.1
    assert ll["0"]["ll_total_min_us"] == 70.48 and ll["0"]["ll_total_gbps"] == 301.2
    assert parse_rank_figures(intranode_log()) == {"0": {
        "dispatch_fp8_gbps": 204.8, "dispatch_fp8_us": 190.1, "dispatch_bf16_gbps": 339.4, "dispatch_bf16_us": 222.5,
        "combine_bf16_gbps": 287.1, "combine_bf16_us": 263.0}}
    assert parse_rank_figures("nothing") == {}


def test_recorded_output_is_admitted_and_half_speed_refused(proj, host_tree, capsys, tmp_path):  # noqa: F811
    root = host_tree(HOST)
    record(capsys, proj, root, tmp_path, "intranode", intranode_log())
    (rec,), _ = load_records(proj)
    assert rec.data["rank_figures"]["0"]["dispatch_bf16_gbps"] == 339.4
    ok = admit(capsys, proj, root, tmp_path, "intranode", intranode_log())
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "intranode: admitted" in ok.stdout and "ADMITTED, valid until" in ok.stdout
    (written,) = (proj.root / "verified" / "h200-nvlink" / "admissions").glob("*.json")
    assert json.loads(written.read_text())["format"] == "deepep-env/admission/v1"
    assert len(load_records(proj)[0]) == 1           # an admission is never read as a test record
    slow = admit(capsys, proj, root, tmp_path, "intranode", intranode_log(gbps=0.5, us=2.0))
    assert slow.returncode == 1
    assert "rank 0 dispatch_bf16_gbps 169.7 GB/s < 271.5 (0.8 x median 339.4 of 1 record(s))" in slow.stdout
    assert "REFUSED" in slow.stdout


def test_one_slow_rank_is_refused_by_name(proj, host_tree, capsys, tmp_path):  # noqa: F811
    root = host_tree(HOST)
    record(capsys, proj, root, tmp_path, "low-latency", ll_log())
    assert admit(capsys, proj, root, tmp_path, "low-latency", ll_log()).returncode == 0
    res = admit(capsys, proj, root, tmp_path, "low-latency", ll_log(rank_speed=(1.0, 0.5)), "--json")
    assert res.returncode == 1
    doc = json.loads(res.stdout)
    assert doc["admitted"] is False
    refused = {(r["rank"], r["figure"]) for r in doc["tests"][0]["refusals"]}
    assert ("1", "ll_dispatch_gbps") in refused and ("1", "ll_combine_gbps") in refused
    assert {rank for rank, _ in refused} == {"1"}       # rank 0 is fine: only rank 1 is named


def test_the_outlier_average_is_admitted(proj, host_tree, capsys, tmp_path):  # noqa: F811
    """Issue 55: one env read 229.25 GB/s on "Dispatch + combine" (avg_t 96.18 us, min_t 71.78, max_t
    131.01) while its dispatch and combine lines agreed with the others': a healthy node."""
    root = host_tree(HOST)
    for speed in (1.0, 0.98, 1.02):
        record(capsys, proj, root, tmp_path, "low-latency", ll_log(rank_speed=(speed, speed)))
    outlier = ll_log(total=((229.25, 96.18, 71.78, 131.01), (231.02, 95.44, 71.90, 129.80)))
    res = admit(capsys, proj, root, tmp_path, "low-latency", outlier)
    assert res.returncode == 0, res.stdout
    assert "low-latency: admitted (2 rank(s), 3 floor(s) from 3 record(s)" in res.stdout


def test_no_record_says_so_in_one_line(proj, host_tree, capsys, tmp_path):  # noqa: F811
    res = admit(capsys, proj, host_tree(HOST), tmp_path, "intranode", intranode_log())
    assert res.returncode == 3 and res.stdout == ""
    (line,) = res.stderr.strip().splitlines()
    assert "no floor for h200-nvlink intranode on nvlink (NVIDIA H200, 2 rank(s)" in line
    assert "deepep-env task deepep-test-intranode -e h200-nvlink -- --num-processes 2" in line


def test_a_log_that_stops_is_refused(proj, host_tree, capsys, tmp_path):  # noqa: F811
    root = host_tree(HOST)
    record(capsys, proj, root, tmp_path, "low-latency", ll_log())
    record(capsys, proj, root, tmp_path, "intranode", intranode_log())
    res = admit(capsys, proj, root, tmp_path, "low-latency", ll_log(stop_after_rank0=True))
    assert res.returncode == 1
    assert "rank 1 ll_dispatch_gbps: rank(s) 1 printed none (the run stopped before it: a hang or a crash)" in res.stdout
    res = admit(capsys, proj, root, tmp_path, "intranode", intranode_log(stop_after_cases=True))
    assert res.returncode == 1 and "rank 0 combine_bf16_gbps: rank(s) 0 printed none" in res.stdout


def test_old_records_give_their_aggregate_figures(proj, host_tree, capsys, tmp_path):  # noqa: F811
    root = host_tree(HOST)
    record(capsys, proj, root, tmp_path, "intranode", intranode_log())
    (rec,), _ = load_records(proj)
    data = dict(rec.data)
    del data["rank_figures"]                     # as written before issue 55
    rec.path.write_text(json.dumps(data))
    assert admit(capsys, proj, root, tmp_path, "intranode", intranode_log()).returncode == 0
    assert admit(capsys, proj, root, tmp_path, "intranode", intranode_log(gbps=0.5)).returncode == 1


def test_rank_figures_are_checked_where_records_are_read(proj, host_tree, capsys, tmp_path):  # noqa: F811
    record(capsys, proj, host_tree(HOST), tmp_path, "intranode", intranode_log())
    (rec,), _ = load_records(proj)
    for bad in ({"0": {"x": "fast"}}, {"r0": {"x": 1}}, {"0": [1]}):
        rec.path.write_text(json.dumps({**rec.data, "rank_figures": bad}))
        with pytest.raises(UserError, match="rank_figures"):
            read_record(rec.path)


def test_spec_floors_without_records(proj, host_tree, capsys, tmp_path):  # noqa: F811
    spec = proj.root / "env_specs" / "h200-nvlink.toml"
    spec.write_text(spec.read_text() + "\n[admit]\nfloors = { dispatch_bf16_gbps = 300.0 }\n")
    root = host_tree(HOST)
    assert admit(capsys, proj, root, tmp_path, "intranode", intranode_log()).returncode == 0
    res = admit(capsys, proj, root, tmp_path, "intranode", intranode_log(gbps=0.8))
    assert res.returncode == 1 and "dispatch_bf16_gbps 271.52 GB/s < 300 ([admit] floors in env_specs/h200-nvlink.toml)" in res.stdout


def test_a_hang_on_the_node_is_refused_naming_the_rank(proj, host_tree, capsys, tmp_path, monkeypatch):  # noqa: F811
    """The node path: the env's own task (pixi.toml's deepep-test-low-latency) run as `task` runs it, a
    test that prints rank 0's lines and hangs, killed at the timeout."""
    from deepep_env.views.admit import admit_node

    root = host_tree(HOST)
    record(capsys, proj, root, tmp_path, "low-latency", ll_log())
    tests = proj.prefix_for("h200-nvlink") / "share" / "deep-ep" / "tests"
    tests.mkdir(parents=True)
    script = tests / "test_low_latency.py"
    script.write_text("import sys, time\nsys.stdout.write(%r)\nsys.stdout.flush()\ntime.sleep(60)\n"
                      % ll_log(stop_after_rank0=True))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("DEEPEP_ENV_PYTHON", os.environ.get("PYTHON", "python3"))
    monkeypatch.setenv("DEEPEP_ENV_NO_OVERLAY", "1")
    capsys.readouterr()
    rec = admit_node(proj, "h200-nvlink", ["low-latency"], root=str(root), ranks=2, timeout=3, attempts=2,
                     install=False, doctor=False, write=False)
    out = capsys.readouterr()
    assert "[rank 0] Dispatch bandwidth" in out.err and out.out == ""     # stdout is kept for --json
    assert rec["admitted"] is False
    (t,) = rec["tests"]
    assert t["attempts"] == 2
    assert t["lines"][0] == "timed out after 3 s (a hang): rank(s) 1 printed no figure"


def test_on_a_node_doctor_comes_first(proj, host_tree, capsys, tmp_path):  # noqa: F811
    """No env installed on the captured host: doctor's error stops admit before any test runs."""
    root = host_tree(HOST)
    record(capsys, proj, root, tmp_path, "intranode", intranode_log())
    res = cli_in_process(capsys, "admit", "h200-nvlink", "--tests", "intranode", "--ranks", "2", "--root", root,
                         "--project", proj.root)
    assert res.returncode == 2 and res.stdout == ""
    (line,) = res.stderr.strip().splitlines()
    assert "doctor found" in line and "`deepep-env doctor h200-nvlink` says what" in line
    assert not (proj.root / "verified" / "h200-nvlink" / "admissions").exists()


def test_a_bad_admit_table_is_one_line(proj, host_tree, capsys, tmp_path):  # noqa: F811
    spec = proj.root / "env_specs" / "h200-nvlink.toml"
    spec.write_text(spec.read_text() + "\n[admit]\nratio = 1.5\nfloors = { fast = 1.0 }\n")
    res = admit(capsys, proj, host_tree(HOST), tmp_path, "intranode", intranode_log())
    assert res.returncode == 2 and res.stdout == ""
    (line,) = res.stderr.strip().splitlines()
    assert "h200-nvlink.toml" in line and "admit" in line
