"""Same inputs, same bytes (issue 14.6): build the offline test graph twice — in two different
checkout paths, at least a second apart, each with its own store, channel and source cache — and
compare every package file by sha256. The graph (tests/fixtures/recipes/graph) has a C library and
a program compiled with the host gcc, and a noarch package with activation scripts.

Prints ``name=value`` lines; the last line is the headline ``reproducible_packages=N/M``. Where a
package differs, the first differing members are printed (``build --check``'s comparison).

    python benchmarks/bench_reproducible.py
"""
from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FIXTURES = REPO / "tests" / "fixtures" / "recipes"


def build_in(checkout: Path) -> tuple[dict[str, Path], float]:
    """Copy the fixture recipes to ``checkout`` and build them there; {channel-relative file: path}."""
    from deepep_env.builder.build import build_recipes
    from deepep_env.builder.graph import nodes_from_recipe_dirs, recipe_dirs_under
    from deepep_env.sources import fetch, wants_for_nodes

    shutil.copytree(FIXTURES, checkout)
    state = checkout / "state"
    nodes = nodes_from_recipe_dirs(recipe_dirs_under(checkout / "graph"))
    fetch(wants_for_nodes(nodes), state / "sources", offline=True, from_dir=checkout / "upstream")
    t = time.perf_counter()
    rep = build_recipes(checkout / "graph", store=state / "store", channel=state / "channel",
                        source_cache=state / "sources", offline=True, jobs=1)
    secs = time.perf_counter() - t
    return {o: state / "channel" / o for n in rep.nodes for o in n.outputs}, secs


def main() -> int:
    from deepep_env.builder.check import compare_packages

    with tempfile.TemporaryDirectory(prefix="bench-repro-") as tmp:
        first, s1 = build_in(Path(tmp) / "alice" / "deepep-env")
        time.sleep(1.5)
        second, s2 = build_in(Path(tmp) / "ci" / "workspace" / "clone-2")
        same = 0
        for rel in sorted(set(first) | set(second)):
            if rel not in first or rel not in second:
                print(f"only_one_build={rel}")
                continue
            diffs = compare_packages(first[rel], second[rel])
            same += not diffs
            print(f"package={rel} identical={int(not diffs)}")
            for d in diffs[:5]:
                print(f"  differs={d}")
        total = len(set(first) | set(second))
        print(f"build_1_s={s1:.2f}")
        print(f"build_2_s={s2:.2f}")
        print(f"reproducible_packages={same}/{total}")
    return 0 if same == total else 1


if __name__ == "__main__":
    raise SystemExit(main())
