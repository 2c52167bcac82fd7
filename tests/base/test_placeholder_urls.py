"""A URL on a name reserved for examples (RFC 2606/6761: ``.example``, ``.invalid``, ``.test``,
``.localhost``, ``example.com/.net/.org``) is a placeholder: nothing is ever published there. The specs'
``publish_url`` is one until a team sets its own, so install and lock say so instead of reporting a DNS
failure (or waiting for the resolver's timeout)."""
from __future__ import annotations

import pytest

from deepep_env.base.channels.urls import placeholder_host


@pytest.mark.parametrize("url, host", [
    ("https://conda.deepep-env.example/gcp-b200", "conda.deepep-env.example"),
    ("https://conda.deepep-env.invalid/lt-host/linux-64/x.conda", "conda.deepep-env.invalid"),
    ("http://channel.test:8080/ch", "channel.test"),
    ("https://EXAMPLE.COM/ch", "example.com"),
    ("https://conda.example.org./ch", "conda.example.org"),
    ("http://foo.localhost/ch", "foo.localhost"),
])
def test_reserved_names_are_placeholders(url, host):
    assert placeholder_host(url) == host


@pytest.mark.parametrize("url", [
    "https://conda.anaconda.org/conda-forge", "https://prefix.dev/deepep", "http://127.0.0.1:8000/ch",
    "file:///srv/channel", "https://example.company.com/ch", "https://notexample.com/ch", "https://[::1/ch",
    "https://testing.net/ch",
])
def test_real_hosts_are_not(url):
    assert placeholder_host(url) is None
