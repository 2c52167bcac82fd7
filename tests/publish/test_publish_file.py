"""`deepep-env publish` to a directory channel (file://), with real rattler-build packages."""
from __future__ import annotations

import json
import re
import shutil

import pytest

from publish_fixtures import Captured, one_error_line, write_manifest

from deepep_env.base.errors import UserError
from deepep_env.publish import ALREADY_PRESENT, UPLOADED, ConflictError, publish
from deepep_env.publish.inputs import manifest_path, read_manifest


def _index(channel, subdir):
    return json.loads((channel / subdir / "repodata.json").read_text())


def _listed(channel, subdir):
    data = _index(channel, subdir)
    return {**data.get("packages", {}), **data.get("packages.conda", {})}


def test_publish_to_dir_indexes_every_touched_subdir(tmp_path, pkgs, no_creds):
    chan = tmp_path / "chan"
    report = publish(None, chan.as_uri(), packages=[pkgs.linux, pkgs.noarch])
    assert [p.status for p in report.packages] == [UPLOADED, UPLOADED]
    assert report.indexed == ["linux-64", "noarch"]
    assert set(_listed(chan, "linux-64")) == {pkgs.linux.name}
    assert set(_listed(chan, "noarch")) == {pkgs.noarch.name}
    assert report.channel_url == chan.as_uri()


def test_publish_again_changes_nothing(tmp_path, pkgs, no_creds):
    chan = tmp_path / "chan"
    publish(None, str(chan), packages=[pkgs.linux, pkgs.noarch])
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in chan.rglob("*") if p.is_file()}
    report = publish(None, str(chan), packages=[pkgs.linux, pkgs.noarch])
    assert [p.status for p in report.packages] == [ALREADY_PRESENT, ALREADY_PRESENT]
    assert report.indexed == [] and not report.changed
    after = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in chan.rglob("*") if p.is_file()}
    assert after == before


def test_different_file_under_published_name_is_refused(tmp_path, pkgs, no_creds):
    chan = tmp_path / "chan"
    publish(None, str(chan), packages=[pkgs.linux])
    original = (chan / "linux-64" / pkgs.linux.name).read_bytes()
    assert pkgs.linux_other.name == pkgs.linux.name and pkgs.linux_other.read_bytes() != original
    with pytest.raises(ConflictError) as err:
        # the clash is detected before anything is written, also for the other (new) package
        publish(None, str(chan), packages=[pkgs.linux_other, pkgs.noarch])
    assert "refusing to overwrite" in str(err.value) and pkgs.linux.name in str(err.value)
    assert (chan / "linux-64" / pkgs.linux.name).read_bytes() == original
    assert not (chan / "noarch" / pkgs.noarch.name).exists()


def test_unlisted_leftover_is_replaced_and_indexed(tmp_path, pkgs, no_creds):
    """A file lying in the channel but not in the index was never published (a run that died
    before indexing): it is replaced, then listed."""
    chan = tmp_path / "chan"
    (chan / "linux-64").mkdir(parents=True)
    (chan / "linux-64" / pkgs.linux.name).write_bytes(b"half a package")
    report = publish(None, str(chan), packages=[pkgs.linux])
    assert report.packages[0].status == UPLOADED
    assert (chan / "linux-64" / pkgs.linux.name).read_bytes() == pkgs.linux.read_bytes()
    assert pkgs.linux.name in _listed(chan, "linux-64")


