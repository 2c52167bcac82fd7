"""Refusals of `publish` name the real cause and a next step that works (issue 56): a placeholder
channel is refused before any network attempt, and the step it names (`--to`) publishes."""
from __future__ import annotations

import time

from publish_fixtures import write_manifest

from cli_runner import REPO, cli_in_process


def test_placeholder_publish_url_is_refused_at_once_and_to_works(tmp_path, pkgs, no_creds, capsys):
    state = tmp_path / "state"
    write_manifest(state, "h200-nvlink", pkgs.root / "a", [pkgs.linux, pkgs.noarch])
    t0 = time.monotonic()
    rc, out, err = cli_in_process(capsys, "publish", "h200-nvlink", "--state", state, "--project", REPO)
    assert time.monotonic() - t0 < 5
    assert rc == 2 and out == ""
    assert "publish_url: https://conda.deepep-env.example/h200 is a placeholder" in err
    assert "no network attempt made" in err and "`deepep-env publish h200-nvlink --to URL`" in err
    # an explicit placeholder --to is refused the same way, naming --to
    rc, _, err = cli_in_process(capsys, "publish", "h200-nvlink", "--to", "https://chan.team.example/x",
                                "--state", state, "--project", REPO)
    assert rc == 2 and err.startswith("deepep-env: error: --to: https://chan.team.example/x is a placeholder")
    # the step it names: --to a real channel (a folder, offline)
    chan = tmp_path / "chan"
    rc, out, err = cli_in_process(capsys, "publish", "h200-nvlink", "--to", chan.as_uri(), "--state", state,
                                  "--project", REPO)
    assert rc == 0, err
    assert (chan / "linux-64" / pkgs.linux.name).is_file()
