"""Issue 27 item 1: NVSHMEM from NVIDIA's binary wheel as a provider (``[nvshmem] provider = "wheel"``).

A throwaway project (build_fixtures.fake_project) whose wheel catalog pins a small fake wheel (a zip
with nvidia/nvshmem/{include,lib} and a .dist-info), repacked by the real recipes/nvshmem-wheel; a
stand-in deep-ep recipe builds against the repack (deepep-nvshmem), then lock and install."""
from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest

from build_fixtures import REPO, fake_project, fetched, read_in_package, refusal_after_edit, stand_in_deepep
from cli_runner import cli_in_process, cli_subprocess
from deepep_env.base.errors import UserError
from deepep_env.base.hashing import file_sha256, file_tree_sha256, tree_sha256

WHEEL = "nvidia_nvshmem_cu13-3.4.5-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
URL = "https://files.pythonhosted.org/packages/00/11/" + "2" * 60 + "/" + WHEEL

FAKE_DEEPEP_ON_WHEEL = stand_in_deepep("""
    content:
      - test -f $PREFIX/include/nvshmem.h && test -e $PREFIX/lib/libnvshmem_host.so && test -f $PREFIX/lib/libnvshmem_device.a
      - mkdir -p $PREFIX/share/deep-ep
      - echo "provider=${{ nvshmem_provider }}" > $PREFIX/share/deep-ep/variant.txt
      - cp buffer.py $PREFIX/share/deep-ep/buffer.py
      - cp $PREFIX/include/nvshmem.h $PREFIX/share/deep-ep/nvshmem.h
""", nvshmem="deepep-nvshmem")


