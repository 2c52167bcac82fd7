"""The installed DeepEP (seed 000) and the NVSHMEM host library it loads (field notes §3)."""
from __future__ import annotations

import ast
import importlib.machinery
import json
import shutil
import subprocess

import pytest

from deepep_env.doctor.elf import read_dynamic_path
from deepep_env.doctor.features import FEATURE_CHECKS
from doctor_fixtures import (
    REPO,
    build_host,
    buffer_py,
    make_elf,
    make_prefix,
    make_torch_venv,
    problems,
    seed000_shadow_copy,
)
from test_doctor_checks import doctor, find, quiet


@pytest.mark.parametrize("recipe,engine", [("deep-ep", "v1"), ("deep-ep-v2", "v2")])
def test_feature_table_equals_verify_install(recipe, engine):
    """verify_install.py runs inside the recipe test without deepep_env: it keeps its own copy of
    its engine's rows."""
    from deepep_env.doctor.features import FEATURE_ENGINE

    tree = ast.parse((REPO / f"recipes/{recipe}/verify_install.py").read_text())
    table = next(
        ast.literal_eval(n.value) for n in tree.body
        if isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "FEATURE_CHECKS" for t in n.targets)
    )
    assert set(FEATURE_ENGINE) == set(FEATURE_CHECKS)
    assert table == {f: c for f, c in FEATURE_CHECKS.items() if FEATURE_ENGINE[f] == engine}


