"""Symlinks in a recipe folder: what a link names goes into the build id and, as a file, into the
package's info/recipe/ (issue 25.6's shared include). So a link must name a regular file inside the
recipes folder; one out of it (a key, a password file) or one that names nothing is refused in one line
before anything is hashed or built."""
from __future__ import annotations

import os

import pytest

from build_fixtures import sandbox
from cli_runner import cli_subprocess
from deepep_env.base.errors import UserError


@pytest.fixture()
def sb(tmp_path):
    s = sandbox(tmp_path)
    s.fill_cache()
    return s


def test_a_link_to_a_shared_file_is_hashed_by_what_it_names(sb):
    shared = sb.graph / "_include"
    shared.mkdir()
    (shared / "helpers.sh").write_text("echo one\n")
    os.symlink("../_include/helpers.sh", sb.graph / "libgreet" / "helpers.sh")
    first = sb.nodes()["libgreet"].id
    (shared / "helpers.sh").write_text("echo two\n")
    assert sb.nodes()["libgreet"].id != first


@pytest.mark.parametrize("target, needle", [
    ("/etc/passwd", "a symlink out of the recipes folder ('/etc/passwd'"),
    ("../../outside.txt", "a symlink out of the recipes folder ('../../outside.txt'"),
    ("../_include/missing.sh", "which names no regular file"),
    ("..", "which names no regular file"),
])
def test_a_link_out_of_the_recipes_folder_or_to_nothing_is_refused(sb, tmp_path, target, needle):
    (sb.graph.parent / "outside.txt").write_text("secret\n")
    os.symlink(target, sb.graph / "libgreet" / "extra.sh")
    with pytest.raises(UserError) as exc:
        sb.nodes()
    assert needle in str(exc.value) and "libgreet/extra.sh" in str(exc.value)


def test_the_build_command_says_it_in_one_line_and_builds_nothing(sb):
    os.symlink("/etc/passwd", sb.graph / "libgreet" / "extra.sh")
    r = cli_subprocess("build", "--recipes", sb.graph, "--store", sb.store, "--channel", sb.channel,
                       "--source-cache", sb.cache, "--offline")
    assert r.returncode != 0
    assert len(r.stderr.strip().splitlines()) == 1 and "a symlink out of the recipes folder" in r.stderr
    assert not sb.store.exists() or not any(sb.store.iterdir())
