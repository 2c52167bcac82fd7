"""Issue 40 item 1: CUDA from NVIDIA's PyPI wheels as a provider (``[cuda] provider = "wheel"``).

A throwaway project (build_fixtures.fake_project) whose toolkit catalog pins ten small fake wheels of
the real one's shape (nvidia/cu13/{bin,include,lib}, a .dist-info with a licence); the real
recipes/cuda-wheel repacks them into deepep-cuda-toolkit (compiling the real libcuda link stub with this
machine's cc); a stand-in deep-ep recipe in host mode reads the toolkit through ``cuda_prefix`` and
must find nvcc, the stub and the CUDA library headers of the host Python (a real venv holding
nvidia/cu13/include). Then lock and install: the toolkit is a build input, never a package of the env."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from build_fixtures import (REPO, fake_project, fetched, read_in_package, refusal_after_edit, stand_in_deepep,
                            wheel_catalog, write_wheel)
from cli_runner import cli_in_process
from deepep_env.base.errors import UserError
from deepep_env.base.hashing import file_sha256

PARTS = ("cccl", "crt", "culibos", "cupti", "cuxxfilt", "nvcc", "nvtx", "nvvm", "profiler_api", "runtime")

FAKE_DEEPEP_ON_CUDA = stand_in_deepep("""
    env:
      CUDA_HOME: ${{ cuda_prefix }}
    content:
      - test "${{ cuda_provider }}" = wheel
      - test -x $CUDA_HOME/bin/nvcc && test -e $CUDA_HOME/lib64/libcuda.so
      - test -f $CUDA_HOME/include/cuda.h && test -f $CUDA_HOME/include/cublas_v2.h
      - test -f $CUDA_HOME/targets/x86_64-linux/include/cublas_v2.h
      - mkdir -p $PREFIX/share/deep-ep
      - $CUDA_HOME/bin/nvcc --version > $PREFIX/share/deep-ep/nvcc.txt
      - cat $CUDA_HOME/include/cublas_v2.h > $PREFIX/share/deep-ep/cublas.txt
      - cp buffer.py $PREFIX/share/deep-ep/buffer.py
