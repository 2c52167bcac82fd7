"""Fleet preflight (issue 28): N nodes' doctor reports merged into one; the odd node named; the
launch's preflight run on simulated nodes (one host tree per node, DEEPEP_ENV_HOST_ROOT)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from cli_runner import cli_in_process
from launch_fixtures import node_tool
from verify_fixtures import LOW_LATENCY_OUTPUT, make_project

from deepep_env.doctor import run_doctor
from deepep_env.base.errors import UserError
from deepep_env.fleet.html import render_html
from deepep_env.fleet.report import fleet_report, render_text

REPO = Path(__file__).resolve().parents[2]
NS = "{http://www.w3.org/1999/xhtml}"


def node_copy(host_tree, name: str, dest: Path) -> Path:
    shutil.copytree(host_tree(name), dest, symlinks=True)
    return dest


def without_peermem(root: Path) -> Path:
    mods = root / "proc" / "modules"
    mods.write_text("".join(ln for ln in mods.read_text().splitlines(True) if not ln.startswith("nvidia_peermem ")))
    return root


def write_fleet(folder: Path, roots: list[Path]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, root in enumerate(roots):
        rep = run_doctor(None, root=str(root), environ={})
        (folder / f"node-{i}.json").write_text(json.dumps(rep.to_dict()))
    return folder


@pytest.fixture(scope="module")
def fleets(host_tree, tmp_path_factory):
    """Fleets of fixture hosts: uniform, one with a planted GID/NIC-naming difference, one without peermem."""
    base = tmp_path_factory.mktemp("fleets")
    good = [host_tree("gcp-b200")] * 4
    odd_gid = good[:2] + [host_tree("gcp-b200-gid1")] + good[:1]
    nopm = without_peermem(node_copy(host_tree, "gcp-b200", base / "nopm"))
    return {"uniform": write_fleet(base / "uniform", good), "gid": write_fleet(base / "gid", odd_gid),
            "peermem": write_fleet(base / "peermem", good[:3] + [nopm]),
            "port": write_fleet(base / "port", good[:2] + [host_tree("gcp-b200-port-down")])}


def test_a_node_without_rdma_nics_is_named_first(host_tree, tmp_path):
    """Issue 51.3: a gcp-b200 node whose RDMA NICs vanished (doctor with --platform gcp-b200) is the first
    thing that would break the job, ahead of an earlier node's other error."""
    folder = write_fleet(tmp_path / "f", [host_tree("gcp-b200-port-down"), host_tree("gcp-b200")])
    rep = run_doctor(None, root=str(host_tree("h200x8-nvlink")), platform="gcp-b200", environ={})
    (folder / "node-2.json").write_text(json.dumps(rep.to_dict()))
    b = fleet_report(folder)["first_breaking"]
    assert b["node"] == "node-2", b
    # by consequence (issue 56.4): the other GPU model, then the missing NICs (host.no-rdma-nic among them),
    # then the driver keys
    causes = b["causes"]
    assert causes[0] == "gpus" and "host.no-rdma-nic" in causes
    assert causes.index("host.no-rdma-nic") < causes.index("nic-handler.driver-keys")


def test_doctor_json_carries_the_fleet_facts(fleets):
    doc = json.loads((fleets["uniform"] / "node-0.json").read_text())
    h = doc["context"]["host"]
    assert {"driver", "cuda_driver", "ofed", "gid_index", "nic_count", "gpu_hca", "peermem", "platform"} <= set(h)
    assert h["gid_index"] == 3 and h["peermem"] is True and h["nic_count"] == 8


def test_uniform_fleet_passes(fleets, capsys):
    rep = fleet_report(fleets["uniform"])
    assert rep["ok"] and rep["uniform"] and rep["nodes"] == 4 and not rep["differing"] and rep["first_breaking"] is None
    rc, out, _ = cli_in_process(capsys, "fleet", "report", str(fleets["uniform"]))
    assert rc == 0 and out.count("PASS ") == 4 and out.splitlines()[-1].startswith("fleet: PASS: 4 node(s)")


