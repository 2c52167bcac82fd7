"""`deepep-env diff` on real pixi.lock files written by pixi (v5, v6, v7; tests/fixtures/lock/real/README.md
names their sources) and on v7 locks shaped like a DeepEP cluster lock (two environments, two
platforms, noarch, PyPI, a DeepEP rebuild, a channel move, a __cuda change)."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from cli_runner import cli_in_process

REAL = Path(__file__).parents[1] / "fixtures" / "lock" / "real"
PAIRS = [("v5-ripgrep.lock", "v5-ripgrep-bat.lock"), ("v6-scipy2025.old.lock", "v6-scipy2025.new.lock"),
         ("v7-pixi-build-v3.old.lock", "v7-pixi-build-v3.new.lock"),
         ("v7-cuda-rich-platforms.lock", "v7-cuda-11.lock")]


def test_fixtures_are_small():
    for f in REAL.glob("*.lock"):
        assert f.stat().st_size < 100_000, f


@pytest.mark.parametrize("old,new", PAIRS)
def test_real_pairs_in_every_format(old, new, capsys):
    a, b = REAL / old, REAL / new
    rc, out, err = cli_in_process(capsys, "diff", a, b, "--json")
    assert rc == 0, err
    data = json.loads(out)
    assert data["empty"] is False
    # Stable: same bytes twice, keys sorted.
    rc, out2, _ = cli_in_process(capsys, "diff", a, b, "--json")
    assert out2 == out and out == json.dumps(json.loads(out), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    rc, md, err = cli_in_process(capsys, "diff", a, b, "-f", "markdown")
    assert rc == 0, err
    for line in md.splitlines():
        if line.startswith("| ") and line != "| package | old | new | change |":
            # Exactly 4 cells: no unescaped `|` in a value.
            assert len([c for c in line.replace("\\|", "").split("|")[1:-1]]) == 4, line
    rc, table, err = cli_in_process(capsys, "diff", a, b)
    assert rc == 0, err and "Traceback" not in err
    for f in (a, b):
        rc, out, _ = cli_in_process(capsys, "diff", f, f, "--json")
        assert rc == 0 and json.loads(out)["empty"] is True
        rc, table, _ = cli_in_process(capsys, "diff", f, f)
        assert rc == 0 and "no changes" in table


def test_v6_real_upgrade_listing(capsys):
    rc, out, _ = cli_in_process(capsys, "diff", REAL / "v6-scipy2025.old.lock", REAL / "v6-scipy2025.new.lock", "--json")
    d = json.loads(out)
    assert d["summary"]["changed"] == 49 and not d["virtual_packages"]
    sec = next(s for s in d["sections"] if s["platform"] == "linux-64")
    first = sec["changed"][0]
    assert (first["name"], first["old_version"], first["new_version"]) == ("python", "3.13.3", "3.13.5")


def test_v7_virtual_packages_reported(capsys):
    """pixi added virtual-packages to the platforms of a v7 lock, no package changed: not 'no changes'."""
    rc, out, _ = cli_in_process(capsys, "diff", REAL / "v7-pixi-build-v3.old.lock", REAL / "v7-pixi-build-v3.new.lock",
                                "--json")
    d = json.loads(out)
    assert d["empty"] is False and d["summary"]["virtual_packages_changed"] == 12
    assert {"platform": "linux-64", "name": "__glibc", "old": None, "new": "__glibc=2.28"} in d["virtual_packages"]
    # pixi-build source packages (`conda: .`) read too.
    names = {c["name"] for s in d["sections"] for c in s["changed"] + s["added"]}
    assert not names


def test_v5_added_package(capsys):
    rc, out, _ = cli_in_process(capsys, "diff", REAL / "v5-ripgrep.lock", REAL / "v5-ripgrep-bat.lock", "--json")
    (sec,) = json.loads(out)["sections"]
    assert [a["name"] for a in sec["added"]] == ["bat"] and sec["unchanged"] == 6


def test_real_rev_path(tmp_path, capsys, monkeypatch):
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for name in ("v6-scipy2025.old.lock", "v6-scipy2025.new.lock"):
        shutil.copy(REAL / name, tmp_path / "pixi.lock")
        subprocess.run([*git, "-C", str(tmp_path), "add", "pixi.lock"], check=True)
        subprocess.run([*git, "-C", str(tmp_path), "commit", "-qm", name], check=True)
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli_in_process(capsys, "diff", "HEAD~1:pixi.lock", "HEAD:pixi.lock", "--json")
    assert rc == 0, err
    assert json.loads(out)["summary"]["changed"] == 49
    rc, md, _ = cli_in_process(capsys, "diff", "HEAD~1:pixi.lock", "pixi.lock", "-f", "markdown")
    assert rc == 0 and "`HEAD~1:pixi.lock`" in md
    (tmp_path / "bad.lock").write_text("version: 6\n")
    subprocess.run([*git, "-C", str(tmp_path), "add", "bad.lock"], check=True)
    subprocess.run([*git, "-C", str(tmp_path), "commit", "-qm", "bad"], check=True)
    rc, _, err = cli_in_process(capsys, "diff", "HEAD:bad.lock", "pixi.lock")
    # The error names the lock as given, not a temporary file.
    assert rc == 2 and err.count("\n") == 1 and "HEAD:bad.lock: not a readable pixi.lock" in err


@pytest.mark.parametrize("content", [b"", b"\x00\x01binary", b"\xff\xfe not utf-8", b"[package]\nname = 'x'\n",
                                     b'{"a": 1}\n', b"version: 99\nenvironments: {}\npackages: []\n", b"version: 6\n"])
def test_not_a_pixi_lock(tmp_path, capsys, content):
    bad = tmp_path / "x.lock"
    bad.write_bytes(content)
    good = REAL / "v5-ripgrep.lock"
    for args in ((bad, good), (good, bad)):
        rc, out, err = cli_in_process(capsys, "diff", *args)
        assert rc == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
        assert "pixi.lock" in err


def test_directory_is_not_a_lock(tmp_path, capsys):
    rc, _, err = cli_in_process(capsys, "diff", tmp_path, REAL / "v5-ripgrep.lock")
    assert rc == 2 and "is a directory" in err


# --- v7 locks shaped like a DeepEP cluster lock ------------------------------------------------

CF = "https://conda.anaconda.org/conda-forge"
NV = "https://conda.anaconda.org/nvidia"


def _pkg(url: str, sha: str, extra: str = "") -> str:
    return f"- conda: {url}\n  sha256: {sha * 64}\n  md5: {sha * 32}\n  size: 100\n{extra}"


def _cluster_lock(*, cuda_vp: str, deepep_build: str, nvshmem_channel: str, torch: str, nccl_b: str) -> str:
    deepep = f"{CF}/linux-64/deep-ep-1.2.1-{deepep_build}.conda"
    deepep_arm = f"{CF}/linux-aarch64/deep-ep-1.2.1-{deepep_build}.conda"
    nvshmem = f"{nvshmem_channel}/linux-64/libnvshmem3-3.4.5-h0123456_0.conda"
    nccl_h100 = f"{CF}/linux-64/nccl-2.27.7.1-h4d09622_0.conda"
    nccl_h200 = f"{CF}/linux-64/nccl-2.28.9.1-{nccl_b}.conda"
    tz = f"{CF}/noarch/tzdata-2025b-h78e105d_0.conda"
    whl = f"https://files.pythonhosted.org/packages/aa/bb/torch-{torch}-cp312-cp312-manylinux_2_28_x86_64.whl"
    return f"""version: 7
