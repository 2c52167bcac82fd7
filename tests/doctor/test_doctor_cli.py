"""`deepep-env doctor` end to end: exit codes, JSON, --strict, --traffic, unreadable files, docs."""
from __future__ import annotations

import json
import os
import re
import sys


from cli_runner import cli_subprocess
from doctor_fixtures import (
    doctor_cli,
    BUMP_SCRIPT,
    REPO,
    build_host,
    h200_capture_tree,
    make_prefix,
    no_driver_keys,
    with_counters,
)


def test_exit_codes_and_strict(tmp_path, capsys, clean_env):
    ok = build_host(tmp_path / "ok", "gcp-b200")
    code, out, _ = doctor_cli(capsys, "--root", ok)
    assert code == 0 and "0 errors, 0 warnings" in out
    warn_only = build_host(tmp_path / "w", "gke-a4")  # two libibverbs installed, one reachable: a warning
    assert doctor_cli(capsys, "--root", warn_only)[0] == 0
    code, out, _ = doctor_cli(capsys, "--root", warn_only, "--strict")
    assert code == 1 and "WARN  lib.ibverbs-multiple-installed" in out
    bad = build_host(tmp_path / "b", "gcp-b200", no_driver_keys)
    code, out, _ = doctor_cli(capsys, "--root", bad)
    assert code == 2 and "ERROR nic-handler.driver-keys" in out and "saw: /proc/driver/nvidia/params" in out and "fix: " in out


def test_json_report(tmp_path, capsys, clean_env):
    clean_env.setenv("NVSHMEM_IBGDA_NIC_HANDLER", "cpu")
    root = build_host(tmp_path / "h", "gcp-b200")
    code, out, _ = doctor_cli(capsys, "--root", root, "--json")
    data = json.loads(out)
    assert code == 2 == data["exit_code"]
    assert data["_meta"] == {"format": "deepep-env/doctor", "version": 1}
    f = next(x for x in data["findings"] if x["id"] == "nic-handler.cpu-on-gcp-b200")
    assert set(f) >= {"id", "severity", "title", "evidence", "fix"} and f["severity"] == "error"
    assert f["evidence"][0] == {"var": "NVSHMEM_IBGDA_NIC_HANDLER", "value": "cpu", "source": "environment"}
    assert data["platform"] == {"name": "gcp-b200", "source": "detected"}
    assert data["context"]["environment"]["NVSHMEM_IBGDA_NIC_HANDLER"]["source"] == "environment"


def test_env_and_prefix(tmp_path, capsys, clean_env):
    root = build_host(tmp_path / "h", "gcp-b200")
    pfx = make_prefix(tmp_path / "pfx", "gcp-b200-seed", pr466=False)
    code, out, _ = doctor_cli(capsys, "gcp-b200-seed", "--root", root, "--prefix", pfx, "--project", REPO)
    assert code == 2 and "ERROR deepep.pr466-missing" in out and "overlay applied" in out
    # the default prefix is the project's .pixi/envs/ENV (project.DEFAULT_PREFIX), not installed here
    code, out, _ = doctor_cli(capsys, "gcp-b200-seed", "--root", root, "--project", REPO)
    assert code == 2 and "ERROR env.not-installed" in out


def test_env_file_for_a_captured_host(tmp_path, capsys, clean_env, shared_dir):
    cap = shared_dir / "hosts" / "h200x8-nvlink"
    root = h200_capture_tree(tmp_path / "h200", cap)
    code, out, _ = doctor_cli(capsys, "--root", root, "--env-file", cap / "env.txt", "--strict")
    assert code == 0, out
    assert "platform nvlink" in out


def test_bad_input_is_one_line_not_a_traceback(tmp_path, capsys, clean_env):
    code, out, err = doctor_cli(capsys, "--root", tmp_path / "missing")
    assert code == 2 and err.count("\n") == 1 and "--root" in err
    code, out, err = doctor_cli(capsys, "--root", build_host(tmp_path / "h", "gcp-b200"), "--platform", "nope")
    assert code == 2 and "unknown platform" in err
    code, out, err = doctor_cli(capsys, "--root", tmp_path / "h", "--traffic")
    assert code == 2 and "after `--`" in err
    code, out, err = doctor_cli(capsys, "no/such", "--root", tmp_path / "h")
    assert code == 2 and "not an env name" in err


