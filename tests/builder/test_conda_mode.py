"""Issue 13, the CPU part: the real recipes rendered for conda-provided specs, and their build/host
environments and the environment lock solved against a channel shaped like conda-forge
(tests/fixtures/conda-forge: conda-forge's names, versions, build strings and dependencies, records
only). The GPU part (a real build, install and DeepEP test from conda packages) is in
docs/benchmarks.md "Conda-provided Python, CUDA and PyTorch"."""
from __future__ import annotations

import json
import shutil

import pytest

from deepep_env.builder.plan import plan
from deepep_env.builder.preview import preview_plan
from deepep_env.base.errors import UserError
from deepep_env.base.project import Project
from deepep_env.envspec.resolve import load_resolved

from build_fixtures import FORGE, records_channel as _channel, solve_linux64 as _solve  # noqa: E402,F401


@pytest.fixture(scope="module")
def repo(repo_root) -> Project:
    return Project(repo_root)


def _reqs(project, env):
    return preview_plan(plan(load_resolved(env, project), project))


def test_seed_spec_renders_conda_forge_pattern(repo):
    deep = _reqs(repo, "gcp-b200-seed")["deep-ep"]["deep-ep"]
    assert {"gcc_linux-64 14.*", "gxx_linux-64 14.*", "cuda-nvcc_linux-64 12.9.*", "sysroot_linux-64 2.28.*",
            "ninja"} <= set(deep["build"])
    assert {"python 3.12.*", "pip", "pytorch ==2.10.0 cuda129*", "cuda-version 12.9.*", "cuda-cudart-dev",
            "rdma-core"} <= set(deep["host"])
    assert any(r.startswith("pytorch ==2.10.0 cuda129* (pin_compatible exact") for r in deep["run"])
    assert "python 3.12.*" in deep["run"] and "cuda-cudart" in deep["run"]
    assert not any(r.startswith("rdma-core") for r in deep["run"])  # host driver stack's libibverbs at run time
    nv = _reqs(repo, "gcp-b200-seed")["nvshmem"]["deepep-nvshmem"]
    assert "cmake" in nv["build"] and "cuda-driver-dev" in nv["host"]


def test_host_mode_renders_no_conda_toolchain(repo):
    r = _reqs(repo, "h200-nvlink")
    assert r["nvshmem"]["deepep-nvshmem"] == {}
    assert "build" not in r["deep-ep"]["deep-ep"]
    assert all(x.startswith("deepep-nvshmem") for x in r["deep-ep"]["deep-ep"]["host"])


def test_plan_json_lists_requirements_and_what_to_pin(repo, capsys):
    from cli_runner import cli_in_process

    rc, out, _ = cli_in_process(capsys, "plan", "gcp-b200-seed", "--json", "--project", str(repo.root))
    assert rc == 0
    builds = {b["package"]: b for b in json.loads(out)["builds"]}
    assert "pytorch ==2.10.0 cuda129*" in builds["deep-ep"]["requirements"]["deep-ep"]["host"]
    pin = builds["nvshmem"]["to_pin"][0]
    assert pin["what"] == "source nvshmem" and pin["urls"][0].startswith("https://github.com/NVIDIA/nvshmem/")


def _strip(spec: str) -> str:
    return spec.split(" (", 1)[0]


def test_build_and_host_envs_and_env_lock_solve_against_conda_forge_shape(repo, tmp_path):
    r = load_resolved("gcp-b200-seed", repo)
    reqs = _reqs(repo, "gcp-b200-seed")
    nv, deep = reqs["nvshmem"]["deepep-nvshmem"], reqs["deep-ep"]["deep-ep"]
    forge = [FORGE.as_uri()]
    for env in (nv["build"], nv["host"], deep["build"]):
        got = _solve(env, forge)
        assert got, env
    nvshmem = {"name": "deepep-nvshmem", "version": r.nvshmem.version, "build": "unpinned",
               "depends": ["cuda-version >=12.9,<12.10.0a0"]}
    ours = _channel(tmp_path / "ours", [nvshmem])
    host = _solve(deep["host"], [ours, *forge])
    torch = host["pytorch"]
    assert str(torch.version) == "2.10.0" and str(torch.build).startswith("cuda129")
    assert str(host["python"].version).startswith("3.12.") and "rdma-core" in host
    # the deep-ep record rattler-build would write: run pins resolved against that host env
    run = [s for s in map(_strip, deep["run"]) if not s.startswith(("pytorch", "cuda-version"))]
    run += [f"pytorch =={torch.version} {torch.build}", "cuda-version >=12.9,<12.10.0a0"]
    deep_rec = {"name": "deep-ep", "version": r.deepep.version, "build": "unpinned", "depends": run}
    tool = {"name": "deepep-env", "version": "0.2.0", "build": "h0000000000_0", "depends": []}
    shutil.rmtree(tmp_path / "ours")
    ours = _channel(tmp_path / "ours", [nvshmem, deep_rec, tool])
    from deepep_env.lock.request import component_requirements

    # the lock request's roots: our top build, deepep-env (the tool node), the conda components
    env_specs = ["deep-ep ==1.2.1 unpinned", "deepep-env ==0.2.0", *[q.spec for q in component_requirements(r)]]
    env = _solve(env_specs, [ours, *forge])
    for name in ("deep-ep", "deepep-nvshmem", "deepep-env", "python", "pytorch", "libtorch", "cuda-cudart", "cuda-version", "nccl",
                 "cudnn", "libcublas", "numpy", "sympy", "python_abi", "libgcc", "libstdcxx"):
        assert name in env, name
    assert str(env["pytorch"].build) == str(torch.build)
    assert "rdma-core" not in env and "gcc_linux-64" not in env and "cuda-nvcc_linux-64" not in env
    assert all(rec.sha256 for rec in env.values())


