"""Issue 17, the CPU part: DeepEP 2.x (EPv2) and NCCL from source — catalog pins, resolution, rules,
build graph, recipe rendering and the recipes' own scripts run against fakes (no GPU, no CUDA build).
The GPU part is `deepep-env prove h200-nvlink-v2` (docs/benchmarks.md "DeepEP 2.x")."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from deepep_env.builder.plan import nccl_conda_version, plan
from deepep_env.builder.preview import preview_plan
from deepep_env.base.errors import UserError
from deepep_env.base.hashing import tree_sha256
from deepep_env.base.project import Project
from deepep_env.envspec.catalog import SourcePin, load_catalog
from deepep_env.envspec.resolve import load_resolved

REPO = Path(__file__).resolve().parents[2]
V2 = "dd758caf451848bd150e1046af3d0a73e5fff38d"


@pytest.fixture(scope="module")
def repo() -> Project:
    return Project(REPO)


# -- the catalog -----------------------------------------------------------------------------------------
def test_deepep_2_1_0_is_pinned_by_content_with_its_fmt_submodule(repo):
    rev = load_catalog(repo.recipes, "deep-ep").revisions[V2]
    assert rev.engine == "v2" and rev.version == "2.1.0" and "elastic-buffer" in rev.features
    assert (rev.nccl, rev.pytorch, rev.cuda) == (">=2.30.4", ">=2.10", ">=12.3")
    # computed from DeepEP dd758ca with fmt a4c7e17 at third-party/fmt (docs/gpu-sources.md)
    assert rev.source.tree_sha256 == "sha256:73251d1814228aa030ba462c416811ec76c290bd921dba5d3844b93f25770d6f"
    (path, fmt), = rev.source.submodules.items()
    assert path == "third-party/fmt" and fmt.rev == "a4c7e17133ee9cb6a2f45545f6e974dd3c393efa"
    assert fmt.urls and fmt.git == "https://github.com/fmtlib/fmt.git"


def test_nccl_catalog_pins_tags_by_content(repo):
    cat = load_catalog(repo.recipes, "nccl")
    assert set(cat.versions) == {"2.30.7", "2.30.4"}
    for v, e in cat.versions.items():
        assert e.source.tag == f"v{v}-1" and e.source.pinned and len(e.source.rev or "") == 40
        assert e.source.urls[0].endswith(f"v{v}-1.tar.gz")


@pytest.mark.parametrize("tag,version,want", [("v2.30.7-1", "2.30.7", "2.30.7.1"), (None, "2.30.7", "2.30.7"),
                                              ("v2.30.4-1", "2.30.7", "2.30.7"), ("2.30.7", "2.30.7", "2.30.7")])
def test_nccl_conda_version_follows_conda_forge(tag, version, want):
    assert nccl_conda_version(version, SourcePin(tag=tag)) == want


def _catalog(tmp_path: Path, pkg: str, text: str) -> Path:
    (tmp_path / pkg).mkdir(parents=True)
    (tmp_path / pkg / "sources.toml").write_text(text)
    return tmp_path


SUB = '''format = 1
package = "deep-ep"
[revisions.{rev}]
version = "2.1.0"
label = "x"
engine = "v2"
{extra}
[revisions.{rev}.source]
rev = "{rev}"
[revisions.{rev}.source.submodules."{path}"]
rev = "{subrev}"
'''


@pytest.mark.parametrize("path,subrev,extra,field", [
    ("../escape", "a" * 40, "", "submodules"),
    ("/abs/fmt", "a" * 40, "", "submodules"),
    ("third-party//fmt", "a" * 40, "", "submodules"),
    ("third-party/./fmt", "a" * 40, "", "submodules"),
    ("third party/fmt", "a" * 40, "", "submodules"),
    ("third-party/fmt", "a4c7e17", "", "rev"),
    ("third-party/fmt", "A" * 40, "", "rev"),
    ("third-party/fmt", "a" * 40, 'nccl = "banana"', "nccl"),
    ("third-party/fmt", "a" * 40, 'pytorch = ">=2..10"', "pytorch"),
    ("third-party/fmt", "a" * 40, 'cuda = 12.3', "cuda"),
])
def test_bad_catalog_fields_are_one_clear_error(tmp_path, path, subrev, extra, field):
    d = _catalog(tmp_path, "deep-ep", SUB.format(rev=V2, path=path, subrev=subrev, extra=extra))
    with pytest.raises(UserError) as e:
        load_catalog(d, "deep-ep")
    assert field in (e.value.field or "") and "sources.toml" in str(e.value)


def test_unknown_submodule_key_is_refused(tmp_path):
    d = _catalog(tmp_path, "deep-ep", SUB.format(rev=V2, path="third-party/fmt", subrev="a" * 40, extra="")
                 + 'branch = "main"\n')
    with pytest.raises(UserError) as e:
        load_catalog(d, "deep-ep")
    assert "branch" in (e.value.field or "")


# -- fetching an archive plus its submodule ----------------------------------------------------------------
def _tar(path: Path, root: Path, prefix: str) -> None:
    with tarfile.open(path, "w:gz") as tf:
        tf.add(root, arcname=prefix)


def _superproject(tmp_path: Path) -> tuple[Path, Path, str]:
    sup, fmt = tmp_path / "super", tmp_path / "fmt"
    (sup / "third-party" / "fmt").mkdir(parents=True)          # what GitHub's archive has: an empty gitlink dir
    (sup / "setup.py").write_text("print('deep_ep')\n")
    (fmt / "include" / "fmt").mkdir(parents=True)
    (fmt / "include" / "fmt" / "core.h").write_text("// fmt\n")
    whole = tmp_path / "whole"
    shutil.copytree(sup, whole)
    shutil.rmtree(whole / "third-party" / "fmt")
    shutil.copytree(fmt, whole / "third-party" / "fmt")
    _tar(tmp_path / "deepep.tar.gz", sup, "DeepEP-x")
    _tar(tmp_path / "fmt.tar.gz", fmt, "fmt-x")
    return tmp_path / "deepep.tar.gz", tmp_path / "fmt.tar.gz", tree_sha256(whole)


def test_archive_fetch_places_the_submodule_before_hashing(tmp_path):
    from deepep_env.sources.fetch import Want, fetch
    from deepep_env.sources.submodules import Submodule

    deepep, fmt, digest = _superproject(tmp_path)
    sub = Submodule("third-party/fmt", None, "a" * 40, (f"file://{tmp_path}/gone.tar.gz", f"file://{fmt}"))
    want = Want("deep-ep", "source", "deep-ep", digest, (f"file://{deepep}",), submodules=(sub,))
    (item,) = fetch([want], tmp_path / "cache").items
    assert item.status == "fetched" and item.digest == digest
    assert (item.path / "third-party" / "fmt" / "include" / "fmt" / "core.h").is_file()


def test_archive_without_its_submodule_never_passes_for_the_pinned_tree(tmp_path):
    from deepep_env.sources.fetch import Want, fetch
    from deepep_env.sources.submodules import Submodule

    deepep, _, digest = _superproject(tmp_path)
    sub = Submodule("third-party/fmt", None, "a" * 40, (f"file://{tmp_path}/gone.tar.gz",))
    want = Want("deep-ep", "source", "deep-ep", digest, (f"file://{deepep}",), submodules=(sub,))
    with pytest.raises(UserError) as e:
        fetch([want], tmp_path / "cache")
    assert "submodule third-party/fmt" in str(e.value) and not (tmp_path / "cache" / "trees").exists()


def test_fetch_from_a_folder_takes_the_full_tree(tmp_path):
    """What the GPU run carries (.gpu17/sources): one tarball of DeepEP with fmt in place."""
    from deepep_env.sources.fetch import Want, fetch

    _, _, digest = _superproject(tmp_path)
    carry = tmp_path / "carry"
    carry.mkdir()
    _tar(carry / "deepep-with-fmt.tar.xz", tmp_path / "whole", "DeepEP-x")
    want = Want("deep-ep", "source", "deep-ep", digest, ())
    (item,) = fetch([want], tmp_path / "cache", offline=True, from_dir=carry).items
    assert item.status == "imported" and item.digest == digest


# -- resolution and the build graph ------------------------------------------------------------------------
def test_h200_nvlink_v2_builds_nccl_then_deepep_v2(repo):
    r = load_resolved("h200-nvlink-v2", repo)
    assert (r.nccl.version, r.nccl.provider, r.nvshmem.provider, r.deepep.engine) == ("2.30.7", "source", "pip", "v2")
    assert any(d.startswith("nccl.version: '>=2.30.4' -> 2.30.7") for d in r.decisions)
    bp = plan(r, repo)
    assert [n.package for n in bp.nodes] == ["deepep-env", "nccl", "deep-ep"]   # the tool, in every env
    _tool, nccl, deep = bp.nodes
    assert nccl.version == "2.30.7.1" and nccl.variant["cuda_architectures"] == ["90"]
    assert nccl.variant["revision"] == "73cf112295c33aee2b895f329f592f2a9b4b0f97" and nccl.id
    assert deep.recipe_dir.name == "deep-ep-v2" and deep.deps == ("nccl",)
    assert deep.preimage["dependencies"] == {"nccl": nccl.id}
    assert {k: v for k, v in deep.externals["nvshmem"].items() if k != "fingerprint"} == {"provider": "pip", "version": "3.4.5"}
    assert set(deep.externals["nvshmem"]["fingerprint"]) <= {"headers", "libraries", "nvshmem"}   # pip's wheel, fingerprinted
    assert deep.variant["nccl_provider"] == "source" and deep.variant["nccl_version"] == "2.30.7"


def test_seed_v2_spec_is_all_conda_with_our_nccl(repo):
    bp = plan(load_resolved("gcp-b200-v2", repo), repo)
    assert [n.package for n in bp.nodes] == ["deepep-env", "nvshmem", "nccl", "deep-ep"]
    assert bp.node("deep-ep").deps == ("nvshmem", "nccl") and all(n.id for n in bp.nodes)
    assert bp.node("nccl").variant["cuda_architectures"] == ["100"]


def test_v1_nodes_are_untouched(repo):
    """recipes/deep-ep and its variant are what they were: V1 ids (and the committed locks) stay."""
    deep = plan(load_resolved("h200-nvlink", repo), repo).node("deep-ep")
    assert deep.recipe_dir.name == "deep-ep" and "nccl_provider" not in deep.variant
    assert "nccl" not in deep.externals and "nvshmem" not in deep.externals


def test_pr696_patch_enters_the_deepep_id_only_where_selected(repo, tmp_path):
    """Issue 27: PR #696 (vLLM's deepep_nvshmem_rc_qp.patch) is an optional catalog patch: selecting it puts its
    sha256 in the deep-ep node's pre-image (a new id); specs that do not select it keep theirs."""
    base = plan(load_resolved("h200-nvlink-v2", repo), repo)
    assert base.node("deep-ep").preimage.get("patches", []) == []
    pin = load_catalog(REPO / "recipes", "deep-ep").patches["deepep-pr696-nvshmem-rc-qp"]
    spec = (REPO / "env_specs" / "h200-nvlink-v2.toml").read_text()
    alt = tmp_path / "h200-nvlink-v2.toml"
    alt.write_text(spec.replace("[deepep]\n", '[deepep]\npatches = ["deepep-pr696-nvshmem-rc-qp"]\n', 1))
    other = plan(load_resolved(str(alt), repo), repo)
    assert other.node("deep-ep").preimage["patches"] == [pin.sha256]
    assert other.node("deep-ep").id != base.node("deep-ep").id and other.node("nccl").id == base.node("nccl").id