def make_wheel(path: Path, version: str = "3.4.5") -> Path:
    files = {
        "nvidia/nvshmem/include/nvshmem.h": f"#define NVSHMEM_VERSION_STRING \"{version} (fake wheel)\"\n",
        "nvidia/nvshmem/include/device/nvshmem_defines.h": "/* device */\n",
        "nvidia/nvshmem/lib/libnvshmem_host.so.3": "fake host library\n",
        "nvidia/nvshmem/lib/libnvshmem_device.a": "!<arch>\n",
        "nvidia/nvshmem/lib/libnvshmem_device.bc": "bitcode\n",
        "nvidia/nvshmem/lib/nvshmem_transport_ibrc.so.4": "NVSHMEM_IB_GID_INDEX\n",
        "nvidia/nvshmem/lib/nvshmem_transport_ibgda.so.4": "NVSHMEM_IBGDA_NIC_HANDLER\n",
        "nvidia/nvshmem/lib/nvshmem_bootstrap_uid.so.3": "bootstrap\n",
        f"nvidia_nvshmem_cu13-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: nvidia-nvshmem-cu13\nVersion: {version}\n",
        f"nvidia_nvshmem_cu13-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-manylinux2014_x86_64\n",
        f"nvidia_nvshmem_cu13-{version}.dist-info/licenses/License.txt": "NVIDIA NVSHMEM license (fake)\n",
        f"nvidia_nvshmem_cu13-{version}.dist-info/RECORD": "",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in sorted(files.items()):
            info = zipfile.ZipInfo(name, date_time=(2025, 12, 19, 17, 52, 0))
            zf.writestr(info, text)
    return path


def wheel_project(tmp_path: Path):
    """fake_project + an env spec `h200-wheel` (h200-nvlink with the wheel provider), the real
    recipes/nvshmem-wheel recipe, a catalog pinning the fake wheel, and a deep-ep on deepep-nvshmem."""
    fp = fake_project(tmp_path)
    whl = make_wheel(fp.upstream / WHEEL)
    rdir = fp.root / "recipes" / "nvshmem-wheel"
    shutil.copytree(REPO / "recipes" / "nvshmem-wheel", rdir)
    (rdir / "sources.toml").write_text(
        'format = 1\npackage = "nvshmem-wheel"\n\n[versions."3.4.5".cu13.linux-64]\n'
        f'filename = "{WHEEL}"\nurl = "{URL}"\nsha256 = "{file_sha256(whl)}"\nsize = {whl.stat().st_size}\n')
    (fp.root / "recipes" / "deep-ep" / "recipe.yaml").write_text(FAKE_DEEPEP_ON_WHEEL.lstrip())
    src = (fp.root / "env_specs" / "h200-nvlink.toml").read_text()
    spec = src.replace('name = "h200-nvlink"', 'name = "h200-wheel"').replace(
        'version = "3.4.5"\nprovider = "source"', 'version = "3.4.5"\nprovider = "wheel"')
    assert 'provider = "wheel"' in spec
    (fp.root / "env_specs" / "h200-wheel.toml").write_text(spec)
    return fp, whl


def test_file_tree_hash_is_the_tree_of_the_one_file(tmp_path):
    d = tmp_path / "t"
    d.mkdir()
    (d / WHEEL).write_bytes(b"PK\x05\x06" + b"\0" * 18)
    assert tree_sha256(d) == file_tree_sha256(WHEEL, file_sha256(d / WHEEL))


def test_spec_resolves_to_the_pinned_wheel_and_plans_a_repack_node(tmp_path):
    from deepep_env.builder.plan import plan
    from deepep_env.envspec import load_resolved

    fp, whl = wheel_project(tmp_path)
    r = load_resolved("h200-wheel", fp.project)
    assert r.nvshmem.provider == "wheel"
    assert r.nvshmem.source.tree_sha256 == file_tree_sha256(WHEEL, file_sha256(whl))
    assert r.nvshmem.source.urls == [URL]
    bp = plan(r, fp.project)
    nv = bp.node("nvshmem")
    assert nv.recipe_dir.name == "nvshmem-wheel" and nv.id and nv.externals == {}
    assert nv.variant == {"version": "3.4.5", "cuda_major": "13", "wheel": WHEEL}
    assert bp.node("deep-ep").deps == ("nvshmem",)


@pytest.mark.parametrize("edit, msg", [
    (('version = "3.4.5"\nprovider = "wheel"', 'version = "3.9.9"\nprovider = "wheel"'),
     "no pinned NVSHMEM wheel for version '3.9.9'"),
    (('[cuda]\nversion = "13.0"', '[cuda]\nversion = "12.9"'), "NVSHMEM 3.4.5 has no pinned nvidia-nvshmem-cu12 wheel for CUDA 12.9"),
    (('version = "3.4.5"\nprovider = "wheel"', 'version = ">=3.4"\nprovider = "wheel"'), "nvshmem.version"),
])
def test_a_wheel_that_is_not_pinned_is_one_clear_line(tmp_path, edit, msg):
    fp, _ = wheel_project(tmp_path)
    err = refusal_after_edit(fp, "h200-wheel", *edit)
    assert msg in err and "\n" not in err


def test_fetch_from_imports_the_wheel_by_sha256_and_refuses_another(tmp_path, monkeypatch):
    fp, whl = wheel_project(tmp_path)
    monkeypatch.setenv("DEEPEP_ENV_STATE", str(tmp_path / "state"))
    p = ["--project", str(fp.root)]
    # a different file under the pinned name: refused, nothing cached
    bad = tmp_path / "bad"
    make_wheel(bad / WHEEL, version="3.4.6")
    code, out, err = cli_subprocess("fetch", "h200-wheel", *p, "--from", str(bad), "--offline")
    assert code == 2 and "is not the pinned" in err, err
    code, out, err = cli_subprocess("fetch", "h200-wheel", *p, "--from", str(fp.upstream), "--offline", "--json")
    assert code == 0, err
    items = {(i["package"], i["name"]): i for i in json.loads(out)["items"]}
    assert items[("nvshmem", "nvshmem")]["status"] == "imported"
    entry = Path(items[("nvshmem", "nvshmem")]["path"])
    assert [e.name for e in entry.iterdir()] == [WHEEL]
    assert file_sha256(entry / WHEEL) == file_sha256(whl)


def test_fetch_downloads_the_wheel_from_its_url(tmp_path, monkeypatch):
    """The catalogued files.pythonhosted.org URL is what `fetch` downloads (the wheel kept whole)."""
    import importlib

    from deepep_env.builder.fetch_env import fetch_sources

    fetch_mod = importlib.import_module("deepep_env.sources.fetch")

    fp, whl = wheel_project(tmp_path)
    seen = []

    def fake_download(url, dest, **kw):
        seen.append(url)
        if url != URL:
            raise OSError("unreachable")
        shutil.copyfile(whl, dest)

    monkeypatch.setattr(fetch_mod, "_download", fake_download)
    # deep-ep's stand-in tarball is imported; the wheel must come from its URL
    shutil.move(str(whl), str(tmp_path / "elsewhere.whl"))
    whl = tmp_path / "elsewhere.whl"
    # the URL serving other bytes: refused with both hashes' meaning, nothing cached
    good = whl
    whl = make_wheel(tmp_path / "other" / WHEEL, version="3.4.6")
    with pytest.raises(UserError, match=r"has sha256 sha256:[0-9a-f]{64}, which is not the pinned") as ei:
        fetch_sources("h200-wheel", fp.project, cache=tmp_path / "cache", offline=False, from_dir=fp.upstream)
    assert "recipes/nvshmem-wheel/sources.toml" in str(ei.value)
    whl = good
    rep = fetch_sources("h200-wheel", fp.project, cache=tmp_path / "cache", offline=False, from_dir=fp.upstream)
    st = {(i.want.package, i.want.name): i for i in rep.items}
    assert st[("nvshmem", "nvshmem")].status == "fetched" and st[("nvshmem", "nvshmem")].origin == URL
    assert URL in seen
    entry = st[("nvshmem", "nvshmem")].path
    assert [e.name for e in entry.iterdir()] == [WHEEL] and file_sha256(entry / WHEEL) == file_sha256(good)


def test_build_repacks_the_wheel_deep_ep_builds_against_it_lock_and_install(tmp_path, monkeypatch, capsys):
    fp, whl = wheel_project(tmp_path)
    p = fetched(fp, "h200-wheel", tmp_path, monkeypatch, capsys)
    rc, out, err = cli_in_process(capsys, "build", "h200-wheel", *p, "--offline", "--json")
    assert rc == 0, err
    rep = json.loads(out)
    assert [(n["package"], n["status"]) for n in rep["nodes"]] == [("nvshmem", "built"), ("deep-ep", "built")]
    nv, dp = rep["nodes"]
    channel = fp.project.channel
    pkg = channel / nv["outputs"][0]
    assert Path(nv["outputs"][0]).name.startswith(f"deepep-nvshmem-3.4.5-h{nv['id'][7:17]}_0")
    paths = {e["_path"] for e in json.loads(read_in_package(pkg, "info/paths.json"))["paths"]}
    assert {"include/nvshmem.h", "include/device/nvshmem_defines.h", "lib/libnvshmem_host.so.3",
            "lib/libnvshmem_host.so", "lib/libnvshmem_device.a", "lib/libnvshmem_device.bc",
            "lib/nvshmem_transport_ibrc.so.4", "lib/nvshmem_transport_ibgda.so.4",
            "lib/nvshmem_bootstrap_uid.so.3", "share/doc/nvshmem/License.txt"} <= paths
    assert not any(x.startswith(("nvidia/", "site-packages")) or ".dist-info" in x for x in paths)
    assert read_in_package(pkg, "share/doc/nvshmem/wheel.txt").decode().strip() == WHEEL
    # deep-ep was built against the repack, and asks for exactly that build at run time
    assert b"3.4.5 (fake wheel)" in read_in_package(channel / dp["outputs"][0], "share/deep-ep/nvshmem.h")
    assert read_in_package(channel / dp["outputs"][0], "share/deep-ep/variant.txt") == b"provider=wheel\n"
    index = json.loads(read_in_package(channel / dp["outputs"][0], "info/index.json"))
    assert f"deepep-nvshmem ==3.4.5 h{nv['id'][7:17]}_0" in index["depends"]

    rc, out, err = cli_in_process(capsys, "lock", "h200-wheel", *p)
    assert rc == 0, err
    rc, out, err = cli_in_process(capsys, "lock", "h200-wheel", *p, "--check")
    assert rc == 0 and "lock fresh" in out, out + err
    rc, out, err = cli_in_process(capsys, "install", "h200-wheel", *p)
    assert rc == 0, err
    prefix = fp.project.prefix_for("h200-wheel")
    assert (prefix / "include" / "nvshmem.h").is_file()
    assert (prefix / "lib" / "libnvshmem_host.so.3").is_file()
    assert (prefix / "lib" / "nvshmem_transport_ibgda.so.4").is_file()
    assert (prefix / "share" / "deep-ep" / "nvshmem.h").is_file()


def test_plan_suggests_the_wheel_where_the_source_is_not_pinned(tmp_path):
    """gcp-b200 asks NVSHMEM 3.5.19, whose source tarball is not pinned: plan names the wheel edit;
    with that edit the spec plans a pinned nvshmem node from recipes/nvshmem-wheel."""
    from rich.console import Console

    from deepep_env.builder.plan import plan
    from deepep_env.cli.render_plan import render_plan
    from deepep_env.views.planning import make_plan
    from deepep_env.base.project import Project
    from deepep_env.envspec import load_resolved

    d = make_plan("gcp-b200-seed", Project(REPO), root=str(REPO / "nonexistent-root"))
    assert d["nvshmem_suggestion"] is not None
    assert "nvidia-nvshmem-cu12==3.5.19" in d["nvshmem_suggestion"]
    c = Console(record=True, width=400)
    render_plan(c, d)
    out = " ".join(c.export_text().split())
    assert '[nvshmem] version = "3.5.19"' in out and 'provider = "wheel"' in out   # a range spec needs both
    # a pinned source, or the wheel itself: no suggestion
    assert make_plan("h200-nvlink", Project(REPO), root=str(REPO / "nonexistent-root"))["nvshmem_suggestion"] is None

    root = tmp_path / "proj"
    (root / "env_specs").mkdir(parents=True)
    shutil.copytree(REPO / "recipes", root / "recipes")
    f = root / "env_specs" / "gcp-b200-seed.toml"
    text = (REPO / "env_specs" / "gcp-b200-seed.toml").read_text()
    f.write_text(text.replace('version = "3.5.19"\nibgda', 'version = "3.5.19"\nprovider = "wheel"\nibgda'))
    assert 'provider = "wheel"' in f.read_text()
    r = load_resolved("gcp-b200-seed", Project(root))
    nv = plan(r, Project(root)).node("nvshmem")
    assert nv.recipe_dir.name == "nvshmem-wheel" and nv.id is not None and not nv.unpinned
    assert nv.variant["wheel"].startswith("nvidia_nvshmem_cu12-3.5.19-")
    assert make_plan("gcp-b200-seed", Project(root), root=str(REPO / "nonexistent-root"))["nvshmem_suggestion"] is None

    # DeepEP V2 (recipes/deep-ep-v2, unchanged) on the repacked wheel: built against deepep-nvshmem
    v2 = (REPO / "env_specs" / "h200-nvlink-v2.toml").read_text()
    old = next(ln for ln in v2.splitlines() if ln.startswith('provider = "pip"') and "nvshmem" in ln)
    (root / "env_specs" / "h200-nvlink-v2.toml").write_text(v2.replace(old, 'provider = "wheel"'))
    bp = plan(load_resolved("h200-nvlink-v2", Project(root)), Project(root))
    assert bp.node("nvshmem").recipe_dir.name == "nvshmem-wheel"
    dp = bp.node("deep-ep")
    assert "nvshmem" in dp.deps and dp.variant["nvshmem_provider"] == "source" and "nvshmem" not in dp.externals


def test_a_patched_nvshmem_is_not_offered_the_unpatched_wheel():
    """gke-a4 builds NVSHMEM 3.2.5 with DeepEP's patch; PyPI's 3.2.5 wheel is pinned but a binary takes no
    patch (the spec would be refused): plan says the source must be pinned, not `provider = "wheel"`."""
    from deepep_env.base.project import Project
    from deepep_env.views.planning import make_plan

    d = make_plan("gke-a4-seed", Project(REPO), root=str(REPO / "nonexistent-root"))
    assert any(o["version"] == "3.2.5" and o["wheel"] for o in d["nvshmem_options"])
    s = d["nvshmem_suggestion"]
    assert s and "unpatched" in s and "deepep-nvshmem-3.2.5" in s and "deepep-env fetch gke-a4" in s
    assert 'provider = "wheel"' not in s