def test_publish_env_from_build_manifest(tmp_path, pkgs, no_creds, captured: Captured):
    state = tmp_path / "state"
    write_manifest(state, "demo", pkgs.root / "a", [pkgs.linux, pkgs.noarch])
    chan = tmp_path / "chan"
    proc = captured.cli("publish", "demo", "--to", chan.as_uri(), "--state", state, "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["format"] == "deepep-env/publish-report/v1"
    assert data["env"] == "demo" and data["kind"] == "file"
    assert [p["file"] for p in data["packages"]] == [f"linux-64/{pkgs.linux.name}", f"noarch/{pkgs.noarch.name}"]
    assert all(p["build_id"].startswith("sha256:") for p in data["packages"])
    again = captured.cli("publish", "demo", "--to", chan.as_uri(), "--state", state)
    assert again.returncode == 0
    assert "already present" in again.stdout and "index unchanged" in again.stdout


def test_missing_manifest_says_build_first(tmp_path, no_creds, captured: Captured):
    proc = captured.cli("publish", "nothere", "--to", str(tmp_path / "chan"), "--state", tmp_path / "state")
    line = one_error_line(proc)
    assert proc.returncode == 2
    assert "run `deepep-env build nothere` first" in line


@pytest.mark.parametrize("content, message", [
    (b'{"env": ', "not valid JSON (Expecting value at line 1)"),
    (b'{"env": "\xff"}', "not UTF-8 (byte 9)"),   # was an AttributeError: a UnicodeDecodeError has no .msg
    (b'{"n": ' + b"1" * 5000 + b"}", "not valid JSON (Exceeds the limit"),
])
def test_unreadable_manifest_is_one_clear_line(tmp_path, content, message):
    path = manifest_path("demo", tmp_path / "state")
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    with pytest.raises(UserError, match=re.escape(message)):
        read_manifest("demo", tmp_path / "state")


def test_manifest_that_disagrees_with_archive_is_refused(tmp_path, pkgs, no_creds):
    state = tmp_path / "state"
    path = write_manifest(state, "demo", pkgs.root / "a", [pkgs.linux])
    data = json.loads(path.read_text())
    data["packages"][0]["subdir"] = "linux-aarch64"
    path.write_text(json.dumps(data))
    with pytest.raises(UserError, match="subdir"):
        publish("demo", str(tmp_path / "chan"), state=state)


def test_not_a_package_is_one_clear_line(tmp_path, no_creds, captured: Captured):
    bogus = tmp_path / "bogus-1.0-0.conda"
    bogus.write_bytes(b"not a zip")
    proc = captured.cli("publish", "--to", str(tmp_path / "chan"), "--package", bogus)
    assert "cannot read the package" in one_error_line(proc)


def test_url_with_embedded_password_is_refused_without_echoing_it(tmp_path, pkgs, no_creds, captured: Captured):
    proc = captured.cli("publish", "--to", "https://me:hunter2-secret@example.invalid/chan", "--package", pkgs.linux)
    line = one_error_line(proc)
    assert "carries credentials" in line and "hunter2-secret" not in proc.stderr + proc.stdout


def test_installs_from_the_published_dir(tmp_path, pkgs, no_creds, captured: Captured):
    chan = tmp_path / "chan"
    publish(None, str(chan), packages=[pkgs.linux, pkgs.noarch])
    proc, out = captured.solve_install(chan.as_uri(), "tinypkg", tmp_path / "prefix", tmp_path / "pixi.lock",
                                       tmp_path / "cache")
    assert out.get("ok"), proc.stdout + proc.stderr
    assert (tmp_path / "prefix" / "share" / "tinypkg" / "content.txt").read_text().strip() == "first"


def test_unknown_scheme(tmp_path, pkgs, no_creds):
    with pytest.raises(UserError, match="unsupported channel URL scheme"):
        publish(None, "ftp://example.invalid/chan", packages=[pkgs.linux])
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_without_to_publishes_to_the_specs_publish_url(tmp_path, pkgs, no_creds, captured: Captured):
    import re

    from publish_fixtures import REPO

    project = tmp_path / "project"
    (project / "env_specs").mkdir(parents=True)
    text = (REPO / "env_specs" / "h200-nvlink.toml").read_text()
    chan = tmp_path / "team-chan"
    text = re.sub(r'(?m)^publish_url = .*$', "", text)
    text = text.replace("\n[", f'\npublish_url = "{chan.as_uri()}"\n\n[', 1)
    (project / "env_specs" / "h200-nvlink.toml").write_text(text)
    state = tmp_path / "state"
    write_manifest(state, "h200-nvlink", pkgs.root / "a", [pkgs.linux])
    proc = captured.cli("publish", "h200-nvlink", "--project", project, "--state", state)
    assert proc.returncode == 0, proc.stderr
    assert f"channel          {chan.as_uri()}" in proc.stdout
    assert pkgs.linux.name in _listed(chan, "linux-64")


def test_publish_env_ships_its_test_records(tmp_path, pkgs, no_creds, captured: Captured, host_tree):
    """Issue 28: an env's test records go with its packages, to <channel>/verified/ENV/."""
    from verify_fixtures import DEEPEP_OUTPUT, make_project

    from deepep_env.base.project import Project
    from deepep_env.verify.records import record_test

    proj = Project(make_project(tmp_path / "proj"))
    spec = (proj.env_specs / "h200-nvlink.toml").read_text()     # records are of the project's envs only
    (proj.env_specs / "demo.toml").write_text(spec.replace('name = "h200-nvlink"', 'name = "demo"'))
    rec = record_test(proj, "demo", "intranode", [], 0, DEEPEP_OUTPUT, root=str(host_tree("gcp-b200")))
    state = tmp_path / "state"
    write_manifest(state, "demo", pkgs.root / "a", [pkgs.linux, pkgs.noarch])
    chan = tmp_path / "chan"
    proc = captured.cli("publish", "demo", "--to", chan.as_uri(), "--state", state, "--project", proj.root, "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["records"] == [{"file": f"verified/demo/{rec.name}", "status": "uploaded"}]
    assert (chan / "verified" / "demo" / rec.name).read_bytes() == rec.read_bytes()
    again = captured.cli("publish", "demo", "--to", chan.as_uri(), "--state", state, "--project", proj.root)
    assert again.returncode == 0 and f"already present  verified/demo/{rec.name}" in again.stdout
    # a teammate reads what the channel says was verified, against the project's lock
    seen = captured.cli("verified", "--channel", chan.as_uri(), "--project", proj.root, "--json")
    assert seen.returncode == 0, seen.stderr
    (cell,) = json.loads(seen.stdout)["cells"]
    assert (cell["env"], cell["test"], cell["status"]) == ("demo", "intranode", "pass")
    assert cell["newest"]["path"].startswith(str(chan))
    none = captured.cli("verified", "--channel", str(tmp_path / "state"), "--project", proj.root)
    assert none.returncode != 0 and "holds no test records" in none.stderr


def test_a_copy_a_killed_publish_left_is_removed_by_the_next(tmp_path, pkgs, no_creds):
    """Issue 52.12: `publish` killed mid-copy left `.NAME.conda.XXXXXXXX.tmp` in the channel; the next
    publish kept it. A stale one goes (with a note); a fresh one (a copy in flight beside) and other
    hidden files stay."""
    import os
    import time

    from deepep_env.publish.local import STALE_TMP_S

    chan = tmp_path / "chan"
    sd = chan / "linux-64"
    sd.mkdir(parents=True)
    stale = sd / f".{pkgs.linux.name}.abcd_123.tmp"
    fresh = sd / f".{pkgs.linux.name}.zzzz9999.tmp"
    other = sd / ".keep.tmp"
    for f in (stale, fresh, other):
        f.write_bytes(b"half a package")
    old = time.time() - STALE_TMP_S - 60
    os.utime(stale, (old, old))
    os.utime(other, (old, old))
    report = publish(None, str(chan), packages=[pkgs.linux])
    assert not stale.exists() and fresh.exists() and other.exists()
    assert any(stale.name in n and "killed mid-copy" in n for n in report.notes)
    os.utime(fresh, (old, old))
    report = publish(None, str(chan), packages=[pkgs.linux])          # already published: still swept
    assert not fresh.exists() and report.packages[0].status == ALREADY_PRESENT
