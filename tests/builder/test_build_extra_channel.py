"""`build --recipes DIR --extra-channel URL`: a credential in the URL is refused before anything is
read (rattler-build records the channels it read in the package and logs them)."""
from __future__ import annotations

import pytest

from cli_runner import cli_in_process

SECRET = "s3cr3t-value-42"


@pytest.mark.parametrize("url", [
    f"https://user:{SECRET}@channels.example.org/private",
    f"https://{SECRET}@channels.example.org/private",
    f"https://channels.example.org/private?token={SECRET}",
    f"https://conda.example.org/t/{SECRET}/private",
])
def test_extra_channel_with_a_secret_is_refused(capsys, tmp_path, url):
    code, out, err = cli_in_process(capsys, "build", "--recipes", str(tmp_path), "--extra-channel", url)
    assert code == 2
    assert err.startswith("deepep-env: error: --extra-channel:") and len(err.strip().splitlines()) == 1
    assert SECRET not in out + err
    assert not any(tmp_path.iterdir())  # nothing written
