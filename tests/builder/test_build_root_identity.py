"""The build root is compiled into the packages, so a moved one is in every build id (issue 25.1: no
input that changes bytes may stay outside the id). The default root adds nothing: every committed id
stays what it was."""
from __future__ import annotations

import os

import pytest

from build_fixtures import REPO, sandbox
from cli_runner import cli_env, cli_subprocess
from deepep_env.base.errors import UserError
from deepep_env.builder import buildroot


@pytest.fixture()
def sb(tmp_path):
    s = sandbox(tmp_path)
    s.fill_cache()
    return s


def _ids(sb) -> dict[str, str]:
    return {p: n.id for p, n in sb.nodes().items()}


def test_a_moved_root_moves_every_id_and_the_default_none(sb, tmp_path, monkeypatch):
    monkeypatch.delenv(buildroot.ENV_VAR, raising=False)
    default = _ids(sb)
    assert all(default.values()) and buildroot.moved() is None
    monkeypatch.setenv(buildroot.ENV_VAR, buildroot.DEFAULT_BUILD_ROOT + "/")    # the same folder, spelt otherwise
    assert _ids(sb) == default
    monkeypatch.setenv(buildroot.ENV_VAR, str(tmp_path / "elsewhere"))
    moved = _ids(sb)
    assert set(moved) == set(default) and all(moved[p] != default[p] for p in default)
    assert all(n.preimage["build_root"] == str(tmp_path / "elsewhere") for n in sb.nodes().values())
    monkeypatch.setenv(buildroot.ENV_VAR, "relative/root")
    with pytest.raises(UserError, match="must be an absolute path"):
        sb.nodes()


def test_a_build_under_a_moved_root_is_another_store_entry_not_a_cache_hit(sb, tmp_path, monkeypatch):
    monkeypatch.setenv(buildroot.ENV_VAR, str(tmp_path / "root-a"))
    first = sb.build()
    assert set(sb.statuses(first).values()) == {"built"}
    monkeypatch.setenv(buildroot.ENV_VAR, str(tmp_path / "root-b"))
    second = sb.build()
    assert set(sb.statuses(second).values()) == {"built"}            # not "cached" under the other root's id
    assert {n.id for n in first.nodes}.isdisjoint({n.id for n in second.nodes})
    monkeypatch.setenv(buildroot.ENV_VAR, str(tmp_path / "root-a"))
    assert set(sb.statuses(sb.build()).values()) == {"cached"}


def test_lock_check_under_a_moved_root_says_why_every_id_differs(tmp_path):
    env = cli_env(DEEPEP_ENV_BUILD_ROOT=str(tmp_path / "moved"))
    r = cli_subprocess("lock", "h200-nvlink", "--check", env=env, cwd=REPO)
    assert r.returncode == 1
    assert "build-id-changed" in (r.stdout + r.stderr)
    assert f"DEEPEP_ENV_BUILD_ROOT={tmp_path / 'moved'} is in every build id" in (r.stdout + r.stderr)
    assert "unset it" in (r.stdout + r.stderr)


def test_install_under_a_moved_root_says_the_root_not_a_stale_lock(tmp_path):
    """Nothing serves the lock's packages (its channel is a placeholder), so install would rebuild them:
    under a moved root it cannot give the lock's ids, and says so in one line with what to do."""
    import shutil

    proj = tmp_path / "proj"
    for d in ("env_specs", "recipes", "lockfiles"):
        shutil.copytree(REPO / d, proj / d, symlinks=True)
    for f in ("pixi.lock", "pixi.toml", "pyproject.toml"):
        shutil.copy2(REPO / f, proj / f)
    env = cli_env(DEEPEP_ENV_BUILD_ROOT=str(tmp_path / "moved"), DEEPEP_ENV_STATE=str(tmp_path / "state"))
    r = cli_subprocess("install", "h200-nvlink", "--project", proj, env=env, cwd=proj, timeout=120)
    assert r.returncode != 0
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"DEEPEP_ENV_BUILD_ROOT={tmp_path / 'moved'} gives every build another id" in r.stderr
    assert "unset DEEPEP_ENV_BUILD_ROOT" in r.stderr
    assert not (proj / ".pixi" / "envs" / "h200-nvlink" / "conda-meta").exists()


