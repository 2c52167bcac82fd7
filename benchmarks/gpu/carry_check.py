"""Compare a carry's file list (``sha256  path`` lines) with the committed manifest: one line per file
that differs, is missing or is extra; exit 1 when any does (benchmarks/gpu/make_carry.sh)."""
from __future__ import annotations

import sys
from pathlib import Path


def read(path: str) -> dict[str, str]:
    out = {}
    for line in Path(path).read_text().splitlines():
        if line and not line.startswith("#"):
            sha, _, name = line.partition("  ")
            out[name] = sha
    return out


def differences(want: dict[str, str], got: dict[str, str]) -> list[str]:
    rows = [f"differs: {n} (manifest {want[n][:16]}…, made {got[n][:16]}…)" for n in sorted(want) if n in got and got[n] != want[n]]
    rows += [f"missing: {n}" for n in sorted(set(want) - set(got))]
    rows += [f"extra: {n}" for n in sorted(set(got) - set(want))]
    return rows


def main(argv: list[str]) -> int:
    rows = differences(read(argv[0]), read(argv[1]))
    for r in rows:
        print(f"make_carry: {r}")
    print(f"carry_files_checked={len(read(argv[1]))}")
    print(f"carry_files_differing={len(rows)}")
    return 1 if rows else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
