"""`lock all --only deepep-env` keeps each environment's own channel URL for the tool package.

Found locking gcp-b200 (publish_url …/gcp-b200) beside the h200 environments (…/h200), 2026-11-28:
one RepoDataRecord was shared by every environment's swap, so each took the URL written last, and
`lock gcp-b200 --check` said `url-outside-channels`. Real lock, real tool build (offline), a copy of
the committed pixi.lock in which every environment locks an older tool build."""
from __future__ import annotations

import re

import yaml

from cli_runner import cli_in_process


def test_every_environment_keeps_its_channel(repo_root, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DEEPEP_ENV_STATE", str(tmp_path / "state"))
    lock = tmp_path / "pixi.lock"
    text = (repo_root / "pixi.lock").read_text()
    old = sorted(set(re.findall(r"deepep-env-0\.2\.0-(h[0-9a-f]{10}_0)\.conda", text)))
    assert len(old) == 1, old
    lock.write_text(text.replace(old[0], "h0000000000_0"))   # every env locks a build this checkout is not
    record = repo_root / "lockfiles" / "build-inputs.json"
    before = (record.read_bytes(), record.stat().st_mtime_ns, record.stat().st_ino)
    rc, out, err = cli_in_process(capsys, "lock", "all", "--only", "deepep-env", "--output", lock,
                                  "--project", repo_root)
    assert rc == 0 and "re-locked at" in out, err
    # the lock went to --output: the project's build-inputs record is not rewritten (it was, found 2026-11-28:
    # the checkout's record changed whenever deepep-env's own code had moved since the last relock)
    assert (record.read_bytes(), record.stat().st_mtime_ns, record.stat().st_ino) == before
    doc = yaml.safe_load(lock.read_text())
    channels = {}
    for env, body in doc["environments"].items():
        if env == "default":
            continue
        chans = [c["url"].rstrip("/") for c in body["channels"]]
        tool = [p["conda"] for pkgs in body["packages"].values() for p in pkgs if "/deepep-env-0.2.0-" in p["conda"]]
        assert tool and all(u.rsplit("/", 2)[0] in chans for u in tool), (env, chans, tool)
        channels[env] = tool[0].rsplit("/", 2)[0]
    assert len(set(channels.values())) > 1          # the case that failed: envs on different channels