@pytest.mark.parametrize("value, needle", [
    ("/", "must not be /"),
    ("//..", "must not be /"),
    ("/tmp/a b", "has characters build scripts do not quote"),
    ("/tmp/x;rm -rf ~", "has characters build scripts do not quote"),
    ("/tmp/quote'd", "has characters build scripts do not quote"),
    ("tmp/rel", "must be an absolute path"),
])
def test_a_build_root_that_build_scripts_cannot_use_is_refused_up_front(monkeypatch, value, needle):
    monkeypatch.setenv(buildroot.ENV_VAR, value)
    with pytest.raises(UserError, match=needle):
        buildroot.moved()


def test_one_folder_has_one_spelling_in_the_id(monkeypatch):
    for same in ("//tmp/deepep-env-build/", "/tmp/./deepep-env-build", "/tmp/x/../deepep-env-build"):
        monkeypatch.setenv(buildroot.ENV_VAR, same)
        assert buildroot.moved() is None
    monkeypatch.setenv(buildroot.ENV_VAR, "//srv//builds/")
    assert buildroot.moved() == "/srv/builds"


# -- issue 39.1: the root is this user's alone --------------------------------------------------------------------


def _not_mine(path) -> None:
    """``path`` given to another user (as root: nobody); skipped where this user cannot give files away."""
    import os

    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    os.chown(path, 65534, 65534)


def test_a_missing_root_is_made_this_users_and_closed_to_others(tmp_path, monkeypatch):
    import os

    monkeypatch.setenv(buildroot.ENV_VAR, str(tmp_path / "a" / "root"))
    old = os.umask(0o002)                     # a user-private group's umask: still closed to others
    try:
        root = buildroot.ensure()
    finally:
        os.umask(old)
    for folder in (root, root.parent):
        assert folder.stat().st_mode & 0o7777 == 0o755 and folder.stat().st_uid == os.geteuid()


@pytest.mark.parametrize("mode", [0o1777, 0o777, 0o1775, 0o757])
def test_a_root_others_can_write_is_refused_and_its_mode_left_as_it_is(tmp_path, monkeypatch, mode):
    """Issue 52.1: a shared root (``/tmp``, a 1777 root deepep-env made before issue 39) was chmod'ed 0755
    in place, also when the build was then refused. Now one line, and nothing of it changes."""
    import os

    root = tmp_path / "root"
    root.mkdir()
    root.chmod(mode)
    if mode & 0o020 and not mode & 0o002:
        os.chown(root, -1, 65534)                # a group that is not this user's own
    monkeypatch.setenv(buildroot.ENV_VAR, str(root))
    with pytest.raises(UserError) as err:
        buildroot.ensure()
    msg = str(err.value)
    assert f"build root {root} is not this user's alone: other users can write it (mode {mode:04o}" in msg
    assert "\n" not in msg and "chmod go-w" in msg
    assert root.stat().st_mode & 0o7777 == mode and list(root.iterdir()) == []


@pytest.mark.parametrize("mode", [0o755, 0o700, 0o775, 0o1755])
def test_a_root_only_this_user_can_write_is_taken_as_it_is(tmp_path, monkeypatch, mode):
    """Neighbours: a private root keeps its mode (0775 of a user-private group, a sticky 1755)."""
    import grp
    import os
    import pwd

    if mode & 0o020 and grp.getgrgid(os.getegid()).gr_name != pwd.getpwuid(os.geteuid()).pw_name:
        pytest.skip("this user's primary group is not a user-private group")
    root = tmp_path / "root"
    root.mkdir()
    root.chmod(mode)
    monkeypatch.setenv(buildroot.ENV_VAR, str(root))
    assert buildroot.ensure() == root
    assert root.stat().st_mode & 0o7777 == mode