def test_planted_gid_difference_names_the_odd_node(fleets, capsys):
    rep = fleet_report(fleets["gid"])
    assert not rep["ok"] and not rep["uniform"]
    facts = {d["fact"]: d for d in rep["differing"]}
    assert facts["gid_index"]["majority"] == 3 and facts["gid_index"]["odd"] == [{"node": "node-2", "value": 1}]
    assert [o["node"] for o in facts["gpu_hca"]["odd"]] == ["node-2"]
    assert rep["first_breaking"]["node"] == "node-2" and "gid_index" in rep["first_breaking"]["why"]
    states = {n["node"]: n["state"] for n in rep["per_node"]}
    assert states == {"node-0": "pass", "node-1": "pass", "node-2": "odd", "node-3": "pass"}
    rc, out, _ = cli_in_process(capsys, "fleet", "report", str(fleets["gid"]))
    assert rc == 1
    assert "differs: gid_index: majority 3 on 3 node(s); odd: node-2=1" in out
    assert "first node that would break the job: node-2" in out
    rc, out, _ = cli_in_process(capsys, "fleet", "report", str(fleets["gid"]), "--json")
    assert rc == 1 and json.loads(out)["format"] == "deepep-env/fleet-report/v1"


def test_missing_peermem_and_a_failing_node(fleets):
    rep = fleet_report(fleets["peermem"])
    (d,) = [d for d in rep["differing"] if d["fact"] == "peermem"]
    assert d["majority"] is True and d["odd"] == [{"node": "node-3", "value": False}]
    rep = fleet_report(fleets["port"])
    b = rep["first_breaking"]
    assert rep["failing"] == 1 and (b["node"], b["host"]) == ("node-2", "gcp-b200-port-down")
    assert b["causes"] == ["active_nics", "gpu_hca", "host.port-down"]        # the missing NIC first
    assert b["why"].startswith("active_nics 7 (majority 8); ") and b["why"].endswith("; doctor error host.port-down")
    assert {d["fact"] for d in rep["differing"]} >= {"active_nics"}
    assert "FAIL node-2" in render_text(rep)


def test_expect_counts_missing_nodes(fleets):
    rep = fleet_report(fleets["uniform"], expect=6)
    assert not rep["ok"] and rep["first_breaking"] == {"node": None, "why": "2 of 6 nodes sent no report"}


def test_bad_inputs_are_one_line(tmp_path, fleets):
    d = tmp_path / "f"
    shutil.copytree(fleets["uniform"], d)
    os.mkfifo(d / "node-9.json")
    with pytest.raises(UserError, match="node-9.json: not a regular file"):
        fleet_report(d)
    os.unlink(d / "node-9.json")
    (d / "node-8.json").write_bytes(b"{" + b" " * (5 << 20) + b"}")
    with pytest.raises(UserError, match="larger than"):
        fleet_report(d)
    (d / "node-8.json").write_text(json.dumps({"_meta": {"format": "deepep-env/overlay", "version": 1}}))
    with pytest.raises(UserError, match="not a doctor report"):
        fleet_report(d)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no node reports"):
        fleet_report(tmp_path / "empty")


def _admission(node: str, admitted: bool, until: str = "2999-01-01T00:00:00Z") -> dict:
    line = "rank 1 ll_dispatch_gbps 131.2 GB/s < 209.8 (0.8 x median 262.4 of 1 record(s))"
    return {"format": "deepep-env/admission/v1", "env": "h200-nvlink", "host": {"node": node}, "admitted": admitted,
            "valid_until": until, "tests": [{"test": "low-latency", "admitted": admitted, "lines": [] if admitted else [line]}]}


def test_admissions_are_shown_and_a_refused_node_fails_the_fleet(fleets, tmp_path, capsys):
    """`admit --json` files beside the doctor reports (launch writes admit-<RANK>.json): matched by host name."""
    folder = tmp_path / "fleet"
    shutil.copytree(fleets["uniform"], folder)
    host = json.loads((folder / "node-2.json").read_text())["context"]["host"]["node"]
    (folder / "admit-2.json").write_text(json.dumps(_admission(host, True)))
    rep = fleet_report(folder)
    assert rep["ok"] and rep["nodes"] == 4
    assert rep["per_node"][2]["admission"]["admitted"] is True
    assert "admitted until 2999-01-01T00:00:00Z" in render_text(rep)
    (folder / "admit-2.json").write_text(json.dumps(_admission(host, False)))
    rep = fleet_report(folder)
    assert not rep["ok"] and rep["per_node"][2]["state"] == "refused"
    text = render_text(rep)
    assert "first node that would break the job: node-2 (gcp-b200): not admitted: low-latency: rank 1 ll_dispatch_gbps" in text
    (folder / "admit-2.json").write_text(json.dumps(_admission(host, True, until="2020-01-01T00:00:00Z")))
    assert "admission expired at 2020-01-01T00:00:00Z" in render_text(fleet_report(folder))