def test_nccl_id_moves_with_the_architectures_and_the_tree(repo, tmp_path):
    base = plan(load_resolved("h200-nvlink-v2", repo), repo)
    spec = (REPO / "env_specs" / "h200-nvlink-v2.toml").read_text()
    alt = tmp_path / "h200-nvlink-v2.toml"
    alt.write_text(spec.replace('architectures = ["9.0"]', 'architectures = ["9.0", "10.0"]'))
    other = plan(load_resolved(str(alt), repo), repo)
    assert other.node("nccl").id != base.node("nccl").id and other.node("deep-ep").id != base.node("deep-ep").id
    alt.write_text(spec.replace('version = ">=2.30.4"   #', 'version = "2.30.4"   #'))
    older = plan(load_resolved(str(alt), repo), repo)
    assert older.node("nccl").version == "2.30.4.1" and older.node("nccl").id != base.node("nccl").id


# -- the recipes as rendered --------------------------------------------------------------------------------
def test_v2_host_mode_renders_exact_nccl_and_no_nvshmem_package(repo):
    r = preview_plan(plan(load_resolved("h200-nvlink-v2", repo), repo))
    nccl = plan(load_resolved("h200-nvlink-v2", repo), repo).node("nccl")
    deep = r["deep-ep"]["deep-ep"]
    pin = f"nccl ==2.30.7.1 {nccl.build_string}"
    # the run requirements add the tool (its activation hook) by version range
    assert deep["host"] == [pin] and deep["run"] == ["deepep-env >=0.2,<1", pin]
    assert r["nccl"]["nccl"] == {}   # host mode: the machine's toolkit and compilers, nothing from conda