# -- which deep_ep Python imports --------------------------------------------------------------------
def test_pr466_present_in_the_installed_module(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200")
    r = doctor(root, "gcp-b200", prefix=make_prefix(tmp_path / "pfx"))
    assert r.context["deep_ep"]["origin"] == str(tmp_path / "pfx/lib/python3.12/site-packages/deep_ep/__init__.py")
    quiet(r, "deepep.pr466-missing", "deepep.shadowed", "deepep.not-installed")
    # issue 9.2: doctor says what it verified, in text even when other findings hide the notes
    (ok,) = [c for c in r.confirmed if c.startswith("deepep.pr-466: present")]
    assert "_setup_device_hca_mapping" in ok and ok.endswith("site-packages/deep_ep/buffer.py)")
    assert r.to_dict()["confirmed"] == list(r.confirmed)
    from deepep_env.doctor.render import render_text

    assert f"ok    {ok}" in render_text(r).splitlines()
    missing = doctor(root, "gcp-b200", prefix=make_prefix(tmp_path / "p2", pr466=False))
    assert not [c for c in missing.confirmed if c.startswith("deepep.pr-466")]


def test_pr466_missing_from_the_installed_module(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200")
    f = find(doctor(root, "gcp-b200", prefix=make_prefix(tmp_path / "pfx", pr466=False)), "deepep.pr466-missing")
    assert f.severity == "error" and "_setup_device_hca_mapping" in f.title
    assert f.evidence[0].file.endswith("site-packages/deep_ep/buffer.py")


def test_seed000_unpatched_copy_shadows_the_env(tmp_path):
    """PR #466 is in the env's copy, but PYTHONPATH puts an unpatched /opt/deepep/python first."""
    root = build_host(tmp_path / "h", "gcp-b200", seed000_shadow_copy)
    r = doctor(root, "gcp-b200", prefix=make_prefix(tmp_path / "pfx"), environ={"PYTHONPATH": "/opt/deepep/python"})
    f = find(r, "deepep.shadowed")
    assert "/opt/deepep/python/deep_ep" in f.title and f.evidence[1].var == "PYTHONPATH" and f.evidence[1].source == "environment"
    assert find(r, "deepep.pr466-missing").evidence[0].file == "/opt/deepep/python/deep_ep/buffer.py"
    # host-only: the mapping variable alone makes PR #466 required of whatever PYTHONPATH imports
    r = doctor(root, environ={"PYTHONPATH": "/opt/deepep/python", "DEEP_EP_DEVICE_TO_HCA_MAPPING": "0:mlx5_0:1"})
    assert find(r, "deepep.pr466-missing").severity == "error"
    quiet(doctor(root, environ={"PYTHONPATH": "/opt/deepep/python"}), "deepep.pr466-missing")  # nothing requires it


def test_pth_file_in_site_packages_shadows(tmp_path):
    """An editable-install style .pth adding a source tree before the package is not a shadow
    (site dirs come first); a PYTHONPATH entry is."""
    root = build_host(tmp_path / "h", "gcp-b200")
    pfx = make_prefix(tmp_path / "pfx")
    src = tmp_path / "pfx" / "src"
    (src / "deep_ep").mkdir(parents=True)
    (src / "deep_ep" / "__init__.py").write_text("")
    (src / "deep_ep" / "buffer.py").write_text(buffer_py(False))
    site = pfx / "lib/python3.12/site-packages"
    (site / "dev.pth").write_text(f"# comment\nimport os\n{src}\n")
    shutil.rmtree(site / "deep_ep")
    r = doctor(root, "gcp-b200", prefix=pfx)
    assert r.context["deep_ep"]["via"].startswith("a .pth file")
    find(r, "deepep.shadowed")
    find(r, "deepep.pr466-missing")


def test_search_matches_importlib_pathfinder(tmp_path):
    from deepep_env.doctor.context import PathView
    from deepep_env.doctor.pythonpath import PathEntry, find_module
    from deepep_env.platform.rootfs import RootFS

    a, b, c = (tmp_path / n for n in "abc")
    (a / "deep_ep").mkdir(parents=True)  # namespace portion only
    (b / "deep_ep").mkdir(parents=True)
    (b / "deep_ep" / "__init__.py").write_text("")
    (c / "deep_ep").mkdir(parents=True)
    (c / "deep_ep" / "__init__.py").write_text("")
    view = PathView(RootFS("/"), True)
    for order in ([a, b, c], [c, b, a], [a]):
        got = find_module(view, [PathEntry(str(d), "test", False) for d in order], "deep_ep")
        spec = importlib.machinery.PathFinder.find_spec("deep_ep", [str(d) for d in order])
        if spec.origin in (None, "namespace"):
            assert got.kind == "namespace" and got.dir == str(order[0] / "deep_ep")
        else:
            assert got.origin == spec.origin


def test_not_installed_and_broken_installs(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200")
    pfx = make_prefix(tmp_path / "pfx")
    shutil.rmtree(pfx / "lib/python3.12/site-packages/deep_ep")
    assert find(doctor(root, "gcp-b200", prefix=pfx), "deepep.not-installed").severity == "error"

    r = doctor(root, "gcp-b200", prefix=make_prefix(tmp_path / "p2", extension=False, record=False))
    find(r, "deepep.extension-missing")
    assert find(r, "deepep.build-record-missing").severity == "warning"

    r = doctor(root, "gcp-b200", prefix=make_prefix(tmp_path / "p3", revision="29d31c095796f3c8ece47ee9cdcc167051bbeed9"))
    assert "29d31c095796" in find(r, "deepep.revision-mismatch").title

    r = doctor(root, "gcp-b200", prefix=make_prefix(tmp_path / "p4", link_nvshmem=False))
    assert find(r, "deepep.extension-unlinked").severity == "warning"

    r = doctor(root, "gcp-b200", prefix=make_prefix(tmp_path / "p6", extension_needed=["libc10.so", "libtorch_cpu.so"]))
    f = find(r, "deepep.static-libstdcxx")
    assert f.severity == "error" and "SIGSEGV" in f.title and "env -u CXX -u CC" in f.fix
    shared = make_prefix(tmp_path / "p7", extension_needed=["libc10.so", "libstdc++.so.6"])
    assert "deepep.static-libstdcxx" not in {x.id for x in doctor(root, "gcp-b200", prefix=shared).findings}

    p5 = make_prefix(tmp_path / "p5", require=("pr-466", "pr-999"))
    assert "pr-999" in find(doctor(root, "gcp-b200", prefix=p5), "deepep.feature-unknown").title


@pytest.mark.parametrize("damage", ["binary", "directory", "bad-record"])
def test_unreadable_module_files_are_findings(tmp_path, damage):
    root = build_host(tmp_path / "h", "gcp-b200")
    pfx = make_prefix(tmp_path / "pfx")
    pkg = pfx / "lib/python3.12/site-packages/deep_ep"
    if damage == "binary":
        (pkg / "buffer.py").write_bytes(b"\x00\xff\xfe def (")
    elif damage == "directory":
        (pkg / "buffer.py").unlink()
        (pkg / "buffer.py").mkdir()
    else:
        (pkg / "_deepep_env_build.json").write_text("{not json")
    r = doctor(root, "gcp-b200", prefix=pfx)
    if damage == "bad-record":
        assert "not JSON" in find(r, "deepep.build-record-missing").evidence[0].value
    else:
        assert find(r, "deepep.unreadable").severity == "error"


def test_cwd_holding_a_source_tree(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200")
    src = tmp_path / "DeepEP"
    (src / "deep_ep").mkdir(parents=True)
    (src / "deep_ep" / "__init__.py").write_text("")
    r = doctor(root, "gcp-b200", prefix=make_prefix(tmp_path / "pfx"), cwd=str(src))
    assert find(r, "deepep.cwd-shadow").severity == "warning"


# -- NVSHMEM host library ---------------------------------------------------------------------------------
def test_pip_nvshmem_loads_first_without_preload(tmp_path):
    """Host python with pip torch + nvidia-nvshmem: torch loads its libnvshmem_host first."""
    root = build_host(tmp_path / "h", "gcp-b200")
    venv = make_torch_venv(tmp_path / "venv")
    pfx = make_prefix(tmp_path / "pfx", python="host", python_executable=str(venv / "bin/python3"))
    # a hand-written launcher (seed 000's env script) on a host holding both: the env's deep_ep and
    # the venv on PYTHONPATH (host-only doctor knows no interpreter), no preload
    make_torch_venv(root / "opt/venv")
    make_prefix(root / "opt/env", python="host", python_executable="/opt/venv/bin/python3")
    r = doctor(root, environ={"PYTHONPATH": "/opt/env/lib/python3.12/site-packages:/opt/venv/lib/python3.12/site-packages"})
    f = find(r, "nvshmem.host-mismatch")
    assert "/opt/venv/lib/python3.12/site-packages/nvidia/nvshmem/lib/libnvshmem_host.so.3" in f.title and f.severity == "error"
    assert "LD_PRELOAD=/opt/env/lib/libnvshmem_host.so.3" in f.fix
    # `deepep-env run` sees the venv's pip NVSHMEM and preloads the env's copy (the overlay reads
    # the env's Python on this machine, as doctor does): only processes outside it are at risk
    r = doctor(root, "gcp-b200", prefix=pfx)
    f = find(r, "nvshmem.host-mismatch")
    assert f.severity == "info" and f.title.startswith("outside deepep-env only") and str(pfx / "lib/libnvshmem_host.so.3") in f.fix
    assert r.context["nvshmem_host"]["loads"] == str(pfx / "lib/libnvshmem_host.so.3")
    assert "prepended by overlay rule nvshmem-preload" in r.context["environment"]["LD_PRELOAD"]["source"]
    # LD_PRELOAD of the env's copy wins everywhere
    r = doctor(root, "gcp-b200", prefix=pfx, environ={"LD_PRELOAD": str(pfx / "lib/libnvshmem_host.so.3")})
    quiet(r, "nvshmem.host-mismatch")
    assert r.context["nvshmem_host"]["loads"] == str(pfx / "lib/libnvshmem_host.so.3")
    # no pip NVSHMEM: the extension's RUNPATH finds the env's copy
    venv2 = make_torch_venv(tmp_path / "venv2", pip_nvshmem=False)
    pfx2 = make_prefix(tmp_path / "pfx2", python="host", python_executable=str(venv2 / "bin/python3"))
    r = doctor(root, "gcp-b200", prefix=pfx2)
    assert problems(r) == [] and r.context["nvshmem_host"]["loads"] == str(pfx2 / "lib/libnvshmem_host.so.3")


def test_preloaded_nvshmem_from_another_install(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200", seed000_shadow_copy)
    env = {"LD_PRELOAD": "/opt/deepep/nvshmem/lib/libnvshmem_host.so.3"}
    f = find(doctor(root, "gcp-b200", prefix=make_prefix(tmp_path / "pfx"), environ=env), "nvshmem.host-mismatch")
    assert f.evidence[0].var == "LD_PRELOAD"


def test_nvshmem_host_library_nowhere(tmp_path):
    root = build_host(tmp_path / "h", "gcp-b200")
    f = find(doctor(root, "gcp-b200", prefix=make_prefix(tmp_path / "pfx", nvshmem=False)), "nvshmem.host-unresolved")
    assert f.severity == "error"


# -- the ELF reader ---------------------------------------------------------------------------------------
def test_elf_reader_matches_readelf(tmp_path):
    p = tmp_path / "x.so"
    p.write_bytes(make_elf(["libnvshmem_host.so.3", "libc.so.6"], runpath=["$ORIGIN/../..", "/opt/x"], soname="x.so"))
    d = read_dynamic_path(str(p))
    assert d.needed == ("libnvshmem_host.so.3", "libc.so.6") and d.runpath == ("$ORIGIN/../..", "/opt/x") and d.soname == "x.so"
    p.write_bytes(make_elf(["liba.so"], rpath=["/r"]))
    assert read_dynamic_path(str(p)).rpath == ("/r",)
    for bad in (b"", b"\x7fELF", b"not an elf at all" * 10):
        p.write_bytes(bad)
        assert read_dynamic_path(str(p)) is None
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("no readelf to compare with")
    import sysconfig

    lib = sysconfig.get_config_var("LIBDIR")
    so = next(iter(sorted(__import__("glob").glob(f"{lib}/libpython3*.so*")) or sorted(__import__("glob").glob("/lib/x86_64-linux-gnu/libc.so.6"))), None)
    if so is None:
        pytest.skip("no shared library to compare with")
    out = subprocess.run([readelf, "-d", so], capture_output=True, text=True).stdout
    needed = tuple(line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line)
    assert read_dynamic_path(so).needed == needed


def test_prefix_marker_json_is_what_install_writes(tmp_path):
    """The fixture marker carries the fields deepep_env.formats.prefix reads."""
    from deepep_env.formats.prefix import read_prefix_meta

    meta = read_prefix_meta(make_prefix(tmp_path / "pfx"), "gcp-b200")
    assert meta.python_provider == "conda" and meta.site_packages().endswith("python3.12/site-packages")
    json.loads((tmp_path / "pfx/conda-meta/deepep-env.json").read_text())


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++")
def test_an_extension_linked_with_a_static_libstdcxx_is_an_error(tmp_path):
    """Issue 38's trap, with real ELF files from the real linker: an extension linked against a c10
    stand-in with ``-static-libstdc++`` (what an image's CXX=/opt/gcc/bin/g++ did under pip) is an
    error; the same source linked the default way is not."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "c10.cpp").write_text("int c10_stub() { return 1; }\n")
    (src / "ext.cpp").write_text('#include <string>\n#include <vector>\nint c10_stub();\n'
                                 'extern "C" int f() { std::vector<std::string> v{"a"}; return c10_stub() + v.size(); }\n')
    run = lambda *a: subprocess.run(["g++", "-shared", "-fPIC", *a], cwd=src, check=True, capture_output=True)  # noqa: E731
    run("c10.cpp", "-o", "libc10.so")
    run("ext.cpp", "-L.", "-lc10", "-static-libstdc++", "-o", "static.so")
    run("ext.cpp", "-L.", "-lc10", "-o", "shared.so")
    root = build_host(tmp_path / "h", "gcp-b200")
    ids = {}
    for kind in ("static", "shared"):
        pfx = make_prefix(tmp_path / kind)
        (pfx / "lib/python3.12/site-packages/deep_ep_cpp.cpython-312-x86_64-linux-gnu.so").write_bytes(
            (src / f"{kind}.so").read_bytes())
        ids[kind] = {f.id for f in doctor(root, "gcp-b200", prefix=pfx).findings}
    assert "deepep.static-libstdcxx" in ids["static"] and "deepep.static-libstdcxx" not in ids["shared"]


@pytest.mark.parametrize("phentsize, phnum", [(0xFFFF, 4096), (57, 1), (55, 1), (0, 1), (56, 5000)])
def test_an_elf_header_with_another_program_header_size_is_not_read(tmp_path, phentsize, phnum):
    """Issue 52.12: e_phentsize was unchecked upwards, so one header could read 256 MiB."""
    import struct

    good = make_elf(["liba.so"])
    p = tmp_path / "x.so"
    p.write_bytes(good[:0x36] + struct.pack("<HH", phentsize, phnum) + good[0x3A:])
    assert read_dynamic_path(str(p)) is None
    p.write_bytes(good[:0x40 + 56])                     # the neighbour: a table cut short is no ELF either
    assert read_dynamic_path(str(p)) is None
    p.write_bytes(good)
    assert read_dynamic_path(str(p)).needed == ("liba.so",)