def test_html_page_is_one_parsable_self_contained_file(fleets, tmp_path, capsys):
    page = tmp_path / "fleet.html"
    rc, _, _ = cli_in_process(capsys, "fleet", "report", str(fleets["gid"]), "--html", str(page))
    assert rc == 1
    text = page.read_text()
    assert "<script" not in text and "http://" not in text.replace("http://www.w3.org/1999/xhtml", "")
    root = ET.fromstring(text.split("\n", 2)[2])      # after the XML declaration and the doctype
    cells = [e for e in root.iter(f"{NS}div") if "cell" in (e.get("class") or "")]
    assert [c.get("data-node") for c in cells] == ["node-0", "node-1", "node-2", "node-3"]
    # the cells name the hosts, as the terminal report does
    assert [c.text for c in cells] == ["gcp-b200", "gcp-b200", "gcp-b200-gid1", "gcp-b200"]
    assert "gcp-b200-gid1 (node-2)" in "".join(next(e for e in root.iter(f"{NS}p") if e.get("id") == "first-breaking").itertext())
    odd = cells[2]
    assert odd.get("data-state") == "odd" and "gid_index: 1 (majority: 3)" in odd.get("title")
    rows = [[(td.text or "") for td in tr.iter(f"{NS}td")] for tr in root.iter(f"{NS}tr")]
    assert ["gid_index", "3", "3"] == rows[[r[0] if r else "" for r in rows].index("gid_index")][:3]
    assert "FAIL" in next(root.iter(f"{NS}title")).text
    ok = render_html(fleet_report(fleets["uniform"]))
    ET.fromstring(ok.split("\n", 2)[2])
    assert "Every node reports the same facts" in ok and "<script" not in ok


def test_first_breaking_node_by_consequence(tmp_path, host_tree, capsys):
    """An H200 with no NIC in a B200 fleet (issue 56): its other GPU model comes first, then its missing
    NICs, then its driver-key error; it is named before a B200 node whose only fault is driver keys."""
    from deepep_env.platform.demo import host_root

    folder = write_fleet(tmp_path / "fleet", [host_tree("gcp-b200")] * 3)
    with host_root("/", "h200x8-nvlink") as h200:
        write_fleet(tmp_path / "h200", [h200])
    shutil.copy(tmp_path / "h200" / "node-0.json", folder / "node-3.json")
    keys = {"id": "nic-handler.driver-keys", "severity": "error", "message": "planted"}
    for name in ("node-1.json", "node-3.json"):
        doc = json.loads((folder / name).read_text())
        doc["findings"].append(keys)
        (folder / name).write_text(json.dumps(doc))
    b = fleet_report(folder)["first_breaking"]
    assert b["node"] == "node-3"
    assert b["causes"][:2] == ["platform", "gpus"] and b["causes"][-1] == "nic-handler.driver-keys"
    assert b["causes"].index("nic_count") < b["causes"].index("driver")
    assert b["why"].startswith("platform nvlink (majority gcp-b200); gpus 8 x NVIDIA H200 (majority 8 x NVIDIA B200); "
                               "nic_count 0 (majority 8)")
    rc, out, _ = cli_in_process(capsys, "fleet", "report", str(folder))
    assert rc == 1 and f"first node that would break the job: node-3 ({b['host']}): platform nvlink" in out


# -- the launch's preflight on simulated nodes ---------------------------------------------------