def test_nccl_renders_the_version_dependents_pin(repo):
    """The package's version is the node's (2.30.7.1), which deep-ep's exact pin and the lock name."""
    from deepep_env.builder.driver import recipe_context, render

    node = plan(load_resolved("h200-nvlink-v2", repo), repo).node("nccl")
    ctx = recipe_context(node, source_dirs={"nccl": Path("/staged/nccl")}, deps=[], jobs=1, primary="nccl")
    (v,) = render(node.recipe_dir / "recipe.yaml", ctx, package="nccl")
    assert str(v.recipe.package.version) == node.version == "2.30.7.1"


def test_v2_conda_mode_renders_the_jit_toolchain_as_run_requirements(repo):
    r = preview_plan(plan(load_resolved("gcp-b200-v2", repo), repo))
    deep = r["deep-ep"]["deep-ep"]
    for want in ("cuda-nvcc", "cuda-cuobjdump", "cuda-cudart", "python 3.12.*"):
        assert want in deep["run"], want
    assert any(x.startswith("deepep-nvshmem ==3.4.5 h") for x in deep["run"])
    assert any(x.startswith("nccl ==2.30.7.1 h") for x in deep["run"])
    nccl = r["nccl"]["nccl"]
    assert {"make", "cuda-nvcc_linux-64 12.9.*"} <= set(nccl["build"]) and "cuda-cudart-dev" in nccl["host"]


