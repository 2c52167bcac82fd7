"""Prove the installed deep_ep is the one the spec asked for (run by the recipe test and by doctor).

Reads the module from the prefix (not a source tree: seed 000 §4 problem 1), checks each required
feature against the code itself, and checks the extension links the NVSHMEM in the prefix.
Import of deep_ep needs torch; the .so is inspected with the ELF dynamic section, no GPU needed.
"""
from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path

# feature -> (file in the package, function/method that must be defined there)
FEATURE_CHECKS = {
    "pr-466": ("buffer.py", "_setup_device_hca_mapping"),
}


def defined_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--python-version", required=True)
    args = ap.parse_args()
    site = Path(args.prefix) / "lib" / f"python{args.python_version}" / "site-packages"
    pkg = site / "deep_ep"
    record = json.loads((pkg / "_deepep_env_build.json").read_text())
    problems = []
    for feat in record.get("require", []):
        if feat not in FEATURE_CHECKS:
            problems.append(f"no check known for required feature {feat!r}")
            continue
        fname, symbol = FEATURE_CHECKS[feat]
        if symbol not in defined_names(pkg / fname):
            problems.append(f"{feat}: {symbol} missing from installed {pkg / fname}")
    exts = sorted(site.glob("deep_ep_cpp*.so"))
    if not exts:
        problems.append(f"no deep_ep_cpp*.so in {site}")
    else:
        try:
            out = subprocess.run(["readelf", "-d", str(exts[0])], capture_output=True, text=True).stdout
        except FileNotFoundError:  # no binutils: the NEEDED entry is a plain string in .dynstr
            data = exts[0].read_bytes()
            out = "NEEDED libnvshmem_host.so" if b"libnvshmem_host.so" in data else ""
        if "libnvshmem_host.so" not in out:
            problems.append(f"{exts[0].name} does not link libnvshmem_host.so")
        if not (Path(args.prefix) / "lib" / "libnvshmem_host.so.3").exists():
            problems.append("libnvshmem_host.so.3 is not in the prefix")
        rpaths = [l for l in out.splitlines() if "RPATH" in l or "RUNPATH" in l]
        print("deep_ep_cpp:", exts[0].name, "|", " ".join(r.split()[-1] for r in rpaths))
    print("deep_ep build record:", json.dumps(record, sort_keys=True))
    for p in problems:
        print("FAIL:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
