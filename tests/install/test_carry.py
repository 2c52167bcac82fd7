"""`deepep-env carry`: one archive whose bytes depend on its content only (two clones at two paths,
each with its own state folder, make the same sha256), `carry --check` refusals, and `install
--from-carry` into a machine whose state folder holds nothing."""
from __future__ import annotations

import gzip
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

import lock_fixtures as lf
from cli_runner import cli_in_process


def _clone(w, root: Path, state: Path, monkeypatch):
    monkeypatch.setenv("DEEPEP_ENV_STATE", str(state))
    return lf.project_copy(w, root)


def _carry(capsys, proj, out: Path) -> str:
    rc, got, err = cli_in_process(capsys, "carry", "lt-host", "--to", str(out), "--no-wheels", "--json",
                                  "--project", proj.root)
    assert rc == 0, err
    return json.loads(got)["sha256"]


@pytest.fixture
def made(lt_world, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    a = _clone(lt_world, tmp_path / "a" / "clone", tmp_path / "state-a", monkeypatch)
    rc, _, err = cli_in_process(capsys, "lock", "lt-host", "--project", a.root)
    assert rc == 0, err
    sha_a = _carry(capsys, a, tmp_path / "a.carry.tgz")
    return a, sha_a, tmp_path / "a.carry.tgz"


def test_same_bytes_from_two_paths_and_states(lt_world, made, tmp_path, monkeypatch, capsys):
    a, sha_a, _ = made
    b = _clone(lt_world, tmp_path / "elsewhere" / "deeper" / "b", tmp_path / "state-b", monkeypatch)
    shutil.copy(a.pixi_lock, b.pixi_lock)   # the committed lock, the same in every clone
    sha_b = _carry(capsys, b, tmp_path / "b.carry.tgz")
    assert sha_a == sha_b
    assert (tmp_path / "a.carry.tgz").read_bytes() == (tmp_path / "b.carry.tgz").read_bytes()
    with tarfile.open(tmp_path / "b.carry.tgz") as tar:
        infos = tar.getmembers()
    names = [i.name for i in infos]
    assert names[0] == "carry.json" and names[1:] == sorted(names[1:])
    assert {(i.uid, i.gid, i.mtime, i.uname) for i in infos} == {(0, 0, 0, "")}
    doc = json.loads(gzip.decompress((tmp_path / "b.carry.tgz").read_bytes())[512:].split(b"\0", 1)[0])
    assert doc["format"] == "deepep-env/carry/v1" and list(doc["envs"]) == ["lt-host"]
    assert len(doc["packages"]) == 4 and any(n.startswith("wheels/deepep_env-") for n in doc["members"])
    assert str(tmp_path) not in json.dumps(doc)
    rc, out, err = cli_in_process(capsys, "carry", "--check", str(tmp_path / "b.carry.tgz"))
    assert rc == 0 and "ok" in out, err


def _rewrite(src: Path, dst: Path, edit) -> None:
    """The carry's members, edited, written back the same way (so only the edit differs)."""
    from deepep_env.install.carry import Member, write_archive

    with tarfile.open(src) as tar:
        members = [Member(i.name, tar.extractfile(i).read(), executable=bool(i.mode & 0o100))
                   for i in tar.getmembers()]
    write_archive(edit(members), dst)


@pytest.mark.parametrize("what,edit,says", [
    ("byte", lambda ms: [m if not m.name.startswith("pkgs/") else
                         type(m)(m.name, m.data[:-1] + bytes([m.data[-1] ^ 1])) for m in ms], "has sha256"),
    ("missing", lambda ms: [m for m in ms if not m.name.startswith("pkgs/")] + [m for m in ms if m.name.startswith("pkgs/")][1:],
     "is missing"),
    ("extra", lambda ms: ms + [type(ms[0])("pkgs/linux-64/stowaway.conda", b"x")], "is not in its manifest"),
])
def test_check_refuses(made, tmp_path, capsys, what, edit, says):
    _, _, carry = made
    bad = tmp_path / f"{what}.tgz"
    _rewrite(carry, bad, edit)
    rc, _, err = cli_in_process(capsys, "carry", "--check", str(bad))
    assert rc == 1 and says in err and len(err.strip().splitlines()) == 1, err


def test_check_refuses_garbage(tmp_path, capsys):
    bad = tmp_path / "x.tgz"
    bad.write_bytes(gzip.compress(b"not a tar" * 100))
    rc, _, err = cli_in_process(capsys, "carry", "--check", str(bad))
    assert rc == 1 and "not a good carry" in err


def test_install_from_carry_empty_state(lt_world, made, tmp_path, monkeypatch, capsys):
    a, _, carry = made
    c = _clone(lt_world, tmp_path / "offline", tmp_path / "state-c", monkeypatch)
    shutil.rmtree(c.channel)                 # nothing built here: every package of ours from the carry
    shutil.copy(a.pixi_lock, c.pixi_lock)
    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(tmp_path / "cache-c"))
    rc, out, err = cli_in_process(capsys, "install", "lt-host", "--from-carry", str(carry), "--project", c.root)
    assert rc == 0, err
    assert "installed 4 packages" in out and "0 downloaded" in out
    # a project whose lock section is not the carried one is refused, naming the env
    c.pixi_lock.write_text(c.pixi_lock.read_text().replace("lt-host", "lt-other"))
    rc, _, err = cli_in_process(capsys, "install", "lt-host", "--from-carry", str(carry), "--project", c.root)
    assert rc == 2 and "lock section differs" in err, err


