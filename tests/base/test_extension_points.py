"""Issue 41.2: a GPU, a platform and an engine are each one entry in one table, and every stage picks
the new entry up (docs/architecture.md "How to add …"). Each test adds a fake one in one place
(monkeypatching the table) and shows detection, selection and planning read it."""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from deepep_env.base import engines
from deepep_env.base.errors import UserError
from deepep_env.base.project import Project
from deepep_env.platform import detect, gpus, profiles
from deepep_env.platform.hosttree import build_host_tree
from deepep_env.platform.profiles_data import PROFILES
from platform_fixtures import make_hosts

REPO = Path(__file__).resolve().parents[2]
X900 = gpus.GpuModel("X900", ("0x9990",), "NVIDIA X900", "12.0")


@pytest.fixture
def fake_gpu(monkeypatch):
    """The one place a GPU is added: a row of platform/gpus.py GPUS."""
    monkeypatch.setattr(gpus, "GPUS", gpus.GPUS + (X900,))
    monkeypatch.setattr(profiles, "_CACHE", {})   # profiles check gpu_models against the table at load
    return X900


def _drop_driver_info(node: Any) -> None:
    """No driver `information` files: the probes name each GPU from its PCI id alone."""
    if isinstance(node, dict):
        node.pop("gpu", None)
        for v in node.values():
            _drop_driver_info(v)
    elif isinstance(node, list):
        for v in node:
            _drop_driver_info(v)


def _x900_host(tmp_path: Path) -> Path:
    desc = make_hosts.gcp_b200("x900", model="NVIDIA X900", device="0x9990")
    _drop_driver_info(desc["pci"])
    return build_host_tree(desc, tmp_path / "x900")


# -- a GPU --------------------------------------------------------------------------------------------
def test_a_new_gpu_is_detected_by_its_pci_id(tmp_path, fake_gpu):
    d = detect(_x900_host(tmp_path), environ={})
    assert {(g.model, g.model_source, g.device_id) for g in d.facts.gpus} == {("NVIDIA X900", "pci-id", "0x9990")}
    assert profiles.host_gpus(d.facts) == {"X900"}
    assert fake_gpu.min_cuda == "12.8"      # sm_120 is Blackwell: the spec rule's table says so
    # No profile names it yet, so the generic profile takes the host (not gcp-b200: gpu_models decide).
    assert d.platform.name == "rdma-generic"


def test_without_the_row_the_gpu_is_unknown(tmp_path):
    d = detect(_x900_host(tmp_path), environ={})
    assert [g.model for g in d.facts.gpus][:1] == [None] and profiles.host_gpus(d.facts) == set()
    assert "unknown NVIDIA GPU 0x9990" in d.platform.evidence[0]


# -- a platform ---------------------------------------------------------------------------------------
@pytest.fixture
def fake_platform(monkeypatch, fake_gpu):
    """The one place a platform is added: an entry of platform/profiles_data.py PROFILES."""
    monkeypatch.setitem(PROFILES, "x900-cloud", {
        "description": "a test cloud of X900s", "status": "stub", "sources": ["this test"],
        "gpu_models": ["X900"],
        "match": {"precedence": 55, "fabric": "rdma", "cloud": "gce", "why": "X900 on GCE → x900-cloud"},
        "rules": ["gid-index"], "env": {},
    })
    return "x900-cloud"


def test_a_new_platform_is_selected_by_its_match(tmp_path, host_tree, fake_platform):
    d = detect(_x900_host(tmp_path), environ={})
    assert d.platform.name == fake_platform and d.platform.evidence[-1] == "X900 on GCE → x900-cloud"
    assert d.platform.profile.rules == ("gid-index",) and d.platform.profile.gpu_models == ("X900",)
    # Other hosts keep their platform: the new profile's gpu_models do not name their GPUs.
    assert detect(host_tree("gcp-b200"), environ={}).platform.name == "gcp-b200"


def test_a_profile_naming_a_gpu_outside_the_table_fails_at_load(monkeypatch):
    monkeypatch.setattr(profiles, "_CACHE", {})
    monkeypatch.setitem(PROFILES, "y", {"gpu_models": ["Y1000"], "rules": [], "env": {}})
    with pytest.raises(UserError, match=r"gpu_models \['Y1000'\] are not in the GPU table"):
        profiles.load_profiles()


def test_a_bad_match_key_fails_at_load(monkeypatch):
    monkeypatch.setattr(profiles, "_CACHE", {})
    monkeypatch.setitem(PROFILES, "y", {"rules": [], "env": {}, "match": {"precedence": 1, "fabirc": "rdma"}})
    with pytest.raises(UserError, match="unknown key 'fabirc'"):
        profiles.load_profiles()


def test_every_profile_gpu_is_in_the_table():
    known = gpus.by_name()
    for p in profiles.load_profiles().values():
        assert set(p.gpu_models) <= set(known), p.name


