"""Builder benchmark on the test recipes (tests/fixtures/recipes/graph: libgreet <- greet-app <-
greet-activate), real rattler-build, offline.

Measures: cold build of the whole graph; no-op rebuild of the whole graph (target < 1 s: ids are
computed from inputs, the store answers, nothing is built); one-leaf change (only the leaf is
rebuilt); base change (the base and its dependents). Prints ``name=value`` lines, the headline last.

    python benchmarks/bench_build.py [--runs N]
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FIXTURES = REPO / "tests" / "fixtures" / "recipes"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5, help="repetitions of the no-op rebuild")
    args = ap.parse_args(argv)

    from deepep_env.builder.build import build_recipes
    from deepep_env.builder.graph import nodes_from_recipe_dirs, recipe_dirs_under
    from deepep_env.sources import fetch, wants_for_nodes

    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp:
        root = Path(tmp) / "fx"
        shutil.copytree(FIXTURES, root)
        state = root / "state"
        kw = dict(store=state / "store", channel=state / "channel", source_cache=state / "sources", offline=True, jobs=1)
        nodes = nodes_from_recipe_dirs(recipe_dirs_under(root / "graph"))
        fetch(wants_for_nodes(nodes), state / "sources", offline=True, from_dir=root / "upstream")

        def build():
            t = time.perf_counter()
            rep = build_recipes(root / "graph", **kw)
            return time.perf_counter() - t, [n.package for n in rep.nodes if n.status == "built"]

        cold_s, cold_built = build()
        assert len(cold_built) == len(nodes), cold_built
        noop = [build() for _ in range(args.runs)]
        assert all(not built for _, built in noop), noop
        noop_s = [s for s, _ in noop]

        act = root / "graph" / "greet-activate" / "activate.sh"
        act.write_text(act.read_text() + "export GREET_BENCH=1\n")
        leaf_s, leaf_built = build()
        assert leaf_built == ["greet-activate"], leaf_built

        rec = root / "graph" / "libgreet" / "recipe.yaml"
        rec.write_text(rec.read_text() + "# bench: base change\n")
        base_s, base_built = build()
        assert len(base_built) == len(nodes), base_built

        print(f"nodes={len(nodes)}")
        print(f"cold_build_s={cold_s:.3f}")
        print(f"cold_rebuilt={len(cold_built)}")
        print(f"leaf_change_s={leaf_s:.3f}")
        print(f"leaf_change_rebuilt={len(leaf_built)}")
        print(f"base_change_s={base_s:.3f}")
        print(f"base_change_rebuilt={len(base_built)}")
        print(f"noop_rebuilt={max(len(b) for _, b in noop)}")
        print(f"noop_max_s={max(noop_s):.4f}")
        print(f"noop_under_1s={'yes' if max(noop_s) < 1.0 else 'no'}")
        print(f"noop_rebuild_p50_s={statistics.median(noop_s):.4f}")
    return 0 if max(noop_s) < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
