"""Issue 14: nvcc embeds its own process id (temporary file names, the module id of relocatable
device code) in what it compiles; the recipes run it in a fresh PID namespace, which makes two
compilations of the same input the same bytes. Needs nvcc (skipped without one: no GPU is needed)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KERNEL = "__device__ int add1(int v) { return v + 1; }\n__global__ void k(int *x) { x[threadIdx.x] = add1(threadIdx.x); }\n"
# No externally visible kernel or function: nvcc's module id then hashes the source file's mtime.
STATIC_ONLY = "template <typename T> __device__ T twice(T v) { return v + v; }\nstatic __device__ int keep(int v) { return twice(v); }\n"


def _cuda_home() -> Path:
    nvcc = shutil.which("nvcc")
    if not nvcc:
        pytest.skip("nvcc not installed")
    out = subprocess.run([nvcc, "-rdc=true", "--dryrun", "-c", "x.cu"], capture_output=True, text=True).stderr
    top = next((ln.split("=", 1)[1].strip() for ln in out.splitlines() if ln.startswith("#$ TOP=")), None)
    if not top:
        pytest.skip("cannot tell where nvcc's toolkit is")
    return Path(top).resolve()


def _compile_twice(nvcc: str, d: Path, source: str = KERNEL) -> tuple[bytes, bytes]:
    (d / "k.cu").write_text(source)
    outs = []
    for i in range(2):
        os.utime(d / "k.cu", (1_600_000_000 + i, 1_600_000_000 + i))   # as a regenerated file would be
        subprocess.run([nvcc, "-rdc=true", "-arch=sm_90", "-c", "k.cu", "-o", "k.o"], cwd=d, check=True,
                       capture_output=True)
        outs.append((d / "k.o").read_bytes())
    return outs[0], outs[1]


def _shim(recipe: str, fn: str, cuda: Path, shim: Path) -> str:
    """What the recipe's helper prints: the recipes source recipes/_include/cuda-build.sh through
    their own cuda-build.sh link."""
    include = REPO / "recipes" / recipe / "cuda-build.sh"
    return subprocess.run(["bash", "-c", f'set -euo pipefail; . "{include}"; {fn} "{cuda}" "{shim}"'],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.parametrize("recipe,fn", [("nvshmem", "reproducible_nvcc"), ("deep-ep", "reproducible_nvcc"),
                                       ("deep-ep-v2", "reproducible_nvcc"), ("nccl", "reproducible_nvcc_bin")])
def test_the_recipes_nvcc_shim_compiles_the_same_bytes_twice(recipe, fn, tmp_path):
    cuda = _cuda_home()
    if subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True).returncode != 0 and \
            subprocess.run(["unshare", "--user", "--map-root-user", "--pid", "--fork", "true"],
                           capture_output=True).returncode != 0:
        pytest.skip("no PID namespaces here")
    shim = _shim(recipe, fn, cuda, tmp_path / "shim")
    if fn == "reproducible_nvcc_bin":   # NCCL's NVCC=: the compiler alone
        assert shim == f"{tmp_path}/shim/nvcc"
        nvcc = shim
    else:
        assert shim == f"{tmp_path}/shim" and (Path(shim) / "include").exists()
        nvcc = f"{shim}/bin/nvcc"
    a, b = _compile_twice(nvcc, tmp_path)
    assert a == b
    a, b = _compile_twice(nvcc, tmp_path, STATIC_ONLY)
    assert a == b
    # and the reason it exists: the toolkit's own nvcc, twice, differs (process ids in the object)
    a, b = _compile_twice(str(cuda / "bin" / "nvcc"), tmp_path)
    assert a != b


def test_the_shim_keeps_parallel_nvcc_runs_apart(tmp_path):
    """Every nvcc has the same pid in its own namespace; without a private TMPDIR, parallel runs
    (ninja -j) overwrote each other's tmpxft_<pid>_* files and DeepEP's build failed on an H200."""
    cuda = _cuda_home()
    if subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True).returncode != 0:
        pytest.skip("no PID namespaces here")
    shim = _shim("deep-ep", "reproducible_nvcc", cuda, tmp_path / "shim")
    for i in range(6):
        (tmp_path / f"p{i}.cu").write_text(KERNEL.replace("add1", f"add{i}"))
    procs = [subprocess.Popen([f"{shim}/bin/nvcc", "-rdc=true", "-arch=sm_90", "-c", f"p{i}.cu", "-o", f"p{i}.o"],
                              cwd=tmp_path, stderr=subprocess.PIPE) for i in range(6)]
    assert [p.wait() for p in procs] == [0] * 6
