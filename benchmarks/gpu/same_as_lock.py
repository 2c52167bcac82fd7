"""Each package of ENV that a channel holds, against the sha256 pixi.lock names for it, as figures:
``PREFIX<name>_same_sha256_as_lock=0|1`` (``-`` in names as ``_``), and ``PREFIX<name>_sha256=<16 hex>``
for one that differs; with ``--totals`` also ``PREFIXpackages=N`` and ``PREFIXsame_sha256=N``. Run from
the project root (its pixi.lock).

    python benchmarks/gpu/same_as_lock.py ENV CHANNEL PREFIX [--totals] [--also CHANNEL2] [--members DIR]

``--also``: a second channel, looked in where the first lacks a package (lock_enough.sh's repack
channel of a conda-mode env). ``--members DIR``: for each package that differs, and each named in
``$KEEP_PKGS``, its members' sha256 in ``DIR/members-NAME-BUILD.txt`` (so two machines' lists can be
diffed without carrying the packages back); a ``$KEEP_PKGS`` package is copied to ``DIR/pkgs/`` too.
"""
from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys

from deepep_env.base.hashing import file_sha256
from deepep_env.builder.check import member_fingerprints
from deepep_env.formats.lockfile import read_lock


def _members(pkg: str, out: str) -> None:
    """"kind sha256-or-link-target  path", one member a line."""
    rows = [f"{kind} {what}  {m}" for m, (kind, what) in member_fingerprints(pkg).items()]
    with open(out, "w") as fh:
        fh.write("\n".join(rows) + "\n")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("env")
    ap.add_argument("channel")
    ap.add_argument("prefix")
    ap.add_argument("--totals", action="store_true")
    ap.add_argument("--also", default="")
    ap.add_argument("--members", default="")
    a = ap.parse_args(argv)
    keep = os.environ.get("KEEP_PKGS", "").split()
    same = total = 0
    for ps in read_lock("pixi.lock").env(a.env).packages.values():
        for q in ps:
            name = f"{q.name}-{q.version}-{q.build}.conda"
            f = glob.glob(f"{a.channel}/*/{name}") or (glob.glob(f"{a.also}/*/{name}") if a.also else [])
            if not f:
                continue
            total += 1
            got = file_sha256(f[0])
            ok = got == f"sha256:{q.sha256}"
            same += ok
            key = q.name.replace("-", "_")
            print(f"{a.prefix}{key}_same_sha256_as_lock={int(ok)}")
            if not ok:
                print(f"{a.prefix}{key}_sha256={got[7:23]}")
            if a.members and (not ok or q.name in keep):
                _members(f[0], f"{a.members}/members-{q.name}-{q.build}.txt")
            if a.members and q.name in keep:   # the package itself too, to diffoscope against another machine's
                os.makedirs(f"{a.members}/pkgs", exist_ok=True)
                shutil.copy(f[0], f"{a.members}/pkgs/")
    if a.totals:
        print(f"{a.prefix}packages={total}")
        print(f"{a.prefix}same_sha256={same}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
