"""Build-id rules (docs/build-id.md): the pre-image is pinned literally for one fixed node, and the
tests say what must and must not move an id. No builds here: ids exist before anything is built."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from build_fixtures import fake_project, sandbox
from deepep_env.builder.graph import nodes_from_recipe_dirs
from deepep_env.base.hashing import build_id, canonical_json

AB = "sha256:" + "ab" * 32
CD = "sha256:" + "cd" * 32

GOLDEN_BASE_RECIPE = (
    'package: {name: golden-base, version: "1.0"}\n'
    'source: {path: "${{ source_dir }}", use_gitignore: false}\n'
    'build: {string: "${{ build_string }}", script: [true]}\n'
)
GOLDEN_BASE_SOURCES = f"""format = 1
package = "golden-base"
[versions."1.0".source]
urls = ["https://example.invalid/golden-1.0.tar.gz"]
tree_sha256 = "{AB}"
[patches.fix]
url = "https://example.invalid/fix.patch"
sha256 = "{CD}"
why = "golden test"
"""
GOLDEN_TOP_RECIPE = (
    'package: {name: golden-top, version: "2.0"}\n'
    "requirements:\n  host:\n    - golden-base ${{ dep_golden_base }}\n"
    'build: {string: "${{ build_string }}", script: [true]}\n'
)
VARIANT = {"cuda_architectures": ["90"], "ibgda": True}


def _golden(tmp_path: Path, base_recipe=GOLDEN_BASE_RECIPE, base_sources=GOLDEN_BASE_SOURCES,
            top_recipe=GOLDEN_TOP_RECIPE, variant=VARIANT):
    for name, files in (("base", {"recipe.yaml": base_recipe, "sources.toml": base_sources}),
                        ("top", {"recipe.yaml": top_recipe})):
        d = tmp_path / name
        d.mkdir(parents=True, exist_ok=True)
        for f, text in files.items():
            (d / f).write_text(text)
    nodes = nodes_from_recipe_dirs([tmp_path / "base", tmp_path / "top"], variant=variant)
    return {n.package: n for n in nodes}


VPS = {"__archspec": "x86_64", "__glibc": "2.28", "__linux": "4.18"}


def test_golden_preimage_and_digest(tmp_path):
    nodes = _golden(tmp_path)
    base, top = nodes["golden-base"], nodes["golden-top"]
    assert base.preimage == {
        "scheme": "deepep-env/build-id/v1",
        "package": "golden-base",
        "recipe": "sha256:5bd3d2c1bc7db6f3bbe0b9bda1c704ea0ba99fa611e6837b1de72d69313cb06f",
        "sources": {"golden-base": AB},
        "patches": [CD],
        "variant": {"cuda_architectures": ["90"], "ibgda": True},
        # what the build is told the machine has (linux-64 defaults, no CUDA), never the machine's
        "virtual_packages": VPS,
    }
    assert canonical_json(base.preimage) == (
        b'{"package":"golden-base","patches":["' + CD.encode() + b'"],'
        b'"recipe":"sha256:5bd3d2c1bc7db6f3bbe0b9bda1c704ea0ba99fa611e6837b1de72d69313cb06f",'
        b'"scheme":"deepep-env/build-id/v1","sources":{"golden-base":"' + AB.encode() + b'"},'
        b'"variant":{"cuda_architectures":["90"],"ibgda":true},'
        b'"virtual_packages":{"__archspec":"x86_64","__glibc":"2.28","__linux":"4.18"}}'
    )
    assert base.id == "sha256:e9ae2bdf48e04d95e6228fd692def281fdbed0fb5fe3dd46bce18170edfb8ecb"
    assert base.build_string == "he9ae2bdf48_0"
    # a dependency enters by its id (Merkle DAG); empty fields (sources, patches) are dropped
    assert top.preimage == {
        "scheme": "deepep-env/build-id/v1",
        "package": "golden-top",
        "recipe": "sha256:2437046389f12f844b24bbbdc82dfce93fb70e07163f663d5a0854811837984a",
        "variant": {"cuda_architectures": ["90"], "ibgda": True},
        "dependencies": {"golden-base": base.id},
        "virtual_packages": VPS,
    }
    assert top.id == "sha256:f1741e9f838367da03ad87986f5be406a551b4ce7795e3e66351660fe4b8ce2e"
    assert build_id(top.preimage) == top.id


def test_what_must_not_change_an_id(tmp_path):
    ref = {k: n.id for k, n in _golden(tmp_path / "a").items()}
    # a mirror URL / another URL list (sources.toml is location, not identity)
    moved = GOLDEN_BASE_SOURCES.replace("https://example.invalid/golden-1.0.tar.gz", "https://mirror.invalid/x.tgz")
    moved = moved.replace("https://example.invalid/fix.patch", "file:///srv/patches/fix.patch")
    assert {k: n.id for k, n in _golden(tmp_path / "b", base_sources=moved).items()} == ref
    # variant key order
    assert {k: n.id for k, n in _golden(tmp_path / "c", variant=dict(reversed(VARIANT.items()))).items()} == ref
    # another folder (the recipe's location), and editor leftovers that are not recipe content
    (tmp_path / "a" / "base" / "__pycache__").mkdir()
    (tmp_path / "a" / "base" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert {k: n.id for k, n in _golden(tmp_path / "a").items()} == ref


@pytest.mark.parametrize("change", ["recipe", "source", "patch", "variant"])
def test_what_must_change_an_id(tmp_path, change):
    ref = _golden(tmp_path / "ref")
    kw = {}
    if change == "recipe":
        kw["base_recipe"] = GOLDEN_BASE_RECIPE + "# a comment is content\n"
    elif change == "source":
        kw["base_sources"] = GOLDEN_BASE_SOURCES.replace(AB, "sha256:" + "ef" * 32)
    elif change == "patch":
        kw["base_sources"] = GOLDEN_BASE_SOURCES.replace(CD, "sha256:" + "ef" * 32)
    else:
        kw["variant"] = {**VARIANT, "ibgda": False}
    new = _golden(tmp_path / "new", **kw)
    assert new["golden-base"].id != ref["golden-base"].id
    # ...and a dependency's new id moves its dependents, though their own inputs did not change
    assert new["golden-top"].id != ref["golden-top"].id
    if change != "variant":
        assert new["golden-top"].recipe_hash == ref["golden-top"].recipe_hash


def test_leaf_change_moves_only_the_leaf(tmp_path):
    ref = _golden(tmp_path / "ref")
    new = _golden(tmp_path / "new", top_recipe=GOLDEN_TOP_RECIPE + "# changed\n")
    assert new["golden-base"].id == ref["golden-base"].id and new["golden-top"].id != ref["golden-top"].id


def test_fixture_patch_content_is_identity(tmp_path):
    """The real fixture: a new patch file has a new sha256 pin, hence a new id for libgreet and
    its dependents, while greet-app's own path source is identity by content too."""
    sb = sandbox(tmp_path)
    ref = {k: n.id for k, n in sb.nodes().items()}
    toml = sb.graph / "libgreet" / "sources.toml"
    toml.write_text(re.sub(r'(\[patches.greet-loud\]\n(?:.*\n)*?sha256 = ")sha256:[0-9a-f]{64}',
                           r"\g<1>sha256:" + "0" * 64, toml.read_text()))
    new = {k: n.id for k, n in sb.nodes().items()}
    assert all(new[k] != ref[k] for k in ref)
    (sb.upstream / "greet-app" / "main.c").write_text("int main(void){return 0;}\n")
    newer = {k: n.id for k, n in sb.nodes().items()}
    assert newer["libgreet"] == new["libgreet"] and newer["greet-app"] != new["greet-app"]