# -- the NCCL recipe's scripts, against a fake toolkit and a fake make --------------------------------------
FAKE_MAKE = r'''#!/usr/bin/env bash
printf '%s\n' "$@" > "$MAKE_ARGS"
b=""; for a in "$@"; do case "$a" in BUILDDIR=*) b="${a#BUILDDIR=}" ;; esac; done
mkdir -p "$b/lib/pkgconfig" "$b/include/nccl_device"
echo 'x' > "$b/lib/libnccl.so.2.30.7"; ln -sf libnccl.so.2.30.7 "$b/lib/libnccl.so.2"; ln -sf libnccl.so.2 "$b/lib/libnccl.so"
echo '#define NCCL_VERSION_CODE 23007' > "$b/include/nccl.h"; touch "$b/include/nccl_device.h" "$b/lib/pkgconfig/nccl.pc"
'''


def _run_nccl_build(tmp_path: Path, archs: str, version: str = "2.30.7.1") -> tuple[subprocess.CompletedProcess, list[str], Path]:
    src = tmp_path / "src"
    (src / "makefiles").mkdir(parents=True)
    (src / "makefiles" / "version.mk").write_text(
        "NCCL_MAJOR   := 2\nNCCL_MINOR   := 30\nNCCL_PATCH   := 7\nNCCL_SUFFIX  :=\nPKG_REVISION := 1\n")
    tools = tmp_path / "tools"
    (tmp_path / "cuda" / "bin").mkdir(parents=True)
    (tmp_path / "cuda" / "bin" / "nvcc").write_text("#!/bin/sh\nexit 0\n")
    tools.mkdir()
    (tools / "make").write_text(FAKE_MAKE)
    for f in (tools / "make", tmp_path / "cuda" / "bin" / "nvcc"):
        f.chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", "PREFIX": str(tmp_path / "prefix"),
           "SRC_DIR": str(src), "MAKE_ARGS": str(tmp_path / "args"), "NCCL_ARCHS": archs, "NCCL_PKG_VERSION": version,
           "NCCL_REVISION": "73cf112295c33aee2b895f329f592f2a9b4b0f97", "DEEPEP_CUDA_PREFIX": str(tmp_path / "cuda"),
           "DEEPEP_CUDA_PROVIDER": "host", "CPU_COUNT": "3"}
    res = subprocess.run(["bash", str(REPO / "recipes/nccl/build.sh")], cwd=src, env=env, capture_output=True, text=True)
    args = (tmp_path / "args").read_text().splitlines() if (tmp_path / "args").exists() else []
    return res, args, tmp_path / "prefix"