def test_sources_for_what_no_channel_has(lt_world, made, tmp_path, monkeypatch, capsys):
    """A package of ours this machine does not have is carried as the sources to rebuild it, from the
    source cache, checked by content: absent or altered, the carry is refused naming the source."""
    a, _, _ = made
    for f in a.channel.glob("*/deep-ep-*.conda"):
        f.unlink()
    rc, _, err = cli_in_process(capsys, "carry", "lt-host", "--to", str(tmp_path / "x.tgz"), "--no-wheels",
                                "--project", a.root)
    assert rc == 2 and "deep-ep 1.2.1" in err and "not in the source cache" in err, err
    for pin in "1" * 64, "3" * 64:   # the fixture recipes' made-up pins (DeepEP, and NVSHMEM it builds against)
        tree = Path(a.source_cache) / "trees" / pin
        tree.mkdir(parents=True)
        (tree / "setup.py").write_text("not the pinned tree\n")
    rc, _, err = cli_in_process(capsys, "carry", "lt-host", "--to", str(tmp_path / "x.tgz"), "--no-wheels",
                                "--project", a.root)
    assert rc == 2 and "hashes to" in err and "its pin is " in err, err
    assert not (tmp_path / "x.tgz").exists()


def test_sources_instead_of_packages(made, tmp_path, capsys):
    """--sources: every build of ours as the sources to rebuild it, though the channel has the package."""
    a, _, _ = made
    rc, _, err = cli_in_process(capsys, "carry", "lt-host", "--to", str(tmp_path / "s.tgz"), "--no-wheels", "--sources",
                                "--project", a.root)
    assert rc == 2 and "deep-ep 1.2.1" in err and "not in the source cache" in err, err


def _source_carry(tree: Path, name: str, out: Path) -> None:
    from deepep_env.install.carry import MANIFEST, CarryPlan, Member, _tree_members, manifest, write_archive

    members = sorted(_tree_members(tree, f"sources/trees/{name}"), key=lambda m: m.name)
    write_archive([Member(MANIFEST, manifest(CarryPlan(envs={}), members)), *members], out)


def test_unpack_puts_sources_in_the_cache_by_content(lt_world, tmp_path, monkeypatch, capsys):
    from deepep_env.base.hashing import tree_sha256

    p = _clone(lt_world, tmp_path / "p", tmp_path / "state-p", monkeypatch)
    tree = tmp_path / "tree"
    (tree / "bin").mkdir(parents=True)
    (tree / "bin" / "run.sh").write_text("#!/bin/sh\n")
    (tree / "bin" / "run.sh").chmod(0o755)
    (tree / "README").write_text("upstream\n")
    (tree / "link").symlink_to("README")
    digest = tree_sha256(tree)
    _source_carry(tree, digest[7:], tmp_path / "good.tgz")
    rc, out, err = cli_in_process(capsys, "carry", "--unpack", str(tmp_path / "good.tgz"), "--project", p.root)
    assert rc == 0 and "1 sources" in out, err
    cached = Path(p.source_cache) / "trees" / digest[7:]
    assert tree_sha256(cached) == digest and (cached / "link").is_symlink()
    _source_carry(tree, "5" * 64, tmp_path / "bad.tgz")   # a tree under another name than its hash
    rc, _, err = cli_in_process(capsys, "carry", "--unpack", str(tmp_path / "bad.tgz"), "--project", p.root)
    assert rc == 1 and "unpacks to" in err, err
    assert not (Path(p.source_cache) / "trees" / ("5" * 64)).exists()


