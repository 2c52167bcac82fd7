"""Issue 26, the sweep's new surfaces that need state to go wrong: a built project whose channel
copy is damaged, a lock carrying a credential, a spec leaking a password, a killed install's
litter, an unreadable NIC, a truncated tarball, a failing build, a missing mirror.

Each refusal must be one clear line, a non-zero exit, no traceback, and no change to the state it
was given (the checked folders hash the same before and after). Each repair (a damaged copy
replaced, a killed install's leftovers removed) is checked for what it left."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from build_fixtures import fake_project
from cli_runner import cli_subprocess


def snapshot(*roots: Path) -> dict[str, str]:
    """path → sha256 of every file under ``roots`` (a folder that does not exist: nothing)."""
    out: dict[str, str] = {}
    for root in roots:
        for p in sorted(root.rglob("*")) if root.exists() else ():
            if p.is_file() and not p.is_symlink():
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def one_clear_line(res) -> str:
    """The refusal's one line (asserts: non-zero, not 130, no traceback, one error line on stderr, last)."""
    assert "Traceback" not in res.stdout + res.stderr, res.stderr
    assert res.returncode not in (0, 130), (res.returncode, res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("deepep-env: error: ")]
    # the one error line ends the output (a build's progress lines may come before it)
    assert len(errors) == 1 and lines[-1] == errors[0], res.stderr
    return errors[0]


def flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


class Built:
    """The fake project (tests/build_fixtures.fake_project), fetched and built offline."""

    def __init__(self, tmp_path: Path):
        self.fp = fake_project(tmp_path)
        self.state = tmp_path / "state"
        self.env = {**os.environ, "DEEPEP_ENV_STATE": str(self.state), "DEEPEP_ENV_CACHE_DIR": str(tmp_path / "cache")}
        self.env.pop("DEEPEP_ENV_MIRRORS", None)
        self.cli("fetch", "h200-nvlink", "--from", self.fp.upstream, "--offline", check=True)
        self.cli("build", "h200-nvlink", "--offline", check=True)

    def cli(self, *args, check: bool = False, **kw):
        return cli_subprocess(*args, "--project", self.fp.root, env={**self.env, **kw}, check=check, timeout=240)

    @property
    def channel(self) -> Path:
        return self.state / "channel"

    def channel_file(self, name: str) -> Path:
        return next((self.channel / "linux-64").glob(f"{name}-*.conda"))


@pytest.fixture
def built(tmp_path) -> Built:
    return Built(tmp_path)


# -- 4. every copy is checked before use or upload ----------------------------------------------


def test_a_damaged_channel_copy_is_not_published(built, tmp_path):
    flip_byte(built.channel_file("nvshmem"))
    before = snapshot(built.state)
    line = one_clear_line(built.cli("publish", "h200-nvlink", "--to", tmp_path / "team"))
    assert "nvshmem-3.4.5" in line and "sha256" in line and "deepep-env build h200-nvlink" in line
    assert not (tmp_path / "team").exists() and snapshot(built.state) == before


def test_a_damaged_copy_whose_manifest_was_edited_to_match_is_caught_by_the_store(built, tmp_path):
    nv = built.channel_file("nvshmem")
    flip_byte(nv)
    manifest = built.state / "builds" / "h200-nvlink.json"
    data = json.loads(manifest.read_text())
    for p in data["packages"]:
        if p["file"].endswith(nv.name):
            p["sha256"] = "sha256:" + hashlib.sha256(nv.read_bytes()).hexdigest()
    manifest.write_text(json.dumps(data))
    line = one_clear_line(built.cli("publish", "h200-nvlink", "--to", tmp_path / "team"))
    assert "the store" in line and not (tmp_path / "team").exists()


