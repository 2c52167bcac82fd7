"""Test records (issue 28): bound to the lock digest, written by tasks and `record`, read by
`verified`, `plan`, `diff` and `publish`."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from cli_runner import cli_in_process
from verify_fixtures import NOW, DEEPEP_OUTPUT, rebuild_package, proj  # noqa: F401 (proj: the fixture)

from deepep_env.base.errors import UserError
from deepep_env.formats.lockfile import read_lock
from deepep_env.lock.digest import env_digest, env_digests, section_digest
from deepep_env.verify.figures import parse_figures
from deepep_env.verify.records import load_records, record_test



def test_digest_is_the_sorted_sha_list_of_the_section(proj):
    lock = read_lock(proj.pixi_lock)
    pkgs = lock.env("h200-nvlink").packages["linux-64-cuda130"]
    d = section_digest(pkgs)
    assert d.startswith("sha256:") and len(d) == 71
    assert section_digest(list(reversed(pkgs))) == d              # order in the lock does not count
    assert env_digest(lock, "h200-nvlink") == ("linux-64-cuda130", d)
    assert env_digests(lock, "h200-nvlink-conda")["linux-64-cuda130"] != d
    with pytest.raises(UserError, match="no packages for environment 'nope'"):
        env_digest(lock, "nope")
    rebuild_package(proj.pixi_lock, "h200-nvlink", "deep-ep")
    assert env_digest(read_lock(proj.pixi_lock), "h200-nvlink")[1] != d   # one package rebuilt: another digest


def test_figures_from_deepep_output():
    f = parse_figures(DEEPEP_OUTPUT + "[rank 0] Dispatch + combine bandwidth: 197.80 GB/s, avg_t=51.20 us\n"
                      "[rank 1] Dispatch + combine bandwidth: 190.00 GB/s, avg_t=52.00 us\n")
    assert f["cases_passed"] == 2 and f["cases_failed"] == 0
    assert f["dispatch_fp8_gbps"] == 324.72 and f["dispatch_fp8_us"] == 123.4
    assert f["dispatch_bf16_gbps"] == 310.10 and f["combine_bf16_gbps"] == 323.57 and f["combine_bf16_us"] == 240.5
    assert f["ll_rank0_gbps"] == 197.8 and f["ll_min_rank_gbps"] == 190.0 and f["ll_rank0_us"] == 51.2
    ep = parse_figures("   > Testing with do_handle_copy=1\n"
                       "     * EP:   0/  1 | dispatch: 0 GB/s (SO), 412 GB/s (SU), 123.456 us, x\n"
                       "     @ EP:   0/  1 | combine: 0 GB/s (SO), 398 GB/s (SU), 130.000 us, x\n")
    assert ep == {"ep_cases_run": 1, "ep_dispatch_su_gbps": 412.0, "ep_dispatch_us": 123.456,
                  "ep_combine_su_gbps": 398.0, "ep_combine_us": 130.0}
    assert parse_figures("no figures here") == {}


def test_record_binds_result_to_digest_and_host(proj, host_tree, monkeypatch):
    monkeypatch.setenv("DEEPEP_ENV_CHANNEL_TOKEN", "s3cr3t-token-value")
    root = str(host_tree("gcp-b200"))
    path = record_test(proj, "h200-nvlink", "deepep-test-intranode", ["--num-processes", "8", "s3cr3t-token-value"],
                       0, DEEPEP_OUTPUT, root=root, now=NOW)
    assert path.parent == proj.root / "verified" / "h200-nvlink"
    assert path.name == "20261125T120000Z-intranode-gcp-b200.json"
    rec = json.loads(path.read_text())
    assert rec["format"] == "deepep-env/test-record/v2" and rec["activation"] is None   # no prefix given
    assert rec["digest"] == env_digest(read_lock(proj.pixi_lock), "h200-nvlink")[1]
    assert (rec["lock_env"], rec["lock_platform"]) == ("h200-nvlink", "linux-64-cuda130")
    assert rec["test"] == "intranode" and rec["exit_code"] == 0 and rec["passed"] is True
    assert rec["figures"]["dispatch_fp8_gbps"] == 324.72
    h = rec["host"]
    assert h["gpus"] == "8 x NVIDIA B200" and h["gpu_count"] == 8 and h["driver"] == "580.126.09"
    assert h["cuda_driver"] == "13.0" and h["platform"] == "gcp-b200" and h["nic_count"] == 8
    assert "fw 28.43.1014" in h["nics"] and h["kernel"] and h["ofed"] and h["gid_index"] == 3
    assert rec["time"] == "2026-11-25T12:00:00Z" and rec["tool_version"]
    assert "s3cr3t-token-value" not in path.read_text()           # never a credential in a record
    # same second, test and node: a second file, not an overwrite
    again = record_test(proj, "h200-nvlink", "deepep-test-intranode", [], 1, "", root=root, now=NOW)
    assert again != path and again.name.endswith("-2.json")
    recs, warnings = load_records(proj)
    assert [r.path for r in recs] == [path, again] and not warnings


def test_unreadable_records_are_skipped_with_a_line(proj, host_tree):
    record_test(proj, "h200-nvlink", "intranode", [], 0, "", root=str(host_tree("gcp-b200")), now=NOW)
    d = proj.root / "verified" / "h200-nvlink"
    (d / "newer.json").write_text(json.dumps({"format": "deepep-env/test-record/v9"}))
    (d / "junk.json").write_text("{")
    (d / "big.json").write_bytes(b" " * (2 << 20))
    os.mkfifo(d / "fifo.json")
    recs, warnings = load_records(proj)
    assert len(recs) == 1
    text = "\n".join(warnings)
    assert "newer than this deepep-env reads" in text and "not valid JSON" in text
    assert "larger than" in text and "fifo.json: not a regular file" in text


def test_verified_matrix_and_a_lock_change(proj, host_tree, capsys):
    root = str(host_tree("gcp-b200"))
    record_test(proj, "h200-nvlink", "intranode", [], 0, DEEPEP_OUTPUT, root=root, now=NOW)
    record_test(proj, "h200-nvlink", "low-latency", [], 1, "", root=root, now=NOW)
    rc, out, err = cli_in_process(capsys, "verified", "--json", "--project", proj.root)
    assert rc == 0, err
    cells = {c["test"]: c for c in json.loads(out)["cells"]}
    # issue 51.6: every other locked env has a row, `none`, saying why
    nones = {c["env"]: c for c in json.loads(out)["none"]}
    assert "h200-nvlink" not in nones and "h200-nvlink-conda" in nones
    assert all(c["status"] == "none" and c["why"].startswith("no record: no ") for c in nones.values())
    assert cells["intranode"]["status"] == "pass" and cells["intranode"]["matches_lock"] and cells["intranode"]["verified"]
    assert cells["intranode"]["figures"]["combine_bf16_gbps"] == 323.57
    assert cells["low-latency"]["status"] == "fail" and not cells["low-latency"]["verified"]
    assert {c["platform"] for c in cells.values()} == {"gcp-b200"}
    rc, out, _ = cli_in_process(capsys, "verified", "--project", proj.root)
    assert rc == 0 and "intranode" in out and "matches" in out and "324.72" in out
    assert "h200-nvlink-conda" in out and "none" in out and "no record" in out
    # plan: a passing record for the digest
    from deepep_env.verify.matrix import plan_verification

    assert plan_verification(proj, "h200-nvlink")["status"] == "verified"
    conda = plan_verification(proj, "h200-nvlink-conda")
    assert conda["status"] == "unverified" and conda["why"].startswith(("no H200 machine", "no machine of")), conda
    # a lock change: diff names the record it drops, and the matrix says stale
    old = proj.root / "old.pixi.lock"
    shutil.copy(proj.pixi_lock, old)
    rebuild_package(proj.pixi_lock, "h200-nvlink", "deep-ep")
    rc, out, err = cli_in_process(capsys, "diff", str(old), str(proj.pixi_lock), "-e", "h200-nvlink")
    assert rc == 0, err
    assert "this change drops 1 verified record:" in out and "intranode on gcp-b200" in out
    rc, out, _ = cli_in_process(capsys, "diff", str(old), str(proj.pixi_lock), "--json")
    assert [r["test"] for r in json.loads(out)["verified_dropped"]] == ["intranode"]
    rc, out, _ = cli_in_process(capsys, "diff", str(old), str(old), "--format", "markdown")
    assert "drops" not in out
    rc, out, _ = cli_in_process(capsys, "verified", "--json", "--project", proj.root)
    cell = {c["test"]: c for c in json.loads(out)["cells"]}["intranode"]
    assert not cell["matches_lock"] and not cell["verified"] and cell["status"] == "pass"
    assert plan_verification(proj, "h200-nvlink")["status"] == "unverified"


def test_plan_says_whether_the_env_is_verified(proj, host_tree, capsys):
    root = str(host_tree("gcp-b200"))
    rc, out, err = cli_in_process(capsys, "plan", "h200-nvlink", "--root", root, "--project", proj.root)
    assert rc == 0, err
    assert "verified: no passing record for digest" in out
    record_test(proj, "h200-nvlink", "intranode", [], 0, DEEPEP_OUTPUT, root=root, now=NOW)
    rc, out, err = cli_in_process(capsys, "plan", "h200-nvlink", "--root", root, "--project", proj.root)
    assert "verified: yes: a passing record for digest" in out and "intranode on gcp-b200" in out
    rc, out, err = cli_in_process(capsys, "plan", "h200-nvlink", "--root", root, "--project", proj.root, "--json")
    assert json.loads(out)["verified"]["status"] == "verified"


def test_record_command_reads_the_log(proj, host_tree, capsys, tmp_path):
    log = tmp_path / "test.log"
    log.write_text("noise\n" * 1000 + DEEPEP_OUTPUT)
    rc, out, err = cli_in_process(capsys, "record", "h200-nvlink", "--test", "internode", "--exit-code", "0",
                                  "--log", str(log), "--root", str(host_tree("h20-roce")), "--project", proj.root,
                                  "--json", "--", "--num-tokens", "128")
    assert rc == 0, err
    rec = json.loads(out)
    assert rec["args"] == ["--num-tokens", "128"] and rec["figures"]["dispatch_bf16_gbps"] == 310.1
    assert rec["host"]["platform"] == "h20-roce" and Path(rec["path"]).is_file()


def test_task_run_writes_a_record(proj, host_tree, tmp_path, capsys):
    """run_task tees the deepep-test-* step and writes its record (install skipped: no channel here)."""
    from deepep_env.views.tasks import TaskPlan, TaskStep, run_task

    prog = tmp_path / "t.sh"
    prog.write_text("cat <<'EOF'\n" + DEEPEP_OUTPUT + "EOF\necho on-stderr >&2\nexit 0\n")
    plan = TaskPlan(task="deepep-test-intranode", environment="h200-nvlink", spec="h200-nvlink",
                    prefix=str(tmp_path / "nope"), args=["--x"],
                    steps=[TaskStep("deepep-test-intranode", f"bash {prog}", str(tmp_path), {})])
    env = dict(os.environ, DEEPEP_ENV_HOST_ROOT=str(host_tree("gcp-b200")), DEEPEP_ENV_NO_OVERLAY="1")
    assert run_task(proj, plan, base_env=env, install=False) == 0
    out = capsys.readouterr()
    assert "324.72 GB/s" in out.out and "on-stderr" in out.err          # passed through as it came
    (rec,), _ = load_records(proj)
    assert rec.data["figures"]["dispatch_fp8_gbps"] == 324.72 and rec.data["args"] == ["--x"]
    assert "record verified/h200-nvlink/" in out.err
    plan.task = plan.steps[0].name = "build-something"      # not a test: nothing recorded
    assert run_task(proj, plan, base_env=env, install=False) == 0
    assert len(load_records(proj)[0]) == 1


def test_publish_ships_the_records_with_the_packages(proj, host_tree, tmp_path, monkeypatch):
    from deepep_env.publish.model import PublishReport
    from deepep_env.verify.shipping import ship_records

    path = record_test(proj, "h200-nvlink", "intranode", [], 0, DEEPEP_OUTPUT, root=str(host_tree("gcp-b200")), now=NOW)
    chan = tmp_path / "chan"
    rep = ship_records("file", chan, "h200-nvlink", proj.root, PublishReport("h200-nvlink", str(chan), "file", chan.as_uri()))
    assert rep.records == [{"file": f"verified/h200-nvlink/{path.name}", "status": "uploaded"}]
    assert (chan / "verified" / "h200-nvlink" / path.name).read_bytes() == path.read_bytes()
    assert rep.to_json()["records"] == rep.records and f"uploaded         verified/h200-nvlink/{path.name}" in rep.lines()
    rep = ship_records("file", chan, "h200-nvlink", proj.root, PublishReport("h200-nvlink", str(chan), "file", chan.as_uri()))
    assert rep.records[0]["status"] == "already-present"
    (chan / "verified" / "h200-nvlink" / path.name).write_text("{}")
    with pytest.raises(UserError, match="a different test record is already published"):
        ship_records("file", chan, "h200-nvlink", proj.root, PublishReport("h200-nvlink", str(chan), "file", chan.as_uri()))
    rep = ship_records("s3", None, "h200-nvlink", proj.root, PublishReport("h200-nvlink", "s3://b/p", "s3", "s3://b/p"))
    assert not rep.records and "file channels only" in rep.notes[0]


def test_a_later_one_rank_run_neither_verifies_nor_hides_a_multi_rank_claim(tmp_path):
    """verified: the spec asks 2 ranks; a 2-rank pass then a 1-rank pass → the cell shows the 2-rank
    record (its ranks, its figures), verified; the 1-rank one counts as a record only."""
    from deepep_env.verify.matrix import Cell

    def rec(ranks, gbps, t):
        data = {"ranks": ranks, "digest": "d", "lock_env": "e", "lock_platform": "p", "time": t, "exit_code": 0,
                "passed": True, "test": "elastic-ep", "host": {"node": "n"},
                "evidence": "1 EPv2 case(s) ran to the end", "figures": {"ep_cases_run": 1, "ep_dispatch_su_gbps": gbps}}
        return type("R", (), {"data": data, "path": tmp_path / f"{t}.json"})()

    cell = Cell("e", "nvlink", "elastic-ep", [rec(2, 578, "t1"), rec(1, 1127, "t2")], need=2)
    d = cell.to_dict({("e", "p"): "d"})
    assert d["ranks"] == 2 and d["figures"]["ep_dispatch_su_gbps"] == 578 and d["newest"]["time"] == "t1"
    assert d["records"] == 2 and d["current_records"] == 2 and d["status"] == "pass" and d["verified"]