platforms:
- name: linux-64
  virtual-packages:
  - __unix=0=0
  - __linux=5.15
  - __glibc=2.35
  - {cuda_vp}
  - __archspec=1=x86_64
- name: linux-aarch64
  virtual-packages:
  - __unix=0=0
  - __glibc=2.35
  - __cuda=12.8
environments:
  h100:
    channels:
    - url: {CF}/
    - url: {NV}/
    indexes:
    - https://pypi.org/simple
    packages:
      linux-64:
      - conda: {deepep}
      - conda: {nccl_h100}
      - conda: {nvshmem}
      - conda: {tz}
      - pypi: {whl}
      linux-aarch64:
      - conda: {deepep_arm}
      - conda: {tz}
  h200:
    channels:
    - url: {CF}/
    - url: {NV}/
    packages:
      linux-64:
      - conda: {deepep}
      - conda: {nccl_h200}
      - conda: {tz}
packages:
{_pkg(deepep, "a")}{_pkg(deepep_arm, "b")}{_pkg(nvshmem, "c")}{_pkg(nccl_h100, "d")}{_pkg(nccl_h200, "e")}{_pkg(tz, "f")}- pypi: {whl}
  name: torch
  version: {torch}
  sha256: {"9" * 64}
  requires_python: '>=3.9'
