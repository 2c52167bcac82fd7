"""Shared helpers for tests/test_launch_*.py: a fake node (stand-in test program, fake
`deepep-env run`, fake srun/scontrol), running per-node commands at once on loopback, and reading
what every rank of the stand-in saw."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from deepep_env.launch import EnvInfo

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "launch"
STANDIN = FIXTURES / "standin.py"
RUN_TIMEOUT = 300  # a hung rendezvous fails the test instead of hanging CI; not a timing check

# Arguments that a shell would mangle if the launch re-parsed them anywhere.
AWKWARD_ARGS = ["--tag", "it's a \"quoted\" word", "$HOME", "$(echo pwned)", "$(MASTER_ADDR)", "`id`", "a;b", "",
                "-x y", "*", "$$", "$", "\\n", "line\nbreak"]


def have_torch() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


# torch.distributed with gloo (as DeepEP's tests use torch.distributed) when torch is installed,
# and the plain-socket rendezvous always.
BACKENDS = [
    pytest.param("gloo", marks=pytest.mark.skipif(not have_torch(), reason="torch not installed (pip install torch)")),
    "socket",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_info(name: str = "gke-a4", platforms=("gke-a4",), env=()) -> EnvInfo:
    return EnvInfo(name=name, version="2025.10.0", platforms=tuple(platforms), env=tuple(env))


@dataclass
class FakeNode:
    """What a node needs for a real launch of the stand-in through the rendered commands."""

    bin: Path
    prefix: Path
    out: Path

    def environ(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "CONDA_PREFIX")
               and not k.startswith("SLURM_")}
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        env["FAKE_DEEPEP_PREFIX"] = str(self.prefix)
        env["PYTHONPATH"] = str(REPO)
        env.update(extra)
        return env


def make_fake_node(tmp: Path) -> FakeNode:
    """A bin dir with fake `deepep-env`, `srun`, `scontrol` and a `python` that is this interpreter,
    and a fake env prefix whose share/deep-ep/tests/test_*.py are the stand-in."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for name in ("deepep-env", "srun", "scontrol"):
        shutil.copy(FIXTURES / "bin" / name, bin_dir / name)
        (bin_dir / name).chmod(0o755)
    # A wrapper, not a symlink: a venv interpreter reached through a symlink elsewhere loses its venv.
    (bin_dir / "python").write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    (bin_dir / "python").chmod(0o755)
    tests = tmp / "prefix" / "share" / "deep-ep" / "tests"
    tests.mkdir(parents=True)
    for script in ("test_internode.py", "test_low_latency.py", "test_intranode.py"):
        shutil.copy(STANDIN, tests / script)
    return FakeNode(bin=bin_dir, prefix=tmp / "prefix", out=tmp / "out")


def run_all(commands: list[tuple[list[str], dict[str, str]]]) -> list[subprocess.CompletedProcess]:
    """Start every (argv, env) at once — they are the nodes of one job — and wait for all."""
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True) for argv, env in commands]
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=RUN_TIMEOUT)
            results.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)  # only the groups started here
                p.wait()
    return results


def kubelet_expand(word: str, env: dict[str, str]) -> str:
    """What the kubelet does to a container's command/args/env values (Kubernetes
    third_party/forked/golang/expansion/expand.go): `$$` -> `$`, `$(NAME)` -> env[NAME] if
    defined else left as is, any other `$` literal."""
    out, i = [], 0
    while i < len(word):
        c = word[i]
        if c == "$" and i + 1 < len(word):
            nxt = word[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = word.find(")", i + 2)
                if end != -1:
                    name = word[i + 2:end]
                    out.append(env.get(name, f"$({name})"))
                    i = end + 1
                    continue
                out.append("$(")
                i += 2
                continue
            out.append("$" + nxt)
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def kubelet_env(container: dict, index: int) -> dict[str, str]:
    """The environment the kubelet gives ``container`` in the pod of completion index ``index``:
    fieldRefs to the completion-index annotation resolve to ``index``; values are expanded in order."""
    env: dict[str, str] = {}
    for e in container["env"]:
        if "valueFrom" in e:
            path = e["valueFrom"]["fieldRef"]["fieldPath"]
            assert path == "metadata.annotations['batch.kubernetes.io/job-completion-index']", path
            env[e["name"]] = str(index)
        else:
            env[e["name"]] = kubelet_expand(e["value"], env)
    return env


def shell_blocks(text: str) -> list[str]:
    """The per-node blocks of a `--target shell` rendering, in node order."""
    blocks, cur = [], None
    for line in text.splitlines():
        if line.startswith("# ---- node "):
            cur = []
            blocks.append(cur)
        elif cur is not None and line.strip():
            cur.append(line)
        elif cur is not None:
            cur = None
    return ["\n".join(b) for b in blocks]


def read_results(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("rank*.json"), key=lambda p: int(p.stem[4:]))]


def assert_launch_ok(procs, out: Path, *, nodes: int, nlocal: int, addr: str, port: int, args: list[str],
                     run_env: str | None = "gke-a4", prefix: Path | None = None, backend: str | None = None) -> list[dict]:
    for p in procs:
        assert p.returncode == 0, f"rc={p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    res = read_results(out)
    assert [r["global_rank"] for r in res] == list(range(nodes * nlocal))
    for r in res:
        assert r["ok"], r["problems"]
        assert r["reached_rank0"] and r["peers"] == nodes * nlocal
        assert r["vars"] == {"MASTER_ADDR": addr, "MASTER_PORT": port, "WORLD_SIZE": nodes,
                             "RANK": r["global_rank"] // nlocal}
        assert r["argv"] == args  # TEST_ARGS arrived verbatim
        if run_env is not None:
            assert r["run_env"] == run_env
        if prefix is not None:
            assert r["conda_prefix"] == str(prefix)
        if backend is not None:
            assert r["backend"] == backend
    assert sorted({r["node_rank"] for r in res}) == list(range(nodes))
    return res


def standin_args(out: Path, *, nodes: int, addr: str, port: int, backend: str, nlocal: int = 2) -> list[str]:
    return ["--out", str(out), "--num-processes", str(nlocal), "--backend", backend,
            "--expect-master-addr", addr, "--expect-master-port", str(port), "--expect-world-size", str(nodes),
            *AWKWARD_ARGS]


def node_tool(tmp_path: Path) -> Path:
    """deepep-env as the simulated nodes call it (the Slurm launcher's and the fleet preflight's tests): the
    real CLI, but doctor checks the host only (the nodes have no installed env; their host is
    DEEPEP_ENV_HOST_ROOT, set per node)."""
    t = tmp_path / "deepep-env-node"
    t.write_text("#!/bin/bash\n"
                 'if [ "$1" = doctor ]; then shift 2; set -- doctor "$@"; fi\n'
                 f'exec {sys.executable} -m deepep_env.cli.main "$@"\n')
    t.chmod(0o755)
    return t
