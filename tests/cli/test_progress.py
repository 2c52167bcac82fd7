"""Progress on long transfers (issue 56): fetch's downloads and publish's uploads report their bytes
(base/progress.py); the CLI shows rich bars on a terminal only, never in a pipe or with --quiet."""
from __future__ import annotations

import os
import pty
import subprocess
from pathlib import Path

from channel_server import ChannelServer
from cli_runner import cli_argv, cli_env, cli_subprocess
from publish_fixtures import no_creds_env

from deepep_env.base.progress import reporting


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def start(self, label, total) -> None:
        self.events.append(("start", label, total))

    def advance(self, label, nbytes) -> None:
        self.events.append(("advance", label, nbytes))

    def finish(self, label) -> None:
        self.events.append(("finish", label))


def test_fetch_download_reports_bytes(tmp_path):
    from deepep_env.sources.fetch import _download

    (tmp_path / "srv").mkdir()
    (tmp_path / "srv" / "src.tar.gz").write_bytes(os.urandom(3 << 20))
    srv = ChannelServer(tmp_path / "srv")
    try:
        rec = Recorder()
        with reporting(rec):
            _download(f"{srv.url}/src.tar.gz", tmp_path / "out")
    finally:
        srv.close()
    assert rec.events[0] == ("start", "src.tar.gz", 3 << 20) and rec.events[-1] == ("finish", "src.tar.gz")
    assert sum(e[2] for e in rec.events if e[0] == "advance") == 3 << 20


def _on_a_tty(args: list, cwd: Path) -> tuple[int, str]:
    """Run the CLI with stdout and stderr on a pseudo-terminal; what the terminal received."""
    master, slave = pty.openpty()
    env = cli_env(dict(no_creds_env(), COLUMNS="120", TERM="xterm"))
    p = subprocess.Popen(cli_argv(*args), stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env, cwd=cwd)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return p.wait(timeout=120), b"".join(chunks).decode("utf-8", "replace")


def test_publish_shows_bars_on_a_terminal_only(tmp_path, pkgs):
    args = ["publish", "--package", pkgs.linux, "--package", pkgs.noarch]
    rc, seen = _on_a_tty([*args, "--to", (tmp_path / "a").as_uri()], tmp_path)
    assert rc == 0, seen
    assert "uploaded (total)" in seen and "uploaded" in seen
    rc, seen = _on_a_tty([*args, "--to", (tmp_path / "b").as_uri(), "--quiet"], tmp_path)
    assert rc == 0 and "(total)" not in seen
    r = cli_subprocess(*args, "--to", (tmp_path / "c").as_uri(), env=no_creds_env())
    assert r.returncode == 0 and "(total)" not in r.stdout + r.stderr