# -- an engine ----------------------------------------------------------------------------------------
V3 = dataclasses.replace(
    engines.ENGINES["v2"], name="v3", title="DeepEP 3.x (test)", versions=">=3,<4", recipe="deep-ep-v3",
    marker="buffers/v3.py", test_tasks={"deepep-test-v3": ("v3/test.py", "a test of the fake engine")},
    spec_rules=(), overlay_rules=("nccl-preload",), doctor_families=("deepep-v2",),
)


@pytest.fixture
def fake_engine(monkeypatch):
    """The one place an engine is added: an entry of base/engines.py ENGINES."""
    monkeypatch.setitem(engines.ENGINES, "v3", V3)
    return V3


@pytest.fixture(scope="module")
def v2_spec():
    from deepep_env.envspec.resolve import load_resolved

    return load_resolved("h200-nvlink-v2", Project(REPO))


def _as_v3(r):
    return r.model_copy(update={"deepep": r.deepep.model_copy(update={"engine": "v3", "version": "3.0.0"})})


def test_a_new_engine_is_planned_with_its_recipe_tasks_and_rules(tmp_path, fake_engine, v2_spec):
    from deepep_env.builder.plan import _deepep_node
    from deepep_env.envspec.rules import RULES, applies
    from deepep_env.lock.pixi import _tasks

    r = _as_v3(v2_spec)
    assert r.deepep.engine_record is fake_engine
    # planning: the node builds with the engine's recipe, and NCCL enters it (nccl_gin)
    shutil.copytree(REPO / "recipes", tmp_path / "recipes")
    shutil.copytree(tmp_path / "recipes/deep-ep-v2", tmp_path / "recipes/deep-ep-v3")
    node = _deepep_node(r, Project(tmp_path))
    assert node.recipe_dir == tmp_path / "recipes/deep-ep-v3" and node.variant["nccl_provider"] == "source"
    # the lock's pixi tasks: the legacy three (less internode on NVLink) plus the engine's own
    assert "deepep-test-v3" in _tasks(r) and "deepep-test-elastic-ep" not in _tasks(r)
    # spec rules V2 claims do not judge a V3 spec; V2's still do judge V2
    one_nccl = next(x for x in RULES if x.id == "deepep-v2-one-nccl")
    assert not applies(one_nccl, r) and applies(one_nccl, v2_spec)


def test_a_new_engine_is_recognised_by_catalog_doctor_and_overlay(tmp_path, fake_engine):
    from deepep_env.envspec.catalog import RevisionEntry
    from deepep_env.overlay.rules_v2 import rule_record

    pin = {"git": "https://example.invalid/DeepEP.git", "rev": "0" * 40}
    entry = {"version": "3.0.0", "label": "3.0.0", "engine": "v3", "source": pin}
    assert RevisionEntry.model_validate(entry).engine == "v3"
    with pytest.raises(ValueError, match=r"is not DeepEP 3.x \(test\)"):
        RevisionEntry.model_validate({**entry, "version": "2.9.0"})
    # doctor tells it by its marker file
    assert engines.engine_by_marker(lambda rel: rel == "buffers/v3.py") is fake_engine
    assert engines.engine_by_marker(lambda rel: False).name == engines.DEFAULT_ENGINE
    # the overlay acts on a prefix whose build record names it, for the rules it turns on
    site = tmp_path / "pfx/lib/python3.12/site-packages/deep_ep"
    site.mkdir(parents=True)
    (site / "_deepep_env_build.json").write_text(json.dumps({"engine": "v3"}))
    assert rule_record(str(tmp_path / "pfx"), "nccl-preload") == {"engine": "v3"}
    assert rule_record(str(tmp_path / "pfx"), "deepep-jit-cache") is None


def test_unknown_engine_in_a_catalog_names_the_table():
    from deepep_env.envspec.catalog import RevisionEntry

    with pytest.raises(ValueError, match="unknown engine 'v9'"):
        RevisionEntry.model_validate({"version": "9.0", "label": "x", "engine": "v9",
                                      "source": {"git": "https://example.invalid/x.git", "rev": "0" * 40}})


# -- an overlay rule ----------------------------------------------------------------------------------
def test_every_rule_module_is_in_RULES():
    """A rule module must be added to the RULES line of overlay/rules.py (docs/architecture.md
    "How to add an overlay rule"): one left out would give profiles an unknown rule name."""
    import importlib
    import pkgutil

    import deepep_env.overlay as overlay
    from deepep_env.overlay.rulebase import rules_of
    from deepep_env.overlay.rules import RULES

    modules = [m.name for m in pkgutil.iter_modules(overlay.__path__) if m.name.startswith("rules")]
    assert {"rules", "rules_v2", "rules_efa"} <= set(modules)
    for name in modules:
        assert set(rules_of(importlib.import_module(f"deepep_env.overlay.{name}"))) <= set(RULES), name
    # and the rules an engine claims exist
    from deepep_env.doctor.run import FAMILY_ORDER
    from deepep_env.envspec.rules import RULES as SPEC_RULES

    for e in engines.ENGINES.values():
        assert set(e.overlay_rules) <= set(RULES), e.name
        assert set(e.spec_rules) <= {r.id for r in SPEC_RULES}, e.name
        assert set(e.doctor_families) <= set(FAMILY_ORDER), e.name
