"""Issue 40 item 1: PyTorch and NCCL from PyPI's wheels (``[pytorch] provider = "wheel"``, ``[nccl] provider =
"wheel"``).

A throwaway project (build_fixtures.fake_project) whose PyTorch catalog pins one small fake wheel per part
of the real catalog (the real recipe names every part as a source): torch (pure Python, an entry point
pip would make a script of), NCCL's library, cublas's header, a wheel whose files sit under
``.data/purelib``. The real recipes/pytorch-wheel repacks them into deepep-pytorch; a stand-in deep-ep
recipe in host mode imports torch through ``python_executable`` (the host interpreter, a real venv
without torch, wrapped to find the package first). Then lock, install and activate: the package is in the
env, and the host interpreter imports the env's torch."""
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

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REAL = tomllib.loads((REPO / "recipes" / "pytorch-wheel" / "sources.toml").read_text())["versions"]["2.11.0"]["linux-64"]

FAKE_DEEPEP_ON_TORCH = stand_in_deepep("""
    env:
      PYTHON: ${{ python_executable }}
    content:
      - test "${{ pytorch_provider }}" = wheel
      - mkdir -p $PREFIX/share/deep-ep
      - $PYTHON -c "import torch; print(torch.__version__, torch.version.cuda)" > $PREFIX/share/deep-ep/torch.txt
      - $PYTHON -c "import torch, mpmath; print(torch.__file__); print(mpmath.__file__)" > $SRC_DIR/where.txt
      - grep -q "/pytorch/package/lib/python3.12/site-packages/torch/__init__.py" $SRC_DIR/where.txt
      - grep -q "/pytorch/package/lib/python3.12/site-packages/mpmath/__init__.py" $SRC_DIR/where.txt
      - cp buffer.py $PREFIX/share/deep-ep/buffer.py
""")


def _stem(project: str) -> str:
    return re.sub(r"[-_.]+", "_", project).lower()


def _members(part: str, w: dict) -> dict[str, tuple[str, int]]:
    di = f"{_stem(w['project'])}-{w['version']}.dist-info"
    out = {f"{di}/METADATA": (f"Name: {w['project']}\nVersion: {w['version']}\n", 0o644),
           f"{di}/licenses/LICENSE": (f"the licence of {w['project']} (fake)\n", 0o644),
           f"{di}/RECORD": ("", 0o644)}
    if part == "torch":
        out["torch/__init__.py"] = ('__version__ = "2.11.0"\nfrom . import version\n', 0o644)
        out["torch/version.py"] = ('cuda = "13.0"\n', 0o644)
        out[f"{di}/entry_points.txt"] = ("[console_scripts]\ntorchrun = torch.distributed.run:main\n", 0o644)
    elif part == "nvidia_nccl_cu13":
        out["nvidia/nccl/lib/libnccl.so.2"] = ("\x7fELF fake nccl\n", 0o755)
    elif part == "nvidia_cublas":
        out["nvidia/cu13/include/cublas_v2.h"] = ("/* cublas from deepep-pytorch */\n", 0o644)
    elif part == "mpmath":   # a wheel whose modules sit under .data/purelib, as some do
        out[f"{_stem(w['project'])}-{w['version']}.data/purelib/mpmath/__init__.py"] = ("x = 1\n", 0o644)
    else:
        out[f"{_stem(w['project'])}/__init__.py"] = ("", 0o644)
    return out


def make_wheels(where: Path) -> dict[str, Path]:
    where.mkdir(parents=True, exist_ok=True)
    out = {}
    for part, w in sorted(REAL.items()):
        tags = "cp312-cp312-manylinux_2_28_x86_64" if part == "torch" else "py3-none-any"
        out[part] = write_wheel(where / f"{_stem(w['project'])}-{w['version']}-{tags}.whl", _members(part, w))
    return out


def _catalog(wheels: dict[str, Path]) -> str:
    return wheel_catalog("pytorch-wheel", "2.11.0", {part: (REAL[part]["project"], REAL[part]["version"], f)
                                                     for part, f in wheels.items()}, "4")


