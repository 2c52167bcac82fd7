"""Fixtures for the publish tests: real tiny packages (rattler-build), real servers on 127.0.0.1
(nginx with WebDAV + basic auth + token auth, moto's S3, quetz), and ``Captured``: runs the CLI
(through cli_runner) and helper scripts, keeping every line it captured on disk so the secret-grep
test can read it.

Servers run as subprocesses: py-rattler-build's upload calls hold the interpreter.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cli_runner import cli_subprocess

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "publish"

# One secret set per test session. DEEPEP_ENV_TEST_TOKEN (or a DEEPEP_ENV_CHANNEL_TOKEN already set
# for the test run) lets an outside check choose the token it will grep for afterwards.
TOKEN = (os.environ.get("DEEPEP_ENV_TEST_TOKEN") or os.environ.get("DEEPEP_ENV_CHANNEL_TOKEN")
         or f"dpep-tok-{secrets.token_hex(16)}")
USER = "builder"
PASSWORD = os.environ.get("DEEPEP_ENV_TEST_PASSWORD") or f"dpep-pw-{secrets.token_hex(12)}"
# A second account for the tests that must write a credential file (RATTLER_AUTH_FILE is a file by
# definition): its password is not one of the secrets the grep looks for, and the file is deleted.
FILE_USER = "reader"
FILE_PASSWORD = f"dpep-file-pw-{secrets.token_hex(12)}"
CRED_ENV_VARS = ("DEEPEP_ENV_CHANNEL_TOKEN", "DEEPEP_ENV_CHANNEL_USER", "DEEPEP_ENV_CHANNEL_PASSWORD",
                 "DEEPEP_ENV_CHANNEL_HOSTS", "RATTLER_AUTH_FILE", "AWS_ACCESS_KEY_ID",
                 "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "DEEPEP_ENV_S3_ENDPOINT_URL",
                 "AWS_ENDPOINT_URL", "NETRC")


def secret_strings() -> list[str]:
    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    return [TOKEN, PASSWORD, basic]


# ---------------------------------------------------------------------------------------------
# packages


@dataclass
class Packages:
    root: Path
    linux: Path  # tinypkg 1.0.0 linux-64
    noarch: Path  # tinydata 1.0.0 noarch
    linux_other: Path  # tinypkg 1.0.0, same file name as `linux`, different bytes
    big: Path  # bigpkg with 2 MB of random data (for the dropped-connection test)


def make_packages(root: Path) -> Packages:
    """Real packages from rattler-build (no channels, host tools only), built in a subprocess."""
    proc = subprocess.run([sys.executable, str(FIXTURES / "build_packages.py"), str(root)],
                          capture_output=True, text=True, timeout=600, env=no_creds_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    paths = json.loads(proc.stdout.strip().splitlines()[-1])
    return Packages(root=root, **{k: Path(v) for k, v in paths.items()})


def write_manifest(state: Path, env: str, channel: Path, files: list[Path]) -> Path:
    """A build manifest as `deepep-env build` writes it (contract: deepep-env/build-manifest/v1)."""
    from rattler.package import IndexJson

    from deepep_env.base.hashing import file_sha256

    pkgs = []
    for f in files:
        idx = IndexJson.from_package_archive(f)
        pkgs.append({"name": idx.name.normalized, "version": str(idx.version), "build": str(idx.build),
                     "subdir": str(idx.subdir), "file": str(f.relative_to(channel)),
                     "build_id": file_sha256(f), "sha256": file_sha256(f)})
    path = state / "builds" / f"{env}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": "deepep-env/build-manifest/v1", "env": env,
                                "channel": str(channel), "packages": pkgs}, indent=1))
    return path


# ---------------------------------------------------------------------------------------------
# processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, what: str, log: Path | None = None, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            detail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
            raise RuntimeError(f"{what} exited with {proc.returncode}: {detail}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout} s")


def stop(proc: subprocess.Popen | None, *, group: bool = False) -> None:
    """Stop a server; ``group``: it was started in a session of its own (``start_new_session``), so its
    children (quetz's multiprocessing workers) go too — the suite leaves no process behind."""
    if proc is None:
        return
    if group:
        import signal

        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)   # the group outlives its leader: children are reached too
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                continue
        return
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def no_creds_env(**extra: str) -> dict[str, str]:
    """The environment for a subprocess: no credentials inherited, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in CRED_ENV_VARS}
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


@dataclass
class Captured:
    """Runs the CLI and helper scripts as subprocesses, keeping every captured line on disk."""

    log_dir: Path
    runs: list[Path] = field(default_factory=list)

    def _keep(self, name: str, proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        path = self.log_dir / f"{len(self.runs):03d}-{name}.txt"
        # The command line is the test's own input (some tests put a secret in a URL on purpose):
        # it is recorded scrubbed; stdout/stderr are recorded as the tool printed them.
        args = " ".join(map(str, proc.args))
        for secret in secret_strings():
            args = args.replace(secret, "<secret>")
        path.write_text(f"$ {args}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}\n")
        self.runs.append(path)
        return proc

    def cli(self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess:
        """`deepep-env ARGS…` (cli_runner's subprocess mode; no credentials inherited), kept on disk."""
        proc = cli_subprocess(*args, env=env or no_creds_env(), cwd=cwd, timeout=timeout)
        return self._keep(str(args[0]), proc)

    def solve_install(self, url: str, spec: str, prefix: Path, lockfile: Path, cache: Path,
                      env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, dict]:
        proc = subprocess.run([sys.executable, str(FIXTURES / "solve_install.py"), url, spec, str(prefix),
                               str(lockfile), str(cache)], env=env or no_creds_env(), capture_output=True,
                              text=True, timeout=300)
        self._keep("solve-install", proc)
        last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "{}"
        return proc, json.loads(last)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The CLI's contract for failures: non-zero exit, exactly one line on stderr, no traceback."""
    assert proc.returncode != 0, proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


# ---------------------------------------------------------------------------------------------
# nginx


def nginx_binary() -> str | None:
    for cand in (shutil.which("nginx"), "/usr/sbin/nginx"):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def require_nginx() -> str:
    """nginx, installing it with .ci/setup-nginx.sh when missing. Missing nginx fails the test
    (a private-channel test that silently skips proves nothing) unless DEEPEP_ENV_SKIP_NGINX=1."""
    binary = nginx_binary()
    if binary is None and (REPO / ".ci" / "setup-nginx.sh").is_file() and os.environ.get("DEEPEP_ENV_SKIP_NGINX") != "1":
        subprocess.run(["sh", str(REPO / ".ci" / "setup-nginx.sh")], capture_output=True, timeout=300)
        binary = nginx_binary()
    if binary is None:
        if os.environ.get("DEEPEP_ENV_SKIP_NGINX") == "1":
            pytest.skip("nginx not installed and DEEPEP_ENV_SKIP_NGINX=1")
        pytest.fail("nginx is not installed: run .ci/setup-nginx.sh (apt-get install nginx-light), "
                    "or set DEEPEP_ENV_SKIP_NGINX=1 to skip the private-channel server tests")
    return binary


def ssha(password: str) -> str:
    """An htpasswd entry in the salted-SHA1 scheme nginx accepts (no plaintext on disk)."""
    salt = secrets.token_bytes(8)
    return "{SSHA}" + base64.b64encode(hashlib.sha1(password.encode() + salt).digest() + salt).decode()


NGINX_CONF = """\
daemon off;
master_process off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log {dir}/access.log;
    client_body_temp_path {dir}/tmp/body;
    proxy_temp_path {dir}/tmp/proxy;
    fastcgi_temp_path {dir}/tmp/fastcgi;
    uwsgi_temp_path {dir}/tmp/uwsgi;
    scgi_temp_path {dir}/tmp/scgi;
    client_max_body_size 0;
    default_type application/octet-stream;
    types {{ application/json json; }}
    server {{
        listen 127.0.0.1:{port};
        root {root};
        # basic auth: nginx's own module, password stored salted-hashed
        location /basic/ {{
            auth_basic "deepep-env test channel";
            auth_basic_user_file {dir}/htpasswd;
            dav_methods PUT DELETE MKCOL;
            create_full_put_path on;
            dav_access user:rw group:r all:r;
        }}
        # bearer tokens: checked by a sidecar that holds only sha256 digests
        location /bearer/ {{
            auth_request /_auth;
            dav_methods PUT DELETE MKCOL;
            create_full_put_path on;
            dav_access user:rw group:r all:r;
        }}
        location = /_auth {{
            internal;
            proxy_pass http://127.0.0.1:{sidecar}/check;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
        }}
        # read-only, no auth: where a stale-index fixture can be seeded
        location /open/ {{
            dav_methods PUT DELETE MKCOL;
            create_full_put_path on;
        }}
    }}
}}
"""


@dataclass
class Nginx:
    dir: Path
    port: int
    root: Path
    proc: subprocess.Popen
    sidecar: subprocess.Popen

    def url(self, area: str, channel: str) -> str:
        return f"http://127.0.0.1:{self.port}/{area}/{channel}"

    def path(self, area: str, channel: str) -> Path:
        return self.root / area / channel

    def close(self) -> None:
        stop(self.proc)
        stop(self.sidecar)


@pytest.fixture(scope="module")
def nginx(tmp_path_factory):
    """One nginx channel server per test module that asks for it (import this fixture)."""
    server = start_nginx(tmp_path_factory.mktemp("nginx"))
    yield server
    server.close()


def start_nginx(base: Path) -> Nginx:
    binary = require_nginx()
    base.mkdir(parents=True, exist_ok=True)
    (base / "tmp").mkdir(exist_ok=True)
    root = base / "www"
    for area in ("basic", "bearer", "open"):
        (root / area).mkdir(parents=True, exist_ok=True)
    (base / "htpasswd").write_text(f"{USER}:{ssha(PASSWORD)}\n{FILE_USER}:{ssha(FILE_PASSWORD)}\n")
    accepted = [
        hashlib.sha256(f"Bearer {TOKEN}".encode()).hexdigest(),
    ]
    side_port = free_port()
    sidecar = subprocess.Popen([sys.executable, str(FIXTURES / "auth_sidecar.py"), str(side_port), *accepted],
                               stdout=subprocess.DEVNULL, stderr=open(base / "sidecar.log", "wb"))
    wait_port(side_port, sidecar, "auth sidecar", base / "sidecar.log")
    for _attempt in range(5):
        port = free_port()
        conf = base / "nginx.conf"
        text = NGINX_CONF.format(dir=base, port=port, root=root, sidecar=side_port)
        if os.geteuid() == 0:
            # As root nginx would switch to `nobody`, which cannot write into a 0700 tmp dir.
            text = "user root;\n" + text
        conf.write_text(text)
        proc = subprocess.Popen([binary, "-p", str(base), "-c", str(conf), "-e", str(base / "error.log")],
                                stdout=subprocess.DEVNULL, stderr=open(base / "stderr.log", "wb"))
        try:
            wait_port(port, proc, "nginx", base / "error.log", timeout=15)
            return Nginx(base, port, root, proc, sidecar)
        except RuntimeError:
            stop(proc)
            if "Address already in use" not in (base / "error.log").read_text(errors="replace"):
                stop(sidecar)
                raise
    stop(sidecar)
    raise RuntimeError("nginx: no free port after 5 attempts")


# ---------------------------------------------------------------------------------------------
# S3 (moto) and quetz


def moto_command() -> list[str] | None:
    exe = shutil.which("moto_server")
    if exe:
        return [exe]
    probe = subprocess.run([sys.executable, "-c", "import moto.server"], capture_output=True)
    if probe.returncode == 0:
        return [sys.executable, "-m", "moto.server"]
    return None


QUETZ_REQUIREMENTS = Path(__file__).parent / "fixtures" / "quetz-requirements.txt"
QUETZ_SETUP = ".ci/setup-quetz.sh"


def quetz_venv() -> Path | None:
    """The venv with quetz-server that ``.ci/setup-quetz.sh`` made from the pinned requirements (the
    tests install nothing). None when there is none for these pins, or DEEPEP_ENV_SKIP_QUETZ=1."""
    if os.environ.get("DEEPEP_ENV_SKIP_QUETZ") == "1":
        return None
    venv = Path(os.environ.get("DEEPEP_ENV_QUETZ_VENV") or "/tmp/deepep-env-quetz-venv")
    stamp = venv / "requirements.txt"
    if stamp.is_file() and stamp.read_bytes() == QUETZ_REQUIREMENTS.read_bytes() and (venv / "bin" / "quetz").exists():
        return venv
    return None


# ---------------------------------------------------------------------------------------------
# pytest fixtures (import the ones you use into the test module)

_PACKAGES: Packages | None = None


@pytest.fixture(scope="session")
def pkgs(tmp_path_factory) -> Packages:
    """The test packages, built once per session."""
    global _PACKAGES
    if _PACKAGES is None:
        _PACKAGES = make_packages(tmp_path_factory.mktemp("publish-pkgs"))
    return _PACKAGES


@pytest.fixture
def no_creds(monkeypatch, tmp_path):
    """No credential from the developer's environment (variables, ~/.rattler, ~/.netrc) leaks
    into a test; subprocesses inherit the same clean view through no_creds_env()."""
    for var in CRED_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))


@pytest.fixture
def captured(tmp_path) -> Captured:
    return Captured(tmp_path / "captured")
