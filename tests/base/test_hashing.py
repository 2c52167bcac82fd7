"""Build identities (docs/build-id.md): the pre-image and the digest are pinned literally, so any
change to what an id means shows up in review as a change to this file."""
from __future__ import annotations

import os
from pathlib import Path

from deepep_env.base.hashing import build_id, build_id_preimage, canonical_json, tree_sha256

H = lambda c: "sha256:" + c * 64  # noqa: E731

GOLDEN_PREIMAGE = (
    '{"dependencies":{"gdrcopy":"' + H("4") + '"},"externals":{"cuda":{"provider":"host","version":"13.0"}},'
    '"package":"nvshmem","patches":["' + H("3") + '"],"recipe":"' + H("1") + '","scheme":"deepep-env/build-id/v1",'
    '"sources":{"nvshmem":"' + H("2") + '"},"variant":{"cuda_architectures":["90"],"gdrcopy":false,"ibgda":true,'
    '"version":"3.4.5"}}'
)
GOLDEN_ID = "sha256:5024bf10c885ff2ba91525d945bd4823b228ceca96cfee5b1b442b3176432706"


def _pre(**over):
    args = dict(
        package="nvshmem", recipe=H("1"), sources={"nvshmem": H("2")}, patches=[H("3")],
        variant={"version": "3.4.5", "cuda_architectures": ["90"], "ibgda": True, "gdrcopy": False},
        dependencies={"gdrcopy": H("4")}, externals={"cuda": {"provider": "host", "version": "13.0"}},
    )
    args.update(over)
    return build_id_preimage(**args)


def test_golden_preimage_and_digest() -> None:
    pre = _pre()
    assert canonical_json(pre).decode() == GOLDEN_PREIMAGE
    assert build_id(pre) == GOLDEN_ID


def test_key_order_does_not_matter() -> None:
    pre = _pre(variant={"gdrcopy": False, "ibgda": True, "cuda_architectures": ["90"], "version": "3.4.5"})
    assert build_id(pre) == GOLDEN_ID


def test_empty_fields_are_dropped_so_new_optional_fields_move_no_id() -> None:
    a = build_id_preimage(package="x", recipe=H("1"))
    b = build_id_preimage(package="x", recipe=H("1"), sources={}, patches=[], variant={}, dependencies={}, externals={})
    assert a == b == {"package": "x", "recipe": H("1"), "scheme": "deepep-env/build-id/v1"}


def test_each_input_moves_the_id() -> None:
    base = build_id(_pre())
    for over in (
        dict(recipe=H("9")), dict(sources={"nvshmem": H("9")}), dict(patches=[H("9")]),
        dict(patches=[H("3"), H("9")]), dict(variant={"version": "3.4.5"}),
        dict(dependencies={"gdrcopy": H("9")}), dict(externals={"cuda": {"provider": "host", "version": "12.9"}}),
    ):
        assert build_id(_pre(**over)) != base, over


def _tree(root: Path) -> Path:
    (root / "a").mkdir(parents=True)
    (root / "a" / "x.txt").write_text("hello\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(root / "run.sh", 0o755)
    os.symlink("a/x.txt", root / "link")
    return root


GOLDEN_TREE = "sha256:fefa40a6d02f459fa5c7a08c6c50e3e96ffd8c7d12554b43d1e379e1572c50ae"


def test_tree_hash_golden_and_ignores_mtime_owner_and_git(tmp_path: Path) -> None:
    t = _tree(tmp_path / "t")
    assert tree_sha256(t) == GOLDEN_TREE
    os.utime(t / "a" / "x.txt", (1, 1))
    os.chmod(t / "a" / "x.txt", 0o600)  # not executable either way: same
    (t / ".git").mkdir()
    (t / ".git" / "HEAD").write_text("ref")
    assert tree_sha256(t) == GOLDEN_TREE


def test_tree_hash_sees_content_exec_bit_and_names(tmp_path: Path) -> None:
    t = _tree(tmp_path / "t")
    (t / "a" / "x.txt").write_text("hello!\n")
    assert tree_sha256(t) != GOLDEN_TREE
    t2 = _tree(tmp_path / "t2")
    os.chmod(t2 / "run.sh", 0o644)
    assert tree_sha256(t2) != GOLDEN_TREE
    t3 = _tree(tmp_path / "t3")
    (t3 / "a" / "x.txt").rename(t3 / "a" / "y.txt")
    assert tree_sha256(t3) != GOLDEN_TREE