""")


def _members(part: str) -> dict[str, tuple[str, int]]:
    name = f"nvidia_cuda_{part}-13.0.88"
    out = {f"{name}.dist-info/licenses/License.txt": (f"NVIDIA licence of {part} (fake)\n", 0o644),
           f"{name}.dist-info/METADATA": (f"Name: nvidia-cuda-{part}\n", 0o644),
           f"nvidia/cu13/.metadata/{part}.txt": ("build farm\n", 0o644)}
    if part == "nvcc":
        out["nvidia/cu13/bin/nvcc"] = ("#!/bin/sh\necho 'Build cuda_13.0.r13.0/fake_0'\n", 0o755)
    if part == "runtime":
        out["nvidia/cu13/include/cuda.h"] = ("typedef int CUresult;\nCUresult cuInit(unsigned int f);\n"
                                              "CUresult cuDeviceGet(int *d, int o);\n", 0o644)
        out["nvidia/cu13/include/cuda_runtime.h"] = ("/* runtime */\n", 0o644)
        out["nvidia/cu13/lib/libcudart.so.13"] = ("\x7fELF fake\n", 0o755)
    else:
        out[f"nvidia/cu13/include/{part}.h"] = (f"/* {part} */\n", 0o644)
    return out


def make_wheels(where: Path) -> dict[str, Path]:
    where.mkdir(parents=True, exist_ok=True)
    out = {}
    for part in PARTS:
        out[part] = write_wheel(where / f"nvidia_cuda_{part}-13.0.88-py3-none-manylinux2014_x86_64.whl", _members(part))
    return out


def _catalog(wheels: dict[str, Path]) -> str:
    return wheel_catalog("cuda-wheel", "13.0", {part: (f"nvidia-cuda-{part.replace('_', '-')}", "13.0.88", w)
                                                for part, w in wheels.items()}, "3")


def host_venv(tmp_path: Path) -> Path:
    """A real venv whose site-packages holds nvidia/cu13/include (what torch's CUDA wheels install)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python3.*/site-packages"))
    inc = site / "nvidia" / "cu13" / "include"
    inc.mkdir(parents=True)
    (inc / "cublas_v2.h").write_text("/* cublas from the venv */\n")
    (inc / "cuda_runtime.h").write_text("/* the venv's runtime header: the toolkit's wins */\n")
    return venv / "bin" / "python3"


def cuda_project(tmp_path: Path):
    fp = fake_project(tmp_path)
    # (fake wheels whose part names follow the real catalog's, so the real recipe's ten sources match)
    wheels = make_wheels(fp.upstream)
    rdir = fp.root / "recipes" / "cuda-wheel"
    shutil.copytree(REPO / "recipes" / "cuda-wheel", rdir)
    (rdir / "sources.toml").write_text(_catalog(wheels))
    (fp.root / "recipes" / "deep-ep" / "recipe.yaml").write_text(FAKE_DEEPEP_ON_CUDA.lstrip())
    py = host_venv(tmp_path)
    f = fp.root / "env_specs" / "h200-nvlink.toml"
    text = f.read_text()
    for old, new in (('provider = "host"\nprefix = "/usr/local/cuda"', 'provider = "wheel"'),
                     ('executable = "/opt/torch/.venv/bin/python3"', f'executable = "{py}"')):
        assert old in text
        text = text.replace(old, new)
    f.write_text(text)
    return fp, wheels


def test_the_spec_plans_a_toolkit_node_every_cuda_reader_builds_against(tmp_path):
    from deepep_env.builder.plan import plan
    from deepep_env.envspec import load_resolved

    fp, wheels = cuda_project(tmp_path)
    r = load_resolved("h200-nvlink", fp.project)
    assert r.cuda.provider == "wheel"
    bp = plan(r, fp.project)
    cuda = bp.node("cuda")
    assert cuda.recipe_dir.name == "cuda-wheel" and cuda.version == "13.0.88" and cuda.id
    assert sorted(cuda.sources) == sorted(PARTS)
    assert set(cuda.externals) == {"c_compiler"} and "c_compiler" in cuda.externals["c_compiler"]["fingerprint"]
    for pkg in ("nvshmem", "deep-ep"):
        n = bp.node(pkg)
        assert "cuda" in n.deps and n.externals["cuda"]["provider"] == "wheel"
        assert {"host_compiler", "library_headers"} <= set(n.externals["cuda"]["fingerprint"])
        assert "nvcc" not in n.externals["cuda"]["fingerprint"]   # the toolkit is the cuda node's id
    assert bp.node("cuda") not in bp.roots()


def test_another_toolkit_wheel_is_another_deepep_id(tmp_path):
    from deepep_env.builder.plan import plan
    from deepep_env.envspec import load_resolved

    fp, wheels = cuda_project(tmp_path)
    before = plan(load_resolved("h200-nvlink", fp.project), fp.project)
    cat = fp.root / "recipes" / "cuda-wheel" / "sources.toml"
    nvcc = file_sha256(wheels["nvcc"])
    cat.write_text(cat.read_text().replace(nvcc, "sha256:" + "0" * 64))
    after = plan(load_resolved("h200-nvlink", fp.project), fp.project)
    assert after.node("cuda").id != before.node("cuda").id
    assert after.node("deep-ep").id != before.node("deep-ep").id


@pytest.mark.parametrize("edit, msg", [
    (('[cuda]\nversion = "13.0"', '[cuda]\nversion = "12.9"'), "no pinned CUDA toolkit wheels for CUDA '12.9'"),
    (('provider = "wheel"', 'provider = "wheel"\nprefix = "/usr/local/cuda"'), "cuda.prefix is only for provider = 'host'"),
])
def test_a_toolkit_that_is_not_pinned_is_one_clear_line(tmp_path, edit, msg):
    fp, _ = cuda_project(tmp_path)
    err = refusal_after_edit(fp, "h200-nvlink", *edit, count=1)
    assert msg in err and "\n" not in err


def test_a_catalog_wheel_named_for_another_project_is_refused(tmp_path):
    from deepep_env.envspec.cuda_wheels import load_toolkits

    fp, _ = cuda_project(tmp_path)
    cat = fp.root / "recipes" / "cuda-wheel" / "sources.toml"
    cat.write_text(cat.read_text().replace('project = "nvidia-cuda-nvvm"', 'project = "nvidia-cuda-nvcc"', 1))
    with pytest.raises(UserError) as ei:
        load_toolkits(fp.root / "recipes")
    assert "is not nvidia-cuda-nvcc==13.0.88" in str(ei.value) and "versions.13.0.linux-64.nvvm" in str(ei.value)


def test_a_subdir_without_an_nvcc_wheel_is_refused(tmp_path):
    """The toolkit's version is nvcc's: every subdir of a CUDA version needs that part."""
    from deepep_env.envspec.cuda_wheels import load_toolkits

    fp, _ = cuda_project(tmp_path)
    cat = fp.root / "recipes" / "cuda-wheel" / "sources.toml"
    text = cat.read_text()
    runtime = text[text.index('[versions."13.0".linux-64.runtime]'):]
    cat.write_text(text + "\n" + runtime.split("\n\n")[0].replace("linux-64", "linux-aarch64") + "\n")
    with pytest.raises(UserError) as ei:
        load_toolkits(fp.root / "recipes")
    assert "CUDA 13.0 has no nvcc wheel for linux-aarch64" in str(ei.value)
    assert "versions.13.0.linux-aarch64" in str(ei.value) and "\n" not in str(ei.value)


def test_the_real_catalog_pins_the_ten_wheels_of_cuda_13():
    from deepep_env.envspec.cuda_wheels import require_toolkit

    parts = require_toolkit(REPO / "recipes", "13.0", "linux-64")
    assert tuple(parts) == PARTS
    assert parts["nvcc"].project == "nvidia-cuda-nvcc" and parts["nvcc"].version == "13.0.88"


def test_build_repacks_the_toolkit_builds_read_it_and_the_env_never_holds_it(tmp_path, monkeypatch, capsys):
    from deepep_env.doctor.elf import read_dynamic_path

    fp, wheels = cuda_project(tmp_path)
    p = fetched(fp, "h200-nvlink", tmp_path, monkeypatch, capsys)
    rc, out, err = cli_in_process(capsys, "build", "h200-nvlink", *p, "--offline", "--json")
    assert rc == 0, err
    nodes = {n["package"]: n for n in json.loads(out)["nodes"]}
    assert nodes["cuda"]["status"] == "built" and nodes["deep-ep"]["status"] == "built"
    tk = fp.project.channel / nodes["cuda"]["outputs"][0]
    assert tk.name.startswith("deepep-cuda-toolkit-13.0.88-h")
    paths = {e["_path"] for e in json.loads(read_in_package(tk, "info/paths.json"))["paths"]}
    assert {"cuda/bin/nvcc", "cuda/include/cuda.h", "cuda/lib/libcuda.so", "cuda/lib/libcudart.so.13",
            "cuda/lib/libcudart.so", "cuda/lib64", "share/doc/deepep-cuda-toolkit/nvidia_cuda_nvcc-13.0.88/licenses/License.txt"} <= paths
    assert not any(".metadata" in x for x in paths)
    dp = fp.project.channel / nodes["deep-ep"]["outputs"][0]
    assert read_in_package(dp, "share/deep-ep/nvcc.txt").strip() == b"Build cuda_13.0.r13.0/fake_0"
    assert read_in_package(dp, "share/deep-ep/cublas.txt") == b"/* cublas from the venv */\n"
    # the stub: a real shared object, soname libcuda.so.1, one symbol per cu* entry point of cuda.h
    stub = tmp_path / "stub"
    stub.mkdir()
    from rattler.package_streaming import extract

    extract(tk, stub)
    so = stub / "cuda" / "lib" / "libcuda.so"
    assert read_dynamic_path(str(so)).soname == "libcuda.so.1"
    syms = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True, check=True).stdout
    assert {"cuInit", "cuDeviceGet"} <= {ln.split()[-1] for ln in syms.splitlines() if ln.strip()}
    # lock and install: the toolkit is in no env
    assert cli_in_process(capsys, "lock", "h200-nvlink", *p)[0] == 0
    assert "deepep-cuda-toolkit" not in (fp.root / "pixi.lock").read_text()
    rc, out, err = cli_in_process(capsys, "install", "h200-nvlink", *p)
    assert rc == 0, err
    prefix = fp.project.prefix_for("h200-nvlink")
    assert (prefix / "share" / "deep-ep" / "nvcc.txt").is_file() and not (prefix / "cuda").exists()
    # a fresh machine: no store, no channel, no prefix; the lock is enough: the install rebuilds deep-ep
    # and, for it, the toolkit (in no env, so only its id in deep-ep's names it), byte-identical
    locked = {q["sha256"] for q in _locked_conda(fp.root / "pixi.lock")}
    assert len(locked) == 2   # nvshmem and deep-ep (the fake project has no deepep-env recipe): not the toolkit
    for d in (fp.project.store, fp.project.channel, prefix):
        shutil.rmtree(d)
    rc, out, err = cli_in_process(capsys, "install", "h200-nvlink", *p)
    assert rc == 0, err
    rebuilt = {file_sha256(f)[7:] for f in fp.project.channel.glob("*/*.conda")}
    assert locked <= rebuilt and any(f.name.startswith("deepep-cuda-toolkit") for f in fp.project.channel.glob("*/*.conda"))


def _locked_conda(lock: Path) -> list[dict]:
    return [q for q in yaml.safe_load(lock.read_text())["packages"]
            if re.search(r"-h[0-9a-f]{10}_0\.conda$", q.get("conda", ""))]


def test_the_toolkit_and_its_readers_rebuild_to_the_same_bytes(tmp_path, monkeypatch, capsys):
    """Same id, same bytes: `build --check` rebuilds the toolkit (the unpacked wheels and the compiled
    libcuda stub) and the node that read it, and compares the archives."""
    fp, _ = cuda_project(tmp_path)
    p = fetched(fp, "h200-nvlink", tmp_path, monkeypatch, capsys)
    rc, out, err = cli_in_process(capsys, "build", "h200-nvlink", *p, "--offline", "--check", "--json")
    assert rc == 0, err
    checks = {c["package"]: c for c in json.loads(out)["checks"]}
    assert checks["cuda"]["identical"] and checks["deep-ep"]["identical"], checks
