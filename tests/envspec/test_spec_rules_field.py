"""Issue 27: spec rules for this year's failures, each refusing a spec that reproduces it, with the thread cited."""
from __future__ import annotations

from pathlib import Path

import pytest

from cli_runner import cli_in_process
from test_spec_hostile import GOOD, V2_NCCL_OK, sect, sub

V1_OLD = "9af0e0d0e74f3577af1979c9b9e1ac2cad0104ee"   # tag v1.2.1: before #564


def validate(tmp_path: Path, capsys, text: str):
    f = tmp_path / "h200-nvlink.toml"
    f.write_text(text)
    return cli_in_process(capsys, "spec", "validate", str(f))


@pytest.mark.parametrize("text,words", [
    # V1 kernels x NVSHMEM >= 3.5.19 without the layout fix (#553, #707, #764)
    (sub("8a07e7e7ed57cfc63005f670d64d410cb30b061b", V1_OLD).replace('require = ["pr-466"]', "require = []")
     .replace('version = "3.4.5"', 'version = "3.5.19"'), ("RC-QP layout", "#707", "nvshmem-3.5-layout")),
    # V2 legacy kernels x NVSHMEM >= 3.5.19 (#764, PR #696)
    (V2_NCCL_OK.replace('version = "3.4.5"', 'version = "3.5.19"'), ("#764", "PR #696")),
    # pip torch 2.11 pins nvidia-nccl 2.28.9: a pip NCCL 2.30.4 under DeepEP V2 is downgraded (#710)
    (sect("nccl", 'version = "2.30.4"\nprovider = "pip"', V2_NCCL_OK).replace('cuda = "13.0"\nprovider = "host"', 'cuda = "13.0"\nprovider = "pip"'),
     ("==2.28.9", "#710", "ncclGetLsaDevicePointer")),
    # pip torch 2.15 brings NVSHMEM 3.7 next to the env's 3.4.5 (vLLM PR #58159)
    (GOOD.replace('version = "2.11.0"', 'version = "2.15.0"'), ("NVSHMEM 3.7", "#58159")),
])
def test_rule_refuses_with_the_thread(tmp_path, capsys, text, words):
    res = validate(tmp_path, capsys, text)
    assert res.returncode == 2, res.stdout + res.stderr
    for w in words:
        assert w in res.stderr, res.stderr


def test_a_pypi_torch_of_another_cuda_is_never_a_silent_substitution(tmp_path, capsys):
    """Issue 40.1: PyPI's torch 2.10.0 is cu128 (its METADATA pins nvidia-cuda-runtime-cu12==12.8.90); seed
    000's 2.10.0+cu129 is not on PyPI. A spec taking it from PyPI as cu129 is refused; as cu128 it passes this rule."""
    seed = (Path(__file__).parents[2] / "env_specs/gcp-b200-seed.toml").read_text()
    assert 'cuda = "12.9"\nbuild = "cuda129*"' in seed
    pip = seed.replace('cuda = "12.9"\nbuild = "cuda129*"', 'cuda = "12.9"\nprovider = "pip"')
    res = validate(tmp_path, capsys, pip.replace('name = "gcp-b200-seed"', 'name = "h200-nvlink"'))
    assert res.returncode == 2 and "pytorch-pip-cuda" in res.stderr and "CUDA 12.8" in res.stderr
    assert "download.pytorch.org" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    res = validate(tmp_path, capsys, pip.replace('name = "gcp-b200-seed"', 'name = "h200-nvlink"')
                   .replace('[pytorch]\nversion = "2.10.0"\ncuda = "12.9"', '[pytorch]\nversion = "2.10.0"\ncuda = "12.8"'))
    assert "pytorch-pip-cuda" not in res.stderr


def test_v1_with_the_layout_fix_and_nvshmem_3_5_19_is_allowed(tmp_path, capsys):
    # 8a07e7e (PR #466 head) carries nvshmem-3.5-layout
    assert "nvshmem-3.5-layout" in (Path(__file__).parents[2] / "recipes/deep-ep/sources.toml").read_text()
    res = validate(tmp_path, capsys, GOOD)
    assert res.returncode == 0, res.stderr


PR696 = "deepep-pr696-nvshmem-rc-qp"


def test_v2_with_the_pr696_patch_and_nvshmem_3_5_19_is_allowed(tmp_path, capsys):
    """Issue 27: V2 x NVSHMEM >= 3.5.19 only with the layout fix: PR #696 as vLLM carries it, pinned by URL + sha256."""
    v2_3519 = V2_NCCL_OK.replace('version = "3.4.5"', 'version = "3.5.19"')
    res = validate(tmp_path, capsys, v2_3519.replace("require = []", f'patches = ["{PR696}"]\nrequire = []'))
    assert res.returncode == 0, res.stderr
    res = validate(tmp_path, capsys, v2_3519)
    assert res.returncode == 2 and "deepep-v2-legacy-nvshmem-3.5.19" in res.stderr and "PR #696" in res.stderr


def test_pr696_patch_is_pinned_for_dd758ca_only(tmp_path, capsys):
    from deepep_env.envspec.catalog import load_catalog
    pin = load_catalog(Path(__file__).parents[2] / "recipes", "deep-ep").patches[PR696]
    assert pin.sha256 and pin.url.startswith("https://raw.githubusercontent.com/vllm-project/vllm/c3eefbf")
    assert pin.features == ["nvshmem-3.5-layout"] and pin.applies_to == ["dd758caf451848bd150e1046af3d0a73e5fff38d"]
    # on a V1 revision the patch (written against dd758ca's tree) is refused, its feature not credited
    res = validate(tmp_path, capsys, GOOD.replace('require = ["pr-466"]', f'patches = ["{PR696}"]\nrequire = ["pr-466"]'))
    assert res.returncode == 2 and "deepep-patch-revision" in res.stderr and "dd758ca" in res.stderr