def _render_shell(tmp_path: Path, nodes: int) -> list[str]:
    from deepep_env.launch import EnvInfo, LaunchOptions, plan_launch, render
    from launch_fixtures import shell_blocks

    prog = tmp_path / "fake_test.py"
    prog.write_text("import sys\nsys.stdout.write(open(%r).read())\n" % str(tmp_path / "out.txt"))
    (tmp_path / "out.txt").write_text(LOW_LATENCY_OUTPUT)
    r = render(plan_launch(EnvInfo("h200-nvlink", "1", ("gcp-b200",)), LaunchOptions(
        test="low-latency", nodes=nodes, target="shell", master_addr="127.0.0.1", runner=(), python=sys.executable,
        program=str(prog), test_args=("--num-tokens", "64"), preflight=True, shared_dir=str(tmp_path / "shared"),
        preflight_timeout=60, tool=(str(node_tool(tmp_path)),), admit=False)))   # admit: tests/verify/test_admit.py
    return shell_blocks(r.text)


def _run_nodes(blocks: list[str], roots: list[Path], proj: Path) -> list[subprocess.CompletedProcess]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("DEEPEP_ENV_")}
    base.update(PYTHONPATH=str(REPO), DEEPEP_ENV_PROJECT=str(proj))
    procs = [subprocess.Popen(["bash", "-c", b], env=dict(base, DEEPEP_ENV_HOST_ROOT=str(root)), cwd=proj,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for b, root in zip(blocks, roots)]
    out = []
    for p in procs:
        so, se = p.communicate(timeout=240)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, so, se))
    return out


def test_shell_preflight_runs_the_test_and_records_on_a_uniform_fleet(tmp_path, host_tree):
    proj = make_project(tmp_path / "proj")
    roots = [node_copy(host_tree, "gcp-b200", tmp_path / f"n{i}") for i in range(3)]
    procs = _run_nodes(_render_shell(tmp_path, 3), roots, proj)
    for p in procs:
        assert p.returncode == 0, p.stderr
        assert "197.80 GB/s" in p.stdout                             # the test ran, its output passed through
    assert "fleet: PASS: 3 of 3 node(s)" in procs[0].stderr
    run = tmp_path / "shared" / "deepep-h200-nvlink-low-latency"
    assert sorted(p.name for p in run.glob("node-*.json")) == ["node-0.json", "node-1.json", "node-2.json"]
    assert (run / "fleet.html").is_file() and (run / "test-2.log").read_text() == LOW_LATENCY_OUTPUT
    recs = sorted((proj / "verified" / "h200-nvlink").glob("*.json"))
    assert len(recs) == 3
    for r in map(lambda p: json.loads(p.read_text()), recs):
        assert r["test"] == "low-latency" and r["passed"] and r["args"] == ["--num-tokens", "64"]
        assert r["digest"].startswith("sha256:") and r["figures"]["ll_rank0_gbps"] == 197.8
        assert (r["ranks"], r["gpus"]) == (2, 2) and "dispatch + combine measured" in r["evidence"]
    assert {json.loads(p.read_text())["host"]["node"] for p in recs} == {"n0", "n1", "n2"}


def test_shell_preflight_stops_a_fleet_with_a_planted_difference(tmp_path, host_tree):
    proj = make_project(tmp_path / "proj")
    roots = [node_copy(host_tree, "gcp-b200", tmp_path / "n0"), node_copy(host_tree, "gcp-b200", tmp_path / "n1"),
             node_copy(host_tree, "gcp-b200-gid1", tmp_path / "n2")]
    procs = _run_nodes(_render_shell(tmp_path, 3), roots, proj)
    assert [p.returncode for p in procs] == [3, 3, 3]
    assert all("197.80" not in p.stdout for p in procs)              # the test never started
    assert "first node that would break the job: node-2" in procs[0].stderr
    assert "the fleet did not pass" in procs[1].stderr
    assert not (proj / "verified").exists()


def test_bench_fleet_prints_name_value_lines():
    """benchmarks/bench_fleet.py on a small fleet: name=value lines, the headline last (no timing asserted)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEEPEP_ENV_")}
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_fleet.py"), "--nodes", "30"],
                          capture_output=True, text=True, env=dict(env, PYTHONPATH=str(REPO)), timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert all("=" in ln for ln in lines)
    assert lines[-1].startswith("fleet_report_30_nodes_s=") and "nodes=30" in lines
