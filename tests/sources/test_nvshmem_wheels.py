"""Issue 27: NVIDIA's NVSHMEM wheels 3.4.5-3.8.0 as pinned options (recipes/nvshmem-wheel), shown by `plan`."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from deepep_env.base.errors import UserError
from deepep_env.views.planning import make_plan
from deepep_env.base.project import Project
from deepep_env.envspec.wheels import load_wheels, wheel_pin

REPO = Path(__file__).resolve().parents[2]
NEW = ("3.5.19", "3.5.21", "3.6.5", "3.7.0", "3.7.1", "3.7.2", "3.8.0")


def test_every_release_pinned_for_both_cuda_majors_and_arches():
    cat = load_wheels(REPO / "recipes")
    for v in NEW:
        for cuda in ("12.9", "13.0"):
            for subdir in ("linux-64", "linux-aarch64"):
                pin = wheel_pin(cat, v, cuda, subdir)
                assert pin is not None, (v, cuda, subdir)
                assert pin.sha256.startswith("sha256:") and pin.filename in pin.url
                assert pin.filename.startswith(f"nvidia_nvshmem_cu{cuda[:2]}-{v}-")
    # the one hash checked against a download (2026-11-25): nvidia-nvshmem-cu13 3.5.19, x86_64
    assert wheel_pin(cat, "3.5.19", "13.0", "linux-64").sha256 == \
        "sha256:0f734285d3a04824c13e9e2c1169dbb818be9cb0819de69389aaa067b8d18c93"


def test_a_wheel_pin_for_another_version_is_refused(tmp_path):
    shutil.copytree(REPO / "recipes" / "nvshmem-wheel", tmp_path / "nvshmem-wheel")
    f = tmp_path / "nvshmem-wheel" / "sources.toml"
    f.write_text(f.read_text().replace('[versions."3.8.0".cu13.linux-64]', '[versions."3.7.9".cu13.linux-64]', 1))
    with pytest.raises(UserError, match="is not nvidia-nvshmem-cu13==3.7.9"):
        load_wheels(tmp_path)


def test_plan_shows_the_wheels_as_pinned_options_with_the_rules_verdict():
    d = make_plan("gcp-b200-v2", Project(REPO), root=str(REPO / "nonexistent-root"))
    opts = {o["version"]: o for o in d["nvshmem_options"]}
    assert set(NEW) <= set(opts)
    for v in NEW:
        assert opts[v]["wheel"]["package"] == "nvidia-nvshmem-cu12" and opts[v]["layout"] == ">=3.5.19"
        # DeepEP 2.1.0's legacy kernels and the 3.5.19 layout (#764): refused for this spec, and said why
        assert opts[v]["refused_by"]["rule"] == "deepep-v2-legacy-nvshmem-3.5.19"
    assert opts["3.4.5"]["selected"] and opts["3.4.5"]["refused_by"] is None and opts["3.4.5"]["source"] == "pinned"
    assert opts["3.5.19"]["source"] == "unpinned"