def _deb(path: Path, files: dict[str, bytes]) -> Path:
    """A minimal Debian package: ar archive with debian-binary, control.tar.xz, data.tar.xz."""
    def tar_xz(members: dict[str, bytes]) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:xz") as t:
            for n, d in members.items():
                ti = tarfile.TarInfo(n)
                ti.size = len(d)
                t.addfile(ti, io.BytesIO(d))
        return buf.getvalue()

    out = b"!<arch>\n"
    for name, body in (("debian-binary", b"2.0\n"), ("control.tar.xz", tar_xz({"./control": b"Package: x\n"})),
                       ("data.tar.xz", tar_xz(files))):
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(body):<10}`\n".encode() + body
        out += b"\n" if len(body) % 2 else b""
    path.write_bytes(out)
    return path


def test_host_debs_by_sha256_and_extracted_without_dpkg(made, tmp_path, capsys):
    from deepep_env.install.carry import extract_deb

    a, _, _ = made
    deb = _deb(tmp_path / "libibverbs-dev_44.0-2_amd64.deb",
               {"./usr/include/infiniband/verbs.h": b"/* verbs */\n", "./usr/include/infiniband/mlx5dv.h": b"/* dv */\n"})
    extract_deb(deb, tmp_path / "x")
    assert (tmp_path / "x/usr/include/infiniband/mlx5dv.h").read_bytes() == b"/* dv */\n"
    # a folder whose debs are not the pinned bytes is refused, naming the file
    rc, _, err = cli_in_process(capsys, "carry", "lt-host", "--to", str(tmp_path / "d.tgz"), "--no-wheels",
                                "--debs", str(tmp_path), "--project", a.root)
    assert rc == 2 and "lacks ibverbs-providers_44.0-2_amd64.deb" in err, err


@pytest.mark.parametrize("members,says", [
    ([("pkgs/linux-64/x.conda", "/etc/passwd", b"")], "is outside a source tree"),
    ([("sources/trees/ab/dir", "/tmp", b""), ("sources/trees/ab/dir/f", None, b"x")], "lies under a link"),
])
def test_check_refuses_links_that_could_escape(tmp_path, capsys, members, says):
    """Even with a manifest that lists them: a link is only ever a source tree's own, and nothing is
    written through one."""
    from deepep_env.install.carry import MANIFEST, CarryPlan, Member, manifest, write_archive

    ms = [Member(n, data, link=link) for n, link, data in members]
    write_archive([Member(MANIFEST, manifest(CarryPlan(envs={}), ms)), *ms], tmp_path / "l.tgz")
    rc, _, err = cli_in_process(capsys, "carry", "--check", str(tmp_path / "l.tgz"))
    assert rc == 1 and says in err, err


LT_URL = "https://conda.deepep-env.invalid/lt-host"


def test_made_here_leaves_a_channel_to_the_offline_machine(lt_world, made, tmp_path, monkeypatch, capsys):
    """--made-here CHANNEL (h200-nvlink-conda's repack, made on the GPU machine by `deepep-env repack`): its
    packages are not carried; install on the offline machine needs a mirror for it, named up front, and
    checks each package against the lock all the same."""
    a, sha_plain, _ = made
    rc, _, err = cli_in_process(capsys, "carry", "lt-host", "--to", str(tmp_path / "no.tgz"), "--no-wheels",
                                "--made-here", "https://elsewhere.invalid/x", "--project", a.root)
    assert rc == 2 and "--made-here" in err and "no locked package" in err and not (tmp_path / "no.tgz").exists()
    rc, got, err = cli_in_process(capsys, "carry", "lt-host", "--to", str(tmp_path / "m.tgz"), "--no-wheels",
                                  "--made-here", LT_URL, "--json", "--project", a.root)
    assert rc == 0, err
    doc = json.loads(got)
    assert doc["packages"] == 0 and doc["made_here"] == {LT_URL + "/": 4} and doc["sha256"] != sha_plain
    made_there = tmp_path / "made-there"   # what the offline machine made itself (here: a copy of a's channel)
    shutil.copytree(a.channel, made_there)
    c = _clone(lt_world, tmp_path / "offline", tmp_path / "state-c", monkeypatch)
    shutil.copy(a.pixi_lock, c.pixi_lock)
    shutil.rmtree(c.channel)
    rc, _, err = cli_in_process(capsys, "install", "lt-host", "--from-carry", str(tmp_path / "m.tgz"), "--project", c.root)
    assert rc == 2 and "DEEPEP_ENV_MIRRORS" in err and LT_URL in err and len(err.strip().splitlines()) == 1, err
    assert not c.prefix_for("lt-host").exists()
    monkeypatch.setenv("DEEPEP_ENV_MIRRORS", f"{LT_URL}={made_there}")
    rc, out, err = cli_in_process(capsys, "install", "lt-host", "--from-carry", str(tmp_path / "m.tgz"), "--project", c.root)
    assert rc == 0 and "installed 4 packages" in out, err


def test_source_here_and_prefer_built(lt_world, made, tmp_path, monkeypatch, capsys):
    """--source-here: a source too big to carry (NVIDIA's NVSHMEM wheel) is left to the offline machine's
    source cache, checked there before any build; --prefer-built: with --sources, a package goes as built
    where this machine has the lock's bytes (a DeepEP built without a GPU)."""
    a, _, _ = made
    pins = ["sha256:" + "1" * 64, "sha256:" + "3" * 64]   # the fixture recipes' made-up pins
    rc, _, err = cli_in_process(capsys, "carry", "lt-host", "--to", str(tmp_path / "x.tgz"), "--no-wheels", "--sources",
                                "--source-here", "nvshmem-none", "--source-here", pins[0], "--source-here", pins[1],
                                "--project", a.root)
    assert rc == 2 and "--source-here" in err and "nvshmem-none" in err, err
    rc, got, err = cli_in_process(capsys, "carry", "lt-host", "--to", str(tmp_path / "s.tgz"), "--no-wheels", "--sources",
                                  "--source-here", pins[0], "--source-here", pins[1], "--json", "--project", a.root)
    assert rc == 0, err
    doc = json.loads(got)
    assert sorted(doc["sources_here"]) == pins and doc["packages"] == 1   # deepep-testdep: not ours, as built
    rc, got2, err = cli_in_process(capsys, "carry", "lt-host", "--to", str(tmp_path / "p.tgz"), "--no-wheels", "--sources",
                                  "--prefer-built", "deep-ep", "--prefer-built", "deepep-nvshmem",
                                  "--prefer-built", "deepep-env", "--json", "--project", a.root)
    assert rc == 0, err
    assert json.loads(got2)["packages"] == 4 and json.loads(got2)["rebuild"] == []
    c = _clone(lt_world, tmp_path / "offline", tmp_path / "state-c", monkeypatch)
    shutil.copy(a.pixi_lock, c.pixi_lock)
    shutil.rmtree(c.channel)
    rc, _, err = cli_in_process(capsys, "install", "lt-host", "--from-carry", str(tmp_path / "s.tgz"), "--project", c.root)
    assert rc == 2 and "source cache lacks it" in err and "deepep-env fetch lt-host --from" in err, err
    assert not c.prefix_for("lt-host").exists()


def test_the_carried_tool_wheel_is_the_whole_tool(tmp_path):
    """The carry's deepep-env wheel installs every command, not only the activation the environments'
    package holds (it was that subset once: an offline machine got a tool without `prove`)."""
    import subprocess
    import sys
    import zipfile

    from deepep_env.install.carry import tool_wheel

    m = tool_wheel()
    whl = tmp_path / Path(m.name).name
    whl.write_bytes(m.data)
    names = zipfile.ZipFile(whl).namelist()
    assert "deepep_env/cli/main.py" in names and "deepep_env/views/prove.py" in names
    assert "deepep_env/data/carry-requirements.txt" in names and not [n for n in names if "__pycache__" in n]
    assert tool_wheel().data == m.data   # the same bytes again
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site),
                    str(whl)], check=True)
    out = subprocess.run([sys.executable, "-c", "import deepep_env.cli.main as m, deepep_env.views.prove; print(m.__file__)"],
                         capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(site)}, check=True)
    assert out.stdout.startswith(str(site))


@pytest.mark.parametrize("opt,value,says", [("--made-here", "", "empty value"), ("--source-here", " ", "empty value"),
                                            ("--prefer-built", "", "empty value"),
                                            ("--prefer-built", "no-such-pkg", "no carried environment locks")])
def test_carry_option_values_are_checked_first(made, tmp_path, capsys, opt, value, says):
    a, _, _ = made
    rc, _, err = cli_in_process(capsys, "carry", "lt-host", "--to", str(tmp_path / "o.tgz"), "--no-wheels", "--sources",
                                opt, value, "--project", a.root)
    assert rc == 2 and opt in err and says in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o.tgz").exists()
