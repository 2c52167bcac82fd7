"""Benchmark: `deepep-env fleet report` over 1,000 node files (issue 28: < 2 s on 2 cores).

    python benchmarks/bench_fleet.py [--nodes N]

The node files are real `deepep-env doctor --json` reports of the gcp-b200 fixture host (one
doctor run, copied N times, each with its own node name, its context padded with 60 checked
variables to the size of an installed env's report, ~12 KB), with planted differences on a few
nodes (a GID index, a missing peermem, a doctor error) so the merge has odd nodes to find. Times
the report in-process (read + merge + text) and as the command a job's rank 0 runs (a new
process, --json and --html). Prints `name=value` lines (seconds); the last line is the headline.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))


def node_reports(folder: Path, n: int, context_vars: int) -> None:
    import platform_fixtures as pf
    from deepep_env.doctor import run_doctor

    root = pf.make_hosts.build("gcp-b200", folder.parent / "host")
    base = run_doctor(None, root=str(root), environ={}).to_dict()
    # An env's report also lists the checked variables with their sources: as big as a real one.
    base["context"]["environment"] = {f"NVSHMEM_VAR_{i:03d}": {"value": "x" * 60, "source": "overlay rule some-rule ← a host fact"}
                                      for i in range(context_vars)}
    for i in range(n):
        doc = copy.deepcopy(base)
        doc["context"]["host"]["node"] = f"gpu-node-{i:04d}"
        if i % 97 == 13:
            doc["context"]["host"]["gid_index"] = 1
        if i % 211 == 7:
            doc["context"]["host"]["peermem"] = False
        if i == n - 5:
            doc["findings"].append({"id": "host.port-down", "severity": "error", "title": "port down",
                                    "evidence": [], "fix": "", "check": "host"})
        (folder / f"node-{i:04d}.json").write_text(json.dumps(doc, indent=2))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--context-vars", type=int, default=60, help="variables in each report's context (size)")
    args = ap.parse_args()
    from deepep_env.fleet.html import render_html
    from deepep_env.fleet.report import fleet_report, render_text

    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        folder = Path(tmp) / "fleet"
        folder.mkdir()
        t0 = time.perf_counter()
        node_reports(folder, args.nodes, args.context_vars)
        print(f"setup_s={time.perf_counter() - t0:.3f}")
        size = sum(p.stat().st_size for p in folder.iterdir())
        print(f"nodes={args.nodes}")
        print(f"node_file_bytes_avg={size // args.nodes}")
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            rep = fleet_report(folder, expect=args.nodes)
            render_text(rep)
            best = min(best, time.perf_counter() - t0)
        print(f"report_inprocess_s={best:.3f}")
        t0 = time.perf_counter()
        page = render_html(rep)
        print(f"html_s={time.perf_counter() - t0:.3f}")
        print(f"html_bytes={len(page)}")
        print(f"odd_nodes={sum(1 for n in rep['per_node'] if n['state'] != 'pass')}")
        print(f"first_breaking={rep['first_breaking']['node']}")
        env = dict(os.environ, PYTHONPATH=str(REPO))
        cmd = [sys.executable, "-m", "deepep_env.cli.main", "fleet", "report", str(folder), "--expect",
               str(args.nodes), "--json", "--html", str(Path(tmp) / "fleet.html")]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        cli = time.perf_counter() - t0
        assert proc.returncode == 1 and json.loads(proc.stdout)["nodes"] == args.nodes, proc.stderr[-500:]
        print(f"report_cli_s={cli:.3f}")
        print(f"cores={len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()}")
        print(f"fleet_report_{args.nodes}_nodes_s={cli:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