def test_spec_comments_and_key_order_change_no_id_but_values_do(tmp_path):
    from deepep_env.builder.plan import plan
    from deepep_env.envspec import load_resolved

    fp = fake_project(tmp_path)
    spec = fp.root / "env_specs" / "h200-nvlink.toml"

    def ids():
        return {n.package: n.id for n in plan(load_resolved("h200-nvlink", fp.project), fp.project).nodes}

    ref = ids()
    assert all(ref.values())
    text = spec.read_text()
    # a comment, and the [deepep] table written with its keys in another order
    lines = text.splitlines()
    start = lines.index("[deepep]") + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("["))
    body = [ln for ln in lines[start:end] if ln.strip() and not ln.startswith("#")]
    assert len(body) >= 3
    reordered = "\n".join(lines[:start] + list(reversed(body)) + [""] + lines[end:]) + "\n"
    spec.write_text("# a new comment changes nothing\n" + reordered)
    assert ids() == ref
    # a value that enters DeepEP's variant (aggressive PTX is allowed for an sm_90-only build)
    spec.write_text(text.replace("aggressive_ptx = false", "aggressive_ptx = true"))
    changed = ids()
    assert changed["nvshmem"] == ref["nvshmem"] and changed["deep-ep"] != ref["deep-ep"]
    # the source-cache location is not an input at all
    import os

    os.environ["DEEPEP_ENV_SOURCE_CACHE"] = str(tmp_path / "another-cache")
    try:
        spec.write_text(text)
        assert ids() == ref
    finally:
        del os.environ["DEEPEP_ENV_SOURCE_CACHE"]