def bare_venv(tmp_path: Path) -> Path:
    """A real venv without torch: the host interpreter a wheel PyTorch runs on."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv / "bin" / "python3"


def torch_project(tmp_path: Path):
    fp = fake_project(tmp_path)
    wheels = make_wheels(fp.upstream)
    rdir = fp.root / "recipes" / "pytorch-wheel"
    shutil.copytree(REPO / "recipes" / "pytorch-wheel", rdir)
    (rdir / "sources.toml").write_text(_catalog(wheels))
    (fp.root / "recipes" / "deep-ep" / "recipe.yaml").write_text(FAKE_DEEPEP_ON_TORCH.lstrip())
    py = bare_venv(tmp_path)
    f = fp.root / "env_specs" / "h200-nvlink.toml"
    text = f.read_text()
    for old, new in (('cuda = "13.0"\nprovider = "host"', 'cuda = "13.0"\nprovider = "wheel"'),
                     ('version = "2.28.9"\nprovider = "pip"', 'version = "2.28.9"\nprovider = "wheel"'),
                     ('executable = "/opt/torch/.venv/bin/python3"', f'executable = "{py}"')):
        assert old in text
        text = text.replace(old, new)
    f.write_text(text)
    return fp, wheels


def test_the_spec_plans_a_pytorch_node_in_the_env_that_deepep_builds_against(tmp_path):
    from deepep_env.builder.plan import plan
    from deepep_env.envspec import load_resolved

    fp, _ = torch_project(tmp_path)
    r = load_resolved("h200-nvlink", fp.project)
    assert r.pytorch.provider == "wheel" and r.nccl.provider == "wheel"
    bp = plan(r, fp.project)
    pt = bp.node("pytorch")
    assert pt.recipe_dir.name == "pytorch-wheel" and pt.version == "2.11.0" and pt.id
    assert sorted(pt.sources) == sorted(REAL) and pt.externals == {}
    dp = bp.node("deep-ep")
    assert "pytorch" in dp.deps and dp.externals["pytorch"]["provider"] == "wheel"
    assert dp.externals["pytorch"]["fingerprint"] == {}    # nothing of torch is read from this machine
    assert pt in bp.roots() and dp in bp.roots()           # the env asks for both by name


def test_another_wheel_of_the_closure_is_another_deepep_id(tmp_path):
    from deepep_env.builder.plan import plan
    from deepep_env.envspec import load_resolved

    fp, wheels = torch_project(tmp_path)
    before = plan(load_resolved("h200-nvlink", fp.project), fp.project)
    cat = fp.root / "recipes" / "pytorch-wheel" / "sources.toml"
    cat.write_text(cat.read_text().replace(file_sha256(wheels["nvidia_nccl_cu13"]), "sha256:" + "0" * 64))
    after = plan(load_resolved("h200-nvlink", fp.project), fp.project)
    assert after.node("pytorch").id != before.node("pytorch").id
    assert after.node("deep-ep").id != before.node("deep-ep").id


@pytest.mark.parametrize("edit, msg", [
    (('[pytorch]\nversion = "2.11.0"', '[pytorch]\nversion = "2.10.0"'), "no pinned PyTorch wheels for torch '2.10.0'"),
    (('version = "2.28.9"', 'version = "2.27.5"'), "torch 2.11.0 pins nvidia-nccl-cu13==2.28.9"),
    (('[python]\nversion = "3.12"', '[python]\nversion = "3.11"'), "the pinned torch 2.11.0 wheel is for CPython 3.12"),
    (('[pytorch]\nversion = "2.11.0"\ncuda = "13.0"', '[pytorch]\nversion = "2.11.0"\ncuda = "13.1"'),
     "is built for CUDA 13.0 (its nvidia-cuda-runtime wheel)"),
    (('cuda = "13.0"\nprovider = "wheel"', 'cuda = "13.0"\nprovider = "host"'),
     "nccl.provider = 'wheel' is the NCCL wheel of a wheel-provided PyTorch"),
])
def test_a_closure_the_spec_does_not_match_is_one_clear_line(tmp_path, edit, msg):
    fp, _ = torch_project(tmp_path)
    err = refusal_after_edit(fp, "h200-nvlink", *edit, count=1)
    assert msg in err and "\n" not in err


def test_a_catalog_without_a_torch_wheel_is_refused(tmp_path):
    from deepep_env.envspec.torch_wheels import load_torch_wheels

    fp, _ = torch_project(tmp_path)
    cat = fp.root / "recipes" / "pytorch-wheel" / "sources.toml"
    text = cat.read_text()
    start = text.index('[versions."2.11.0".linux-64.torch]')
    end = text.find("\n[", start + 1)
    cat.write_text(text[:start] + (text[end + 1:] if end > 0 else ""))
    with pytest.raises(UserError) as ei:
        load_torch_wheels(fp.root / "recipes")
    assert "torch 2.11.0 has no torch==2.11.0 wheel" in str(ei.value) and "\n" not in str(ei.value)


def test_the_real_catalog_is_pips_closure_of_torch_2_11_for_cp312_and_cuda_13():
    from deepep_env.envspec.torch_wheels import built_for, nccl_wheel, require_torch

    parts = require_torch(REPO / "recipes", "2.11.0", "linux-64")
    assert built_for(parts) == ("3.12", "13.0")
    assert nccl_wheel(parts).version == "2.28.9" and parts["nvidia_nvshmem_cu13"].version == "3.4.5"
    pins = {ln.split("==")[0].lower().replace("_", "-"): ln.split("--hash=")[1].strip()
            for ln in (REPO / "env_specs" / "prepare" / "cu130-venv.txt").read_text().splitlines() if "==" in ln}
    assert {w.project: w.sha256 for w in parts.values()} == pins   # the sha256s pip --require-hashes checked


def test_build_repacks_pytorch_deepep_imports_it_and_the_env_runs_it(tmp_path, monkeypatch, capsys):
    fp, wheels = torch_project(tmp_path)
    p = fetched(fp, "h200-nvlink", tmp_path, monkeypatch, capsys)
    rc, out, err = cli_in_process(capsys, "build", "h200-nvlink", *p, "--offline", "--json")
    assert rc == 0, err
    nodes = {n["package"]: n for n in json.loads(out)["nodes"]}
    pt = fp.project.channel / nodes["pytorch"]["outputs"][0]
    assert pt.name.startswith("deepep-pytorch-2.11.0-h")
    paths = {e["_path"] for e in json.loads(read_in_package(pt, "info/paths.json"))["paths"]}
    site = "lib/python3.12/site-packages"
    assert {f"{site}/torch/__init__.py", f"{site}/nvidia/nccl/lib/libnccl.so.2", f"{site}/mpmath/__init__.py",
            f"{site}/torch-2.11.0.dist-info/METADATA", "share/doc/deepep-pytorch/torch/licenses/LICENSE"} <= paths
    assert not any(x.startswith("bin/") or ".data/" in x for x in paths)   # no console scripts, .data mapped
    dp = fp.project.channel / nodes["deep-ep"]["outputs"][0]
    assert read_in_package(dp, "share/deep-ep/torch.txt").strip() == b"2.11.0 13.0"
    # lock and install: deepep-pytorch is a package of the env
    assert cli_in_process(capsys, "lock", "h200-nvlink", *p)[0] == 0
    lock = (fp.root / "pixi.lock").read_text()
    assert "deepep-pytorch-2.11.0-h" in lock
    # pixi.toml asks for it by its conda name, pinned to the locked build (the node is "pytorch")
    assert cli_in_process(capsys, "pixi", "sync", *p)[0] == 0
    build = re.search(r"deepep-pytorch-2\.11\.0-(h[0-9a-f]{10}_0)\.conda", lock).group(1)
    assert f'deepep-pytorch = {{ version = "==2.11.0", build = "{build}" }}' in (fp.root / "pixi.toml").read_text()
    rc, out, err = cli_in_process(capsys, "install", "h200-nvlink", *p)
    assert rc == 0, err
    prefix = fp.project.prefix_for("h200-nvlink")
    assert (prefix / site / "torch" / "__init__.py").is_file()
    # activate: the host interpreter (a venv without torch) imports the env's torch
    monkeypatch.setenv("DEEPEP_ENV_PROJECT", str(fp.root))
    rc, script, err = cli_in_process(capsys, "activate", "h200-nvlink", "--shell", "bash", "--demo-host", "h200x8-nvlink")
    assert rc == 0, err
    run = subprocess.run(["bash", "-c", script + '\n"$DEEPEP_ENV_PYTHON" -c "import torch; print(torch.__file__)"'],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == str(prefix / site / "torch" / "__init__.py")
    # a fresh machine: no store, no channel, no prefix: the install rebuilds both, byte-identical
    locked = {q["sha256"] for q in yaml.safe_load(lock)["packages"]
              if re.search(r"-h[0-9a-f]{10}_0\.conda$", q.get("conda", ""))}
    assert len(locked) == 3   # nvshmem, deepep-pytorch, deep-ep (the fake project has no deepep-env recipe)
    for d in (fp.project.store, fp.project.channel, prefix):
        shutil.rmtree(d)
    rc, out, err = cli_in_process(capsys, "install", "h200-nvlink", *p)
    assert rc == 0, err
    assert locked <= {file_sha256(f)[7:] for f in fp.project.channel.glob("*/*.conda")}


def test_the_pytorch_package_and_its_reader_rebuild_to_the_same_bytes(tmp_path, monkeypatch, capsys):
    fp, _ = torch_project(tmp_path)
    p = fetched(fp, "h200-nvlink", tmp_path, monkeypatch, capsys)
    rc, out, err = cli_in_process(capsys, "build", "h200-nvlink", *p, "--offline", "--check", "--json")
    assert rc == 0, err
    checks = {c["package"]: c for c in json.loads(out)["checks"]}
    assert checks["pytorch"]["identical"] and checks["deep-ep"]["identical"], checks