"""


@pytest.fixture
def cluster_pair(tmp_path):
    a, b = tmp_path / "old.pixi.lock", tmp_path / "new.pixi.lock"
    a.write_text(_cluster_lock(cuda_vp="__cuda=12.8", deepep_build="h1a2b3c4d_0", nvshmem_channel=CF,
                               torch="2.7.1", nccl_b="h4d09622_0"))
    b.write_text(_cluster_lock(cuda_vp="__cuda=12.9", deepep_build="h5e6f7a8b_0", nvshmem_channel=NV,
                               torch="2.8.0", nccl_b="hb7a5c3e_1"))
    return a, b


def test_cluster_lock_diff(cluster_pair, capsys):
    a, b = cluster_pair
    rc, out, err = cli_in_process(capsys, "diff", a, b, "--json")
    assert rc == 0, err
    d = json.loads(out)
    secs = {(s["env"], s["platform"]): s for s in d["sections"]}
    h100 = {(c["kind"], c["name"]): c for c in secs[("h100", "linux-64")]["changed"]}
    # DeepEP rebuilt at the same version: a changed build, and a changed build id.
    dep = h100[("conda", "deep-ep")]
    assert dep["change"] == "rebuilt" and (dep["old_build"], dep["new_build"]) == ("h1a2b3c4d_0", "h5e6f7a8b_0")
    assert {(b["env"], b["platform"], b["package"], b["old"], b["new"]) for b in d["build_ids"]} >= {
        ("h100", "linux-64", "deep-ep", "1a2b3c4d", "5e6f7a8b"),
        ("h100", "linux-aarch64", "deep-ep", "1a2b3c4d", "5e6f7a8b"),
        ("h200", "linux-64", "deep-ep", "1a2b3c4d", "5e6f7a8b")}
    # NVSHMEM moved channels, same build.
    nv = h100[("conda", "libnvshmem3")]
    assert nv["change"] == "moved" and nv["old_channel"] == f"{CF}/" and nv["new_channel"] == f"{NV}/"
    assert h100[("pypi", "torch")]["change"] == "upgraded" and h100[("pypi", "torch")]["component"] == "pytorch"
    # Pinned components first: NVSHMEM, PyTorch, DeepEP; the same package differs per environment.
    assert [c["name"] for c in secs[("h100", "linux-64")]["changed"]] == ["libnvshmem3", "torch", "deep-ep"]
    assert [c["name"] for c in secs[("h200", "linux-64")]["changed"]] == ["nccl", "deep-ep"]
    assert secs[("h200", "linux-64")]["changed"][0]["change"] == "rebuilt"
    assert secs[("h100", "linux-64")]["unchanged"] == 2     # nccl, tzdata (noarch)
    assert d["virtual_packages"] == [{"platform": "linux-64", "name": "__cuda", "old": "__cuda=12.8",
                                      "new": "__cuda=12.9"}]
    rc, md, _ = cli_in_process(capsys, "diff", a, b, "-f", "markdown")
    assert "| **deep-ep** | `1.2.1 h1a2b3c4d_0` | `1.2.1 h5e6f7a8b_0` | rebuilt |" in md
    assert "| **torch (pypi)** | `2.7.1` | `2.8.0` | upgraded |" in md
    assert "`__cuda=12.8` → `__cuda=12.9`" in md
    assert md.index("**libnvshmem3**") < md.index("**torch (pypi)**") < md.index("**deep-ep**")
    rc, table, _ = cli_in_process(capsys, "diff", a, b)
    assert rc == 0 and "__cuda=12.8 → __cuda=12.9" in table and "1a2b3c4d → 5e6f7a8b" in table


def test_markdown_escapes_pipes():
    from deepep_env.lock.diff import LockDiff, PackageChange, PlatformDiff
    from deepep_env.lock.render import diff_markdown

    sec = PlatformDiff(env="e", platform="linux-64", changed=[PackageChange(
        name="weird", old_version="1|2", new_version="1`3", old_build="b", new_build="b", change="upgraded")])
    md = diff_markdown(LockDiff(old="a|b", new="c", sections=[sec]))
    row = next(line for line in md.splitlines() if line.startswith("| weird"))
    assert row == "| weird | `1\\|2 b` | `` 1`3 b `` | upgraded |"
    assert "`a\\|b`" in md