def test_unreadable_host_files_never_crash(tmp_path, capsys, clean_env):
    root = build_host(tmp_path / "h", "gcp-b200")
    params = root / "proc/driver/nvidia/params"
    params.unlink()
    params.mkdir()  # EISDIR on read
    (root / "proc/modules").unlink()
    os.symlink("modules", root / "proc/modules")  # ELOOP
    loop = root / "sys/class/infiniband/mlx5_9"
    os.symlink("mlx5_9", loop)
    (root / "var/lib/dpkg/status").write_bytes(b"\xff\xfe\x00garbage")
    clean_env.setenv("NVSHMEM_IBGDA_NIC_HANDLER", "gpu")
    code, out, _ = doctor_cli(capsys, "--root", root, "--json")
    data = json.loads(out)
    got = {f["id"] for f in data["findings"]}
    assert "nic-handler.driver-keys-unknown" in got
    assert any("proc/driver/nvidia/params" in n for n in data["notes"])
    assert code in (0, 1, 2)


def test_console_entry_point_exit_status(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200", no_driver_keys)
    env = {"PATH": os.environ["PATH"], "DEEPEP_ENV_STATE": str(tmp_path / "state")}
    p = cli_subprocess("doctor", "--root", root, env=env, repo_on_pythonpath=False)   # exactly this environment
    assert p.returncode == 2 and "nic-handler.driver-keys" in p.stdout and not p.stderr


# -- --traffic ---------------------------------------------------------------------------------------
def traffic(capsys, root, *nics, extra=(), env=()):
    args = [*env, "--root", root, "--json", "--traffic", "--", sys.executable, BUMP_SCRIPT, root, *nics, *extra]
    code, out, _ = doctor_cli(capsys, *args)
    return code, json.loads(out)


def test_traffic_idle_nics(tmp_path, capsys, clean_env):
    root = build_host(tmp_path / "h", "gcp-b200", with_counters)
    code, data = traffic(capsys, root, "mlx5_0")  # seed 000: only mlx5_0 carried traffic
    f = next(x for x in data["findings"] if x["id"] == "traffic.idle-nic")
    assert code == 2 and f["severity"] == "error" and "7 of 8 NICs" in f["title"] and "mlx5_7" in f["title"]
    ports = {(p["hca"], p["port"]): p for p in data["traffic"]["ports"]}
    assert ports[("mlx5_0", 1)]["delta"] == 123456 and ports[("mlx5_0", 1)]["bytes"] == 4 * 123456
    assert ports[("mlx5_1", 1)]["delta"] == 0


def test_traffic_on_every_nic_is_quiet(tmp_path, capsys, clean_env):
    root = build_host(tmp_path / "h", "gcp-b200", with_counters)
    code, data = traffic(capsys, root, *(f"mlx5_{i}" for i in range(8)))
    assert code == 0 and not [f for f in data["findings"] if f["id"].startswith("traffic.")]
    assert "traffic" in data["checks"]


def test_traffic_none_failed_and_missing_command(tmp_path, capsys, clean_env):
    root = build_host(tmp_path / "h", "gcp-b200", with_counters)
    code, data = traffic(capsys, root)
    assert {f["id"] for f in data["findings"]} == {"traffic.no-traffic"} and code == 0
    code, data = traffic(capsys, root, "mlx5_0", extra=("--exit", "3"))
    got = {f["id"] for f in data["findings"]}
    assert code == 2 and {"traffic.command-failed", "traffic.idle-nic"} <= got
    code, out, _ = doctor_cli(capsys, "--root", root, "--traffic", "--", "/no/such/binary")
    assert code == 2 and "traffic.command-failed" in out and "command not found" in out
    h200 = build_host(tmp_path / "n", "h200x8-nvlink")
    code, out, _ = doctor_cli(capsys, "--root", h200, "--traffic", "--", sys.executable, "-c", "pass")
    assert "traffic.no-nics" in out


def test_traffic_with_env_does_not_take_env_from_the_command(tmp_path, capsys, clean_env):
    root = build_host(tmp_path / "h", "gcp-b200", with_counters)
    pfx = make_prefix(tmp_path / "pfx")
    code, data = traffic(capsys, root, *(f"mlx5_{i}" for i in range(8)), env=("gcp-b200", "--prefix", pfx, "--project", REPO))
    assert data["env"] == "gcp-b200" and data["traffic"]["returncode"] == 0 and code == 0


# -- docs ------------------------------------------------------------------------------------------------
def test_every_finding_id_is_documented():
    from deepep_env.doctor.catalog import all_ids

    doc = (REPO / "docs" / "doctor.md").read_text()
    table_ids = set(re.findall(r"^\| `([a-z0-9.-]+)` \|", doc, re.M))
    assert set(all_ids()) == table_ids, (set(all_ids()) ^ table_ids)
