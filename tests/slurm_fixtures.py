"""A real Slurm for tests/launch/test_launch_slurm.py: slurmctld and two slurmd (nodes n0, n1) on this
host, on 127.0.0.1, every file in a private temp folder; started by the fixture and always stopped.

What this machine's Slurm (Debian's slurm-wlm 22.05, `.ci/setup-slurm.sh`) needs, learnt by running it:
- two slurmd on one host work (`slurmd -N n0`, `-N n1`, a Port each, %n in spool/log/pid paths);
- GRES `gpu` by count alone (no File=) is dropped by slurmd ("file-less GPU") and the node goes INVAL,
  so gres.conf names 8 empty files in the temp folder: Slurm only stats them (task/none, no cgroups);
- auth/none and cred/none are built in, so no munged is needed for a one-host cluster;
- a TaskProlog prints ``export DEEPEP_ENV_HOST_ROOT=$DEEPEP_TEST_HOST_ROOTS/$SLURMD_NODENAME``: each node
  sees its own captured host tree, as a real node sees its own /.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

import pytest

from launch_fixtures import free_port

NODES = ("n0", "n1")
PARTITION = "deepep"
BINARIES = ("slurmctld", "slurmd", "sbatch", "srun", "scontrol", "sinfo", "squeue", "scancel")
SBIN_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/bin"])
START_TIMEOUT = 30
JOB_TIMEOUT = 180          # a hung job fails the test instead of hanging CI; not a timing check
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
            "PREEMPTED")
ROOTS_VAR = "DEEPEP_TEST_HOST_ROOTS"


def missing() -> Optional[str]:
    """Why a real Slurm cannot run here, in one line, or None."""
    absent = [b for b in BINARIES if not shutil.which(b, path=SBIN_PATH)]
    if absent:
        return f"Slurm is not installed ({', '.join(absent)} not found; run .ci/setup-slurm.sh)"
    if os.geteuid() != 0:
        return "slurmd must run as root here (SlurmUser=root); run the Slurm tests as root, as CI does"
    return None


def slurm_conf(d: Path, ctld_port: int, node_ports: dict[str, int]) -> str:
    nodes = [f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={p} CPUs=2 RealMemory=1000 Gres=gpu:8 "
             "State=UNKNOWN" for n, p in node_ports.items()]
    return "\n".join([
        "ClusterName=deepeptest",
        "SlurmctldHost=localhost(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={next(iter(node_ports.values()))}",
        "SlurmUser=root", "SlurmdUser=root",
        "AuthType=auth/none", "CredType=cred/none",
        f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/spool/%n",
        f"SlurmctldPidFile={d}/slurmctld.pid", f"SlurmdPidFile={d}/slurmd-%n.pid",
        f"SlurmctldLogFile={d}/log/slurmctld.log", f"SlurmdLogFile={d}/log/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none", "MpiDefault=none", "SwitchType=switch/none",
        "GresTypes=gpu", "SlurmdParameters=config_overrides", "ReturnToService=2",
        "InactiveLimit=0", "KillWait=2", "MinJobAge=600", "SlurmdTimeout=60",
        f"TaskProlog={d}/task-prolog.sh",
        *nodes,
        f"PartitionName={PARTITION} Nodes={','.join(node_ports)} Default=YES MaxTime=10 State=UP",
        "",
    ])


@dataclass
class SlurmCluster:
    dir: Path
    conf: Path
    nodes: tuple[str, ...]
    procs: list[subprocess.Popen] = field(default_factory=list)

    def environ(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_", "DEEPEP_ENV_"))
               or k == "DEEPEP_ENV_STATE"}
        env["PATH"] = SBIN_PATH
        env["SLURM_CONF"] = str(self.conf)
        env.update(extra)
        return env

    def cmd(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env=self.environ(), capture_output=True, text=True, timeout=60, check=check)

    def sbatch(self, script: Path, cwd: Path, env: dict[str, str]) -> str:
        p = subprocess.run(["sbatch", "--parsable", str(script)], cwd=cwd, env=env, capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0, p.stderr
        return p.stdout.strip().split(";")[0]

    def job(self, job_id: str) -> dict[str, str]:
        """``scontrol show job -o`` as fields (the job stays known MinJobAge seconds after it ends)."""
        line = self.cmd("scontrol", "show", "job", "-o", job_id).stdout
        return dict(w.split("=", 1) for w in line.split() if "=" in w)

    def wait(self, job_id: str, timeout: float = JOB_TIMEOUT) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while True:
            fields = self.job(job_id)
            if fields.get("JobState") in TERMINAL:
                return fields
            if time.monotonic() > deadline:
                self.cmd("scancel", job_id, check=False)
                pytest.fail(f"job {job_id} still {fields.get('JobState')} after {timeout} s\n{self.logs()}")
            time.sleep(0.5)

    def logs(self) -> str:
        return "\n".join(f"== {f.name}\n" + "\n".join(f.read_text(errors="replace").splitlines()[-15:])
                         for f in sorted((self.dir / "log").glob("*.log")))


def _start(c: SlurmCluster, argv: list[str], name: str) -> None:
    out = open(c.dir / "log" / f"{name}.out", "wb")
    with out:
        c.procs.append(subprocess.Popen(argv, env=c.environ(), stdout=out, stderr=subprocess.STDOUT,
                                        start_new_session=True))


def _until(what: str, c: SlurmCluster, ready) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not ready():
        if time.monotonic() > deadline or any(p.poll() is not None for p in c.procs):
            pytest.fail(f"Slurm: {what} not ready in {START_TIMEOUT} s\n{c.logs()}")
        time.sleep(0.3)


def _idle(c: SlurmCluster) -> bool:
    p = c.cmd("sinfo", "-h", "-N", "-o", "%N %t", check=False)
    states = dict(ln.split() for ln in p.stdout.splitlines() if len(ln.split()) == 2)
    return all(states.get(n) == "idle" for n in c.nodes)


def _stop(c: SlurmCluster) -> None:
    """Cancel what is left, then stop the daemons started here (their own process groups only)."""
    if c.procs and c.procs[0].poll() is None:
        c.cmd("scancel", f"--partition={PARTITION}", check=False)
        deadline = time.monotonic() + 20
        while c.cmd("squeue", "-h", check=False).stdout.strip() and time.monotonic() < deadline:
            time.sleep(0.5)
    for p in reversed(c.procs):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def start_cluster(d: Path) -> Iterator[SlurmCluster]:
    for sub in ("state", "spool", "log", "gpus"):
        (d / sub).mkdir()
    for i in range(8):
        (d / "gpus" / f"gpu{i}").write_text("")
    ports = {n: free_port() for n in NODES}
    conf = d / "slurm.conf"
    conf.write_text(slurm_conf(d, free_port(), ports))
    (d / "gres.conf").write_text(f"Name=gpu Count=8 File={d}/gpus/gpu[0-7]\n")
    prolog = d / "task-prolog.sh"
    prolog.write_text("#!/bin/sh\n"
                      f'if [ -n "${{{ROOTS_VAR}:-}}" ]; then '
                      f'echo "export DEEPEP_ENV_HOST_ROOT=${{{ROOTS_VAR}}}/$SLURMD_NODENAME"; fi\n'
                      "exit 0\n")
    prolog.chmod(0o755)
    c = SlurmCluster(dir=d, conf=conf, nodes=NODES)
    try:
        _start(c, ["slurmctld", "-D", "-i", "-f", str(conf)], "slurmctld")
        _until("slurmctld", c, lambda: "UP" in c.cmd("scontrol", "ping", check=False).stdout)
        for n in NODES:
            _start(c, ["slurmd", "-D", "-f", str(conf), "-N", n], f"slurmd-{n}")
        _until("slurmd " + ", ".join(NODES), c, lambda: _idle(c))
        yield c
    finally:
        _stop(c)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory) -> Iterator[SlurmCluster]:
    reason = missing()
    if reason:
        pytest.skip(reason)
    # A short folder: slurmd's step sockets live under SlurmdSpoolDir (108-byte socket path limit).
    yield from start_cluster(tmp_path_factory.mktemp("slurm"))


def slurm_version() -> str:
    return subprocess.run(["sinfo", "-V"], env={"PATH": SBIN_PATH}, capture_output=True, text=True).stdout.strip()