@pytest.mark.parametrize("name", [".locks", ".tools"])
@pytest.mark.parametrize("plant", ["mode 1777", "mode 0777", "a link", "a file"])
def test_a_locks_or_tools_folder_others_can_write_is_refused(tmp_path, monkeypatch, name, plant):
    """Issue 52.7: `.locks/` was never checked (a lock file was opened through whatever was there)."""
    from deepep_env.builder import build, tools

    root = tmp_path / "root"
    root.mkdir()
    d = root / name
    if plant.startswith("mode"):
        d.mkdir()
        d.chmod(int(plant.split()[1], 8))
    elif plant == "a link":
        (tmp_path / "elsewhere").mkdir()
        d.symlink_to(tmp_path / "elsewhere")
    else:
        d.write_text("")
    before = os.lstat(d).st_mode
    with pytest.raises(UserError) as err:
        if name == ".locks":
            with build._locked(d / "0123456789.lock"):
                pass
        else:
            tools._folder(root)
    msg = str(err.value)
    assert f"build root {root} is not this user's alone: " in msg and f" {name} in it" in msg and "\n" not in msg
    assert os.lstat(d).st_mode == before
    assert not (tmp_path / "elsewhere").exists() or list((tmp_path / "elsewhere").iterdir()) == []


def test_locks_are_made_private_and_a_lock_file_link_is_not_followed(tmp_path):
    from deepep_env.builder import build

    root = tmp_path / "root"
    root.mkdir()
    with build._locked(root / ".locks" / "a.lock"):
        pass
    assert (root / ".locks").stat().st_mode & 0o7777 == 0o700
    assert (root / ".locks" / "a.lock").stat().st_mode & 0o7777 == 0o600
    (root / ".locks" / "b.lock").symlink_to(tmp_path / "victim")
    with pytest.raises(UserError, match=r"cannot open the build lock .*b\.lock"):
        with build._locked(root / ".locks" / "b.lock"):
            pass
    assert not (tmp_path / "victim").exists()


def test_a_root_another_user_owns_is_refused_in_one_line(tmp_path, monkeypatch):
    root = tmp_path / "root"
    root.mkdir()
    _not_mine(root)
    monkeypatch.setenv(buildroot.ENV_VAR, str(root))
    with pytest.raises(UserError) as err:
        buildroot.ensure()
    msg = str(err.value)
    assert f"build root {root} is not this user's alone: it belongs to uid 65534" in msg
    assert msg.startswith(buildroot.ENV_VAR) and "a folder of your own" in msg and "\n" not in msg
    assert not (root / ".tools").exists()


def test_an_entry_another_user_left_in_our_root_is_refused_by_name(tmp_path, monkeypatch):
    root = tmp_path / "root"
    (root / ".tools").mkdir(parents=True)
    _not_mine(root / ".tools")
    monkeypatch.setenv(buildroot.ENV_VAR, str(root))
    with pytest.raises(UserError, match=r"\.tools in it belongs to uid 65534 .*remove it"):
        buildroot.ensure()


def test_a_root_under_a_folder_others_can_write_is_refused(tmp_path, monkeypatch):
    """Others could rename the root away and put theirs in its place; a sticky folder (/tmp) is fine."""
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    monkeypatch.setenv(buildroot.ENV_VAR, str(open_dir / "root"))
    with pytest.raises(UserError, match=f"other users can write {open_dir} above it"):
        buildroot.ensure()
    assert not (open_dir / "root").exists() or not any((open_dir / "root").iterdir())
    open_dir.chmod(0o1777)
    assert buildroot.ensure() == open_dir / "root"


def test_a_folder_above_writable_by_another_group_is_refused_by_a_private_group_not(tmp_path, monkeypatch):
    """umask 002 with user-private groups makes folders group-writable: the group holds only this user."""
    import grp
    import os
    import pwd

    me = pwd.getpwuid(os.geteuid()).pw_name
    if grp.getgrgid(os.getegid()).gr_name != me:
        pytest.skip("this user's primary group is not a user-private group")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o775)
    monkeypatch.setenv(buildroot.ENV_VAR, str(shared / "root"))
    assert buildroot.ensure() == shared / "root"                       # its group is this user's own
    if os.geteuid() != 0:
        pytest.skip("only root can give a folder to another group")
    os.chown(shared, -1, 65534)
    with pytest.raises(UserError, match=f"other users can write {shared} above it"):
        buildroot.ensure()