def test_nccl_build_asks_make_for_the_spec_architectures_only(tmp_path):
    res, args, prefix = _run_nccl_build(tmp_path, "90")
    assert res.returncode == 0, res.stderr
    assert "src.lib" in args and "-j3" in args
    assert "NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90" in args
    # no Blackwell: upstream's sm_100f-only FP8 kernels get sm_90 (their bodies are arch-guarded: empty)
    assert "NVCC_GENCODE_LDMC_FP8=-gencode=arch=compute_90,code=sm_90" in args
    assert "CUDARTLIB=cudart_static" in args and "NCCL_GIT_COMMIT_HASH=73cf112295c33aee2b895f329f592f2a9b4b0f97" in args
    assert any(a.startswith("NVCC=") and "nvcc" in a for a in args)
    assert os.readlink(prefix / "lib/libnccl.so") == "libnccl.so.2" and (prefix / "include/nccl.h").is_file()
    assert (prefix / "lib/pkgconfig/nccl.pc").is_file() and not (prefix / "lib/libnccl_static.a").exists()


def test_nccl_build_keeps_upstream_blackwell_kernels_for_a_blackwell_spec(tmp_path):
    res, args, _ = _run_nccl_build(tmp_path, "90;100")
    assert res.returncode == 0, res.stderr
    assert "NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_100,code=sm_100" in args
    assert not any(a.startswith("NVCC_GENCODE_LDMC_FP8") for a in args)


def test_nccl_build_refuses_a_tree_of_another_release(tmp_path):
    res, args, _ = _run_nccl_build(tmp_path, "90", version="2.30.4.1")
    assert res.returncode != 0 and "makefiles/version.mk" in res.stderr and args == []


def _fake_nccl_prefix(tmp_path: Path, elf_archs: list[str], code: int = 23007) -> tuple[Path, Path]:
    p = tmp_path / "p"
    (p / "lib").mkdir(parents=True)
    (p / "include").mkdir()
    (p / "include" / "nccl.h").write_text(f"#define NCCL_VERSION_CODE {code}\n")
    (p / "lib" / "libnccl.so.2.30.7").write_bytes(b"x")
    os.symlink("libnccl.so.2.30.7", p / "lib" / "libnccl.so.2")
    os.symlink("libnccl.so.2", p / "lib" / "libnccl.so")
    cuda = tmp_path / "cuda"
    (cuda / "bin").mkdir(parents=True)
    lines = "".join(f'echo "ELF file    {i}: libnccl.so.2.30.7.{a}.cubin"\n' for i, a in enumerate(elf_archs, 1))
    (cuda / "bin" / "cuobjdump").write_text("#!/bin/sh\n" + lines)
    (cuda / "bin" / "cuobjdump").chmod(0o755)
    return p, cuda