@pytest.mark.parametrize("damage", ["flip", "symlink", "hardlink", "index"])
def test_build_restores_a_damaged_channel_copy_and_never_calls_it_cached(built, damage):
    """Issue 39.11: `build` said "cached" over a channel copy that publish and install refuse; a link to
    the store's file (one file for both: damage to either reaches the other) and an index describing
    other bytes are not the store's copy either."""
    nv = built.channel_file("nvshmem")
    good = nv.read_bytes()
    store_file = next(built.state.glob(f"store/*-nvshmem/*/{nv.name}"))
    rd_path = built.channel / "linux-64" / "repodata.json"
    if damage == "flip":
        flip_byte(nv)
    elif damage in ("symlink", "hardlink"):
        nv.unlink()
        (nv.symlink_to if damage == "symlink" else nv.hardlink_to)(store_file)
    else:
        rd_path.write_text(rd_path.read_text().replace(hashlib.sha256(good).hexdigest(), "0" * 64))
    res = built.cli("build", "h200-nvlink", "--offline", "--json")
    assert res.returncode == 0, res.stderr
    statuses = {n["package"]: n["status"] for n in json.loads(res.stdout)["nodes"]}
    assert statuses == {"nvshmem": "restored", "deep-ep": "cached"}, statuses
    note = " ".join(json.loads(res.stdout)["nodes"][0]["notes"])
    assert ("index described" if damage == "index" else "was not the store's file") in note, note
    assert nv.read_bytes() == good and not nv.is_symlink() and nv.stat().st_nlink == 1
    assert store_file.stat().st_nlink == 1
    rd = json.loads(rd_path.read_text())["packages.conda"][nv.name]
    assert rd["sha256"] == hashlib.sha256(good).hexdigest()
    again = built.cli("build", "h200-nvlink", "--offline")
    assert "2 cached;" in again.stdout + again.stderr


def test_lock_refuses_a_damaged_copy_and_writes_nothing(built):
    flip_byte(built.channel_file("nvshmem"))
    before = snapshot(built.fp.root)
    line = one_clear_line(built.cli("lock", "h200-nvlink"))
    assert "nvshmem-3.4.5" in line and "build store" in line
    assert snapshot(built.fp.root) == before and not (built.fp.root / "pixi.lock").exists()


def test_lock_records_the_hash_of_the_file_not_the_one_the_index_claims(built):
    nv = built.channel_file("nvshmem")
    rd = built.channel / "linux-64" / "repodata.json"
    real = hashlib.sha256(nv.read_bytes()).hexdigest()
    rd.write_text(rd.read_text().replace(real, "0" * 64))
    assert built.cli("lock", "h200-nvlink").returncode == 0
    text = (built.fp.root / "pixi.lock").read_text()
    assert f"sha256: {real}" in text and "0" * 64 not in text


# -- 5. one redaction and one credential refusal for every message and reader -------------------

REPO = Path(__file__).resolve().parents[2]
SECRET = "SECRETPW-i26"


def test_pixi_verdict_refuses_a_lock_whose_package_urls_carry_a_password(tmp_path):
    text = (REPO / "pixi.lock").read_text()
    host = "https://conda.deepep-env.example/"
    assert f"conda: {host}" in text
    lock = tmp_path / "pixi.lock"
    lock.write_text(text.replace(f"conda: {host}", f"conda: https://user:{SECRET}@conda.deepep-env.example/"))
    before = snapshot(tmp_path)
    for argv in (["pixi", "verdict", "--manifest", REPO / "pixi.toml", "--lock", lock],
                 ["diff", REPO / "pixi.lock", lock]):
        res = cli_subprocess(*argv, env={**os.environ, "DEEPEP_ENV_STATE": str(tmp_path / "state")})
        line = one_clear_line(res)
        assert SECRET not in res.stdout + res.stderr and str(lock) in line and "credentials" in line
    assert snapshot(tmp_path) == before


def test_a_spec_package_with_a_password_is_refused_without_printing_it(tmp_path):
    proj = tmp_path / "proj"
    (proj / "env_specs").mkdir(parents=True)
    text = (REPO / "env_specs" / "h200-nvlink.toml").read_text()
    text = text.replace('channels = ["local"]\n', f'channels = ["local"]\npackages = ["https://u:{SECRET}@h/c::numpy"]\n', 1)
    (proj / "env_specs" / "h200-nvlink.toml").write_text(text)
    before = snapshot(proj)
    for argv in (["plan", "h200-nvlink"], ["spec", "show", "h200-nvlink"], ["lock", "h200-nvlink"]):
        res = cli_subprocess(*argv, "--project", proj, env={**os.environ, "DEEPEP_ENV_STATE": str(tmp_path / "s")})
        line = one_clear_line(res)
        assert SECRET not in res.stdout + res.stderr and "packages" in line and "credentials" in line
    assert snapshot(proj) == before


@pytest.mark.parametrize("edit", ["..%2f", "host"])
def test_install_refuses_a_lock_url_outside_its_channels_naming_it_and_changes_no_state(built, edit):
    """Issue 39.11: a URL with `..%2f` sent install to rebuild, rewrote builds/ENV.json and blamed the rebuild."""
    built.cli("lock", "h200-nvlink", check=True)
    lock = built.fp.root / "pixi.lock"
    old = "https://conda.deepep-env.example/h200/linux-64/nvshmem-"
    new = {"..%2f": "https://conda.deepep-env.example/h200/linux-64/..%2fnvshmem-",
           "host": "https://evil.example/h200/linux-64/nvshmem-"}[edit]
    assert old in lock.read_text()
    lock.write_text(lock.read_text().replace(old, new))
    before = snapshot(built.state, built.fp.root)
    line = one_clear_line(built.cli("install", "h200-nvlink"))
    assert f"the URL {new}" in line and "is not a package file of the lock's channels" in line, line
    assert "rebuild" not in line
    assert snapshot(built.state, built.fp.root) == before
    check = built.cli("lock", "h200-nvlink", "--check")
    assert check.returncode == 1 and "url-outside-channels" in check.stdout + check.stderr


