"""Target URLs: which kind each scheme is, what consumers read, and fast failure for servers
that cannot be reached (prefix.dev itself is not reachable from the tests: no internet)."""
from __future__ import annotations

import pytest

from publish_fixtures import Captured, free_port, no_creds_env, one_error_line

from deepep_env.base.errors import UserError
from deepep_env.publish import consumer_url, target_kind
from deepep_env.publish.servers import parse_server_url


@pytest.mark.parametrize("to,kind,reads", [
    ("file:///srv/chan", "file", "file:///srv/chan"),
    ("https://conda.team.example/deepep", "webdav", "https://conda.team.example/deepep"),
    ("artifactory+https://art.example/artifactory/api/conda/team", "artifactory",
     "https://art.example/artifactory/api/conda/team"),
    ("s3://bucket/prefix", "s3", "s3://bucket/prefix"),
    ("quetz+https://quetz.example/deepep", "quetz", "https://quetz.example/get/deepep"),
    ("quetz+http://127.0.0.1:8000/sub/deepep", "quetz", "http://127.0.0.1:8000/sub/get/deepep"),
    ("prefix://team-deepep", "prefix", "https://repo.prefix.dev/team-deepep"),
])
def test_target_kinds(to, kind, reads):
    assert target_kind(to) == kind
    assert consumer_url(to, kind) == reads


def test_server_url_parts():
    q = parse_server_url("quetz+https://quetz.example/base/deepep")
    assert (q.server, q.channel) == ("https://quetz.example/base", "deepep")
    p = parse_server_url("prefix://team")
    assert (p.server, p.channel) == ("https://prefix.dev", "team")
    with pytest.raises(UserError):
        parse_server_url("quetz+https://quetz.example/")


def test_prefix_server_down_one_line(pkgs, no_creds, captured: Captured):
    port = free_port()
    proc = captured.cli("publish", "--to", f"prefix+http://127.0.0.1:{port}/team", "--package", pkgs.linux,
                        env=no_creds_env(DEEPEP_ENV_CHANNEL_TOKEN="t0ken-for-nothing"), timeout=60)
    assert "connection refused" in one_error_line(proc)


def test_quetz_server_down_one_line(pkgs, no_creds, captured: Captured):
    port = free_port()
    proc = captured.cli("publish", "--to", f"quetz+http://127.0.0.1:{port}/deepep", "--package", pkgs.linux,
                        timeout=60)
    assert "connection refused" in one_error_line(proc)
