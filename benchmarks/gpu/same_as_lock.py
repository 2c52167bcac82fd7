"""Each package of ENV that a channel holds, against the sha256 pixi.lock names for it, as figures:
``PREFIX<name>_same_sha256_as_lock=0|1`` (``-`` in names as ``_``); with ``--totals`` also
``PREFIXpackages=N`` and ``PREFIXsame_sha256=N``. Run from the project root (its pixi.lock).

    python benchmarks/gpu/same_as_lock.py ENV CHANNEL PREFIX [--totals]
"""
from __future__ import annotations

import glob
import sys

from deepep_env.base.hashing import file_sha256
from deepep_env.formats.lockfile import read_lock


def main(argv: list[str]) -> int:
    env, chan, prefix = argv[:3]
    same = total = 0
    for ps in read_lock("pixi.lock").env(env).packages.values():
        for q in ps:
            f = glob.glob(f"{chan}/*/{q.name}-{q.version}-{q.build}.conda")
            if f:
                total += 1
                ok = file_sha256(f[0]) == f"sha256:{q.sha256}"
                same += ok
                print(f"{prefix}{q.name.replace('-', '_')}_same_sha256_as_lock={int(ok)}")
    if "--totals" in argv[3:]:
        print(f"{prefix}packages={total}")
        print(f"{prefix}same_sha256={same}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