# -- 6. installs clean up after themselves ------------------------------------------------------


def dead_pid() -> int:
    import subprocess

    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.fixture
def installed(built) -> Built:
    built.cli("lock", "h200-nvlink", check=True)
    built.cli("install", "h200-nvlink", check=True)
    return built


def _prefix(b: Built) -> Path:
    return b.fp.root / ".pixi" / "envs" / "h200-nvlink"


def _litter(pfx: Path, pid: int) -> list[Path]:
    out = []
    for kind in ("staging", "pkgs"):
        d = pfx.with_name(f".{pfx.name}.{kind}-{pid}-x1y2")
        (d / "lib").mkdir(parents=True)
        (d / "lib" / "big.so").write_bytes(b"\0" * 1024)
        out.append(d)
    return out


def test_a_swap_killed_between_its_renames_is_rolled_back_by_the_next_reader(installed):
    pfx = _prefix(installed)
    parked = pfx.with_name(f".{pfx.name}.old-{dead_pid()}")
    pfx.rename(parked)
    res = cli_subprocess("activate", "h200-nvlink", "--prefix", pfx, "--shell", "bash", env=installed.env)
    assert res.returncode == 0, res.stderr
    assert (pfx / "conda-meta" / "deepep-env").is_file() and not parked.exists()


def test_the_next_install_removes_a_killed_installs_litter_and_restores_the_prefix(installed):
    pfx = _prefix(installed)
    pid = dead_pid()
    litter = _litter(pfx, pid)
    parked = pfx.with_name(f".{pfx.name}.old-{pid}")
    pfx.rename(parked)
    res = installed.cli("install", "h200-nvlink")
    assert res.returncode == 0, res.stderr
    assert (pfx / "conda-meta" / "deepep-env").is_file()
    assert sorted(p.name for p in pfx.parent.iterdir()) == [pfx.name]
    assert not any(p.exists() for p in litter)


def test_litter_of_a_running_install_is_left_alone(installed):
    pfx = _prefix(installed)
    mine = _litter(pfx, os.getppid())   # a live process that is not the installer
    assert installed.cli("install", "h200-nvlink").returncode == 0
    assert all(p.exists() for p in mine)


# -- 7. facts the tool cannot read are reported -------------------------------------------------


def test_an_hca_whose_name_is_not_utf8_is_a_note_naming_it_and_what_was_done_instead(host_tree, tmp_path):
    import shutil

    root = tmp_path / "host"
    shutil.copytree(host_tree("gcp-b200"), root, symlinks=True)
    ib = os.fsencode(root / "sys" / "class" / "infiniband")
    os.rename(ib + b"/mlx5_0", ib + b"/mlx5_\xff0")
    env = {**os.environ, "DEEPEP_ENV_PROJECT": str(REPO)}
    for argv in (["detect", "--root", root], ["doctor", "gcp-b200", "--root", root, "--verbose"]):
        res = cli_subprocess(*argv, env=env)
        text = res.stdout + res.stderr
        assert "Traceback" not in text, res.stderr
        note = next(ln for ln in text.splitlines() if "b'mlx5_\\xff0'" in ln and "left out" in ln)
        assert "GPU0 uses mlx5_1 instead" in note and "GPU1 uses mlx5_1 instead" in note, note
    # the overlay sets no mapping from a stand-in (issue 39.11: GPU1 was given GPU0's NIC), and says why
    res = cli_subprocess("overlay", "--root", root, env=env)
    warning = next(ln for ln in res.stderr.splitlines() if "b'mlx5_\\xff0'" in ln)
    assert "DEEP_EP_DEVICE_TO_HCA_MAPPING and NVSHMEM_ENABLE_NIC_PE_MAPPING not set: GPU0, GPU1" in warning, warning
    assert "export DEEP_EP_DEVICE_TO_HCA_MAPPING" not in res.stdout and "export NVSHMEM_ENABLE_NIC_PE" not in res.stdout
    res = cli_subprocess("detect", "--root", root, "--json", env=env)
    facts = json.loads(res.stdout)
    assert facts["partial"] and any("mlx5_\\xff0" in w for w in facts["warnings"])
    reasons = [a["reason"] for a in facts["gpu_nic_affinity"][:2]]
    assert all("cannot be named" in r for r in reasons), reasons