def test_unsatisfiable_pin_is_not_solved(repo):
    from rattler.exceptions import SolverError

    with pytest.raises(SolverError):
        _solve(["pytorch ==2.10.0 cuda128*"], [FORGE.as_uri()])


def test_mirrors_read_a_channel_from_a_folder_and_lock_its_url(monkeypatch, tmp_path):
    from deepep_env.builder.build import spec_channels_for_build
    from deepep_env.base.channels.urls import resolve_channels

    monkeypatch.setenv("DEEPEP_ENV_MIRRORS", f"conda-forge={FORGE} https://conda.example/repack={tmp_path}")
    refs = resolve_channels(["local", "conda-forge", "https://conda.example/repack"], publish_url=None,
                            local_dir=tmp_path / "chan")
    assert refs[1].source == FORGE.as_uri() + "/" and refs[1].lock_url == "https://conda.anaconda.org/conda-forge/"
    assert refs[2].lock_url == "https://conda.example/repack/"
    assert spec_channels_for_build(["local", "conda-forge", "bioconda"], offline=True) == [FORGE.as_uri() + "/"]
    monkeypatch.setenv("DEEPEP_ENV_MIRRORS", "conda-forge=relative/dir")
    with pytest.raises(UserError, match="DEEPEP_ENV_MIRRORS"):
        resolve_channels(["conda-forge"], publish_url=None, local_dir=tmp_path)


@pytest.mark.parametrize("table, bad", [("toolchain", 'gcc = "fourteen"'), ("toolchain", 'sysroot = "3.1"')])
def test_toolchain_bad_values_are_refused(repo_root, tmp_path, table, bad):
    from deepep_env.envspec.load import load_spec_file as load_spec

    text = (repo_root / "env_specs" / "gcp-b200.toml").read_text() + f"\n[{table}]\n{bad}\n"
    p = tmp_path / "x.toml"
    p.write_text(text)
    with pytest.raises(UserError, match=table):
        load_spec(p)


def test_packages_must_be_match_specs(repo_root, tmp_path):
    from deepep_env.envspec.load import load_spec_file as load_spec

    text = (repo_root / "env_specs" / "gcp-b200.toml").read_text().replace(
        'publish_url =', 'packages = ["numpy; rm -rf /"]\npublish_url =')
    p = tmp_path / "x.toml"
    p.write_text(text)
    with pytest.raises(UserError, match="packages"):
        load_spec(p)


def test_a_replaced_channel_file_is_reindexed_with_its_new_sha256(tmp_path):
    """rattler's indexer keeps the record of a file name it has seen: Channel.put forgets it first."""
    from deepep_env.builder.channel import Channel, index
    from deepep_env.base.hashing import digest
    from lock_fixtures import build_recipe

    recipe = tmp_path / "r" / "recipe.yaml"
    recipe.parent.mkdir()
    recipe.write_text("schema_version: 1\npackage: {name: forget-me, version: '1.0'}\n"
                      "build: {string: h0_0, script: ['mkdir -p $PREFIX/share && echo ${{ payload }} > $PREFIX/share/x']}\n")
    chan = Channel(tmp_path / "chan").ensure()
    for payload in ("one", "two-two"):
        out = tmp_path / f"out-{payload}"
        f = build_recipe(recipe, {"payload": payload}, out, [chan.url()])[0]
        sha = digest(f.read_bytes())
        chan.put(f, f"linux-64/{f.name}", sha)
        index(chan.root)
        rd = json.loads((chan.root / "linux-64" / "repodata.json").read_text())
        assert "sha256:" + rd["packages.conda"][f.name]["sha256"] == sha