@pytest.mark.parametrize("elf,archs,ok", [
    (["sm_90", "sm_90"], "90", True),
    (["sm_90", "sm_100"], "90", False),              # device code the spec did not ask for
    (["sm_90"], "90;100", False),                    # an architecture missing
    (["sm_90", "sm_100", "sm_100f"], "90;100", True),  # upstream's Blackwell-family FP8 kernels
])
def test_nccl_recipe_test_checks_the_architectures(tmp_path, elf, archs, ok):
    p, cuda = _fake_nccl_prefix(tmp_path, elf)
    res = subprocess.run(["bash", str(REPO / "recipes/nccl/check_nccl.sh"), str(p), "2.30.7.1", archs, str(cuda)],
                         capture_output=True, text=True)
    assert (res.returncode == 0) == ok, res.stdout + res.stderr


def test_nccl_recipe_test_checks_the_version(tmp_path):
    p, cuda = _fake_nccl_prefix(tmp_path, ["sm_90"], code=22809)
    res = subprocess.run(["bash", str(REPO / "recipes/nccl/check_nccl.sh"), str(p), "2.30.7.1", "90", str(cuda)],
                         capture_output=True, text=True)
    assert res.returncode != 0 and "not NCCL 2.30.7" in res.stderr


# -- the DeepEP 2.x recipe test (verify_install.py) on fake prefixes ----------------------------------------
def v2_prefix(dest: Path, **kw) -> Path:
    from doctor_fixtures import make_v2_prefix

    return make_v2_prefix(dest, marker=False, **kw)


def _verify(prefix: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["python3", str(REPO / "recipes/deep-ep-v2/verify_install.py"), "--prefix", str(prefix),
                           "--python-version", "3.12"], capture_output=True, text=True)


def test_verify_install_v2_passes_on_a_good_prefix(tmp_path):
    res = _verify(v2_prefix(tmp_path / "p"))
    assert res.returncode == 0, res.stdout
    assert "libnccl.so.2.30.7" in res.stdout and "torch preload link: nvidia/nccl/lib/libnccl.so.2" in res.stdout


@pytest.mark.parametrize("kw,msg", [
    ({"lib_version": "2.30.4"}, "DeepEP was built against NCCL 2.30.7"),
    ({"envs_root": "/somewhere/else"}, "does not point EP_NCCL_ROOT_DIR"),
    ({"engine": "v1"}, "expected 'v2'"),
    ({"needed": ("libnvshmem_host.so.3",)}, "does not link libnccl.so"),
])
def test_verify_install_v2_names_what_is_wrong(tmp_path, kw, msg):
    res = _verify(v2_prefix(tmp_path / "p", **kw))
    assert res.returncode == 1 and msg in res.stdout, res.stdout


def test_verify_install_v2_catches_a_broken_preload_link(tmp_path):
    p = v2_prefix(tmp_path / "p")
    link = p / "lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"
    link.unlink()
    os.symlink("/usr/lib/libnccl.so.2", link)
    res = _verify(p)
    assert res.returncode == 1 and "does not resolve to the env's lib/libnccl.so.2" in res.stdout


# -- the DeepEP 2.x recipe's build script, against a fake Python/pip and a fake toolkit ---------------------
FAKE_PY = r'''#!/usr/bin/env bash
# Stands in for the spec's Python: `-c` (the torch banner) and `-m pip install` are faked; scripts on
# stdin (the build record, the wheel lookup) run in the real interpreter.
if [ "$1" = "-c" ]; then echo "torch 2.11.0+cu130 (fake)"; exit 0; fi
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
  shift 2; t=""; while [ $# -gt 0 ]; do [ "$1" = "--target" ] && t="$2"; shift; done
  env | grep -E '^(EP_NCCL_ROOT_DIR|NCCL_DIR|NVSHMEM_DIR|EP_NVSHMEM_ROOT_DIR|EP_JIT_CACHE_DIR|TORCH_CUDA_ARCH_LIST|DISABLE_AGGRESSIVE_PTX_INSTRS|MAX_JOBS)=' > "$PIP_ENV"
  mkdir -p "$t/deep_ep/buffers" && echo "" > "$t/deep_ep/__init__.py"
  echo " > NCCL path: ${EP_NCCL_ROOT_DIR:-found by find_pkgs}"; exit 0
fi
exec python3 "$@"
'''