# -- medium/low: a truncated tarball, a failing build script, a mirror that is not there --------


def test_a_truncated_upstream_tarball_is_named_not_taken_for_ctrl_c(tmp_path):
    fp = fake_project(tmp_path)
    tar = next(fp.upstream.glob("nvshmem-*.tar.gz"))
    tar.write_bytes(tar.read_bytes()[: tar.stat().st_size // 2])
    cache = tmp_path / "state"
    res = cli_subprocess("fetch", "h200-nvlink", "--project", fp.root, "--from", fp.upstream, "--offline",
                         env={**os.environ, "DEEPEP_ENV_STATE": str(cache)})
    line = one_clear_line(res)
    assert tar.name in line and "truncated or corrupt" in line and "aborted" not in line
    # nothing of the truncated tarball was kept (the good deep-ep tarball beside it may be imported)
    src = cache / "sources"
    assert len(list((src / "trees").iterdir())) <= 1 and not list((src / ".tmp").iterdir())


def test_an_eoferror_that_escapes_a_command_is_an_error_not_an_interrupt(capsys, monkeypatch):
    from cli_runner import cli_in_process

    def ends_early(*a, **kw):
        raise EOFError("Compressed file ended before the end-of-stream marker was reached")

    monkeypatch.setattr("deepep_env.cli._common.find_project", ends_early)
    rc, out, err = cli_in_process(capsys, "pixi", "verdict")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 1 and len(lines) == 1 and "truncated or corrupt" in lines[0] and "aborted" not in err


def test_a_failing_build_script_is_reported_with_its_own_lines(tmp_path):
    from build_fixtures import add_recipe

    recipes = tmp_path / "r"
    script = {"quiet": ["true", "exit 3"], "talks": ["echo 'checking widgets... 42'", "exit 3"]}
    for name, lines in script.items():
        body = "\n".join(f"    - {ln}" for ln in lines)
        add_recipe(recipes / name, name, f"package:\n  name: {name}\n  version: '1.0'\nbuild:\n"
                   f"  string: ${{{{ build_string }}}}\n  script:\n{body}\n")
        state = tmp_path / f"s-{name}"
        res = cli_subprocess("build", "--recipes", recipes / name, "--store", state / "store", "--channel",
                             state / "channel", "--source-cache", state / "cache", "--offline", cwd=tmp_path)
        line = one_clear_line(res)
        assert "(exit 3)" in line and "Finalized" not in line and "Successfully" not in line, line
        assert ("printed nothing" in line) if name == "quiet" else ("checking widgets... 42" in line), line


def test_a_mirror_folder_that_does_not_exist_is_named(built, tmp_path):
    missing = tmp_path / "no-such-mirror"
    url = "https://conda.deepep-env.example/h200"
    built.cli("lock", "h200-nvlink", check=True)
    before = snapshot(built.fp.root, built.state)
    for argv, kw in ((["install", "h200-nvlink", "--mirror", f"{url}={missing}"], {}),
                     (["install", "h200-nvlink"], {"DEEPEP_ENV_MIRRORS": f"{url}={missing}"}),
                     (["lock", "h200-nvlink"], {"DEEPEP_ENV_MIRRORS": f"conda-forge={missing}"})):
        line = one_clear_line(built.cli(*argv, **kw))
        assert str(missing) in line and "does not exist" in line, line
    assert snapshot(built.fp.root, built.state) == before


# -- 9. one meaning of "fresh" ------------------------------------------------------------------


def test_lock_fresh_is_never_said_next_to_a_warning(tmp_path):
    res = cli_subprocess("lock", "h200-nvlink", "--check", "--project", REPO,
                         env={**os.environ, "DEEPEP_ENV_STATE": str(tmp_path / "state")})
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("h200-nvlink: lock fresh") and "warning" not in res.stdout + res.stderr
    notes = [ln for ln in lines[1:] if ln.strip().startswith("note:")]
    assert len(notes) == len(lines) - 1 <= 1 and all("locked by version" in n for n in notes)
    data = json.loads(cli_subprocess("lock", "h200-nvlink", "--check", "--json", "--project", REPO,
                                     env={**os.environ, "DEEPEP_ENV_STATE": str(tmp_path / "state")}).stdout)
    assert data["fresh"] and data["warnings"] == [] and len(data["notes"]) <= 1