def _run_deepep_build(tmp_path: Path, *, nccl="source", nvshmem="pip", torch="host", wheels=()) -> tuple[subprocess.CompletedProcess, dict, Path]:
    src = tmp_path / "src"
    for d in ("tests/legacy", "tests/elastic"):
        (src / d).mkdir(parents=True)
    (src / "tests/legacy/test_low_latency.py").write_text("")
    (src / "tests/elastic/test_ep.py").write_text("")
    (tmp_path / "cuda" / "bin").mkdir(parents=True)
    (tmp_path / "cuda" / "bin" / "nvcc").write_text("#!/bin/sh\n")
    py = tmp_path / "python"
    py.write_text(FAKE_PY)
    py.chmod(0o755)
    site = tmp_path / "wheels"                      # the host Python's site-packages, as importlib sees it
    for name, version in wheels:
        d = site / f"{name.replace('-', '_')}-{version}.dist-info"
        d.mkdir(parents=True)
        (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    prefix = tmp_path / "prefix"
    env = {**os.environ, "PREFIX": str(prefix), "SRC_DIR": str(src), "RECIPE_DIR": str(REPO / "recipes/deep-ep-v2"),
           "PIP_ENV": str(tmp_path / "pip-env"), "PYTHONPATH": str(site), "DEEPEP_PYTHON": str(py),
           "DEEPEP_PY_VERSION": "3.12", "DEEPEP_CUDA_PREFIX": str(tmp_path / "cuda"), "DEEPEP_CUDA_PROVIDER": "host",
           "DEEPEP_PYTORCH_PROVIDER": torch, "DEEPEP_NCCL_PROVIDER": nccl, "DEEPEP_NCCL_VERSION": "2.30.7",
           "DEEPEP_NVSHMEM_PROVIDER": nvshmem, "DEEPEP_NVSHMEM_VERSION": "3.4.5", "DEEPEP_TORCH_CUDA_ARCH_LIST": "9.0",
           "DEEPEP_AGGRESSIVE_PTX": "false", "DEEPEP_REVISION": V2, "DEEPEP_REQUIRE": "elastic-buffer",
           "DEEPEP_BUILD_STRING": "hfeedbeef00_0", "EP_JIT_CACHE_DIR": "/must/not/be/baked", "CPU_COUNT": "7"}
    res = subprocess.run(["bash", str(REPO / "recipes/deep-ep-v2/build.sh")], cwd=src, env=env, capture_output=True, text=True)
    pip_env = dict(l.split("=", 1) for l in (tmp_path / "pip-env").read_text().splitlines()) if (tmp_path / "pip-env").exists() else {}
    return res, pip_env, prefix


def test_deepep_v2_build_bakes_the_env_nccl_and_links_it_for_pip_torch(tmp_path):
    res, pip_env, prefix = _run_deepep_build(tmp_path, wheels=[("nvidia-nvshmem-cu13", "3.4.5")])
    assert res.returncode == 0, res.stdout + res.stderr
    assert pip_env["EP_NCCL_ROOT_DIR"] == str(prefix) and "NVSHMEM_DIR" not in pip_env   # pip NVSHMEM: find_pkgs
    assert "EP_JIT_CACHE_DIR" not in pip_env            # never baked into deep_ep/envs.py
    assert pip_env["TORCH_CUDA_ARCH_LIST"] == "9.0" and pip_env["DISABLE_AGGRESSIVE_PTX_INSTRS"] == "1"
    site = prefix / "lib/python3.12/site-packages"
    assert os.readlink(site / "nvidia/nccl/lib/libnccl.so.2") == "../../../../../libnccl.so.2"
    assert os.path.realpath(site / "nvidia/nccl/lib/libnccl.so.2") == os.path.realpath(prefix / "lib/libnccl.so.2")
    assert (prefix / "share/deep-ep/tests/test_low_latency.py").is_file()
    assert (prefix / "share/deep-ep/tests/elastic/test_ep.py").is_file() and (prefix / "share/deep-ep/verify_install.py").is_file()
    rec = json.loads((site / "deep_ep/_deepep_env_build.json").read_text())
    assert rec["engine"] == "v2" and rec["nccl"] == {"provider": "source", "version": "2.30.7",
                                                     "torch_preload_link": "nvidia/nccl/lib/libnccl.so.2"}
    assert rec["require"] == ["elastic-buffer"] and rec["jit"]["cache_variable"] == "EP_JIT_CACHE_DIR"


def test_deepep_v2_build_conda_torch_needs_no_link_and_source_nvshmem_is_the_prefix(tmp_path):
    res, pip_env, prefix = _run_deepep_build(tmp_path, nvshmem="source", torch="conda")
    assert res.returncode == 0, res.stdout + res.stderr
    assert pip_env["NVSHMEM_DIR"] == str(prefix) and pip_env["EP_NCCL_ROOT_DIR"] == str(prefix)
    assert not (prefix / "lib/python3.12/site-packages/nvidia").exists()


@pytest.mark.parametrize("wheels,msg", [
    ([], "the host Python has nvidia-nvshmem none"),
    ([("nvidia-nvshmem-cu13", "3.3.20")], "the host Python has nvidia-nvshmem 3.3.20"),
])
def test_deepep_v2_build_refuses_a_pip_wheel_the_spec_does_not_name(tmp_path, wheels, msg):
    res, pip_env, _ = _run_deepep_build(tmp_path, wheels=wheels)
    assert res.returncode != 0 and msg in res.stderr and pip_env == {}


def test_deepep_v2_build_takes_a_pip_nccl_from_the_wheel(tmp_path):
    res, pip_env, prefix = _run_deepep_build(tmp_path, nccl="pip", wheels=[("nvidia-nvshmem-cu13", "3.4.5"),
                                                                           ("nvidia-nccl-cu13", "2.30.7")])
    assert res.returncode == 0, res.stderr
    assert "EP_NCCL_ROOT_DIR" not in pip_env and not (prefix / "lib/python3.12/site-packages/nvidia").exists()


def test_conda_forge_pytorch_takes_our_nccl(repo, tmp_path):
    """'Packaged like conda-forge's nccl so either can satisfy the same requirement': conda-forge's
    libtorch 2.10 asks for nccl >=2.28.9.1,<3.0a0 (tests/fixtures/conda-forge); the env of gcp-b200-v2
    solves with our nccl 2.30.7.1 — the one deep-ep pins — in its place, so torch and DeepEP load one NCCL."""
    from build_fixtures import FORGE, records_channel as _channel, solve_linux64 as _solve

    bp = plan(load_resolved("gcp-b200-v2", repo), repo)
    nccl, nvshmem = bp.node("nccl"), bp.node("nvshmem")
    ours = _channel(tmp_path / "ours", [
        {"name": "nccl", "version": nccl.version, "build": nccl.build_string,
         "depends": ["cuda-version >=12,<13.0a0"]},
        {"name": "deepep-nvshmem", "version": nvshmem.version, "build": nvshmem.build_string,
         "depends": ["cuda-version >=12.9,<12.10.0a0"]},
        {"name": "deep-ep", "version": "2.1.0", "build": "unpinned",
         "depends": [f"nccl =={nccl.version} {nccl.build_string}", f"deepep-nvshmem =={nvshmem.version} {nvshmem.build_string}",
                     "pytorch ==2.10.0 cuda129_mkl_py312_h0a1b2c3_300", "python 3.12.*", "cuda-version >=12.9,<12.10.0a0",
                     "cuda-cudart", "cuda-cuobjdump"]},
    ])
    env = _solve(["deep-ep ==2.1.0 unpinned", "python 3.12.*", "cuda-version 12.9.*", "pytorch ==2.10.0 cuda129*"],
                 [ours, FORGE.as_uri()])
    assert str(env["nccl"].version) == "2.30.7.1" and str(env["nccl"].build) == nccl.build_string
    assert "libtorch" in env and str(env["pytorch"].build).startswith("cuda129")
