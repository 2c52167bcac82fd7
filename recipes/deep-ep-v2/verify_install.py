"""Prove the installed DeepEP 2.x is the one the spec asked for (recipe test; doctor reads the same facts).

Runs inside the recipe test, where deepep_env is not installed, and never imports deep_ep (importing
it imports torch, maps an NCCL and initialises the JIT). It checks, in the prefix:
- the build record says engine v2; required features are defined in the installed code;
- deep_ep/_C*.so exists and links libnccl and libnvshmem_host (DeepEP 2.x setup.py);
- the JIT's headers were installed (deep_ep/include/deep_ep/...);
- when the env provides NCCL (provider source/conda): lib/libnccl.so.2 is the version built against,
  include/nccl_device.h is there for the JIT, deep_ep/envs.py points EP_NCCL_ROOT_DIR at this prefix,
  and the torch-preload link (host/pip PyTorch) resolves to the same file.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

# feature -> (file in the package, function/method/class that must be defined there); the V2 rows of
# deepep_env/doctor/features.py (tests/test_doctor_deepep.py keeps them equal).
FEATURE_CHECKS = {
    "elastic-buffer": ("buffers/elastic.py", "ElasticBuffer"),
}


def defined_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def needed(lib: Path) -> str:
    try:
        return subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True).stdout
    except FileNotFoundError:  # no binutils: NEEDED entries are plain strings in .dynstr
        data = lib.read_bytes()
        return " ".join(n for n in ("libnccl.so", "libnvshmem_host.so") if n.encode() in data)


def check_extension(pkg: Path, problems: list[str]) -> None:
    exts = sorted(pkg.glob("_C*.so"))
    if not exts:
        problems.append(f"no _C*.so in {pkg}")
        return
    out = needed(exts[0])
    for lib in ("libnccl.so", "libnvshmem_host.so"):
        if lib not in out:
            problems.append(f"{exts[0].name} does not link {lib}")
    print("deep_ep._C:", exts[0].name)
    if not list((pkg / "include" / "deep_ep").rglob("*.cuh")):
        problems.append("deep_ep/include/deep_ep/*.cuh missing: the JIT compiles its kernels from them")


def check_nccl(prefix: Path, site: Path, record: dict, problems: list[str]) -> None:
    nccl = record.get("nccl") or {}
    if nccl.get("provider") not in ("source", "conda"):
        print("nccl: provider", nccl.get("provider"), "- the host Python's wheel, found at run time")
        return
    lib = prefix / "lib" / "libnccl.so.2"
    if not lib.exists():
        problems.append("lib/libnccl.so.2 is not in the prefix")
        return
    real = lib.resolve().name  # libnccl.so.2.30.7
    want = ".".join(str(nccl.get("version", "")).split(".")[:3])
    if real != f"libnccl.so.{want}":
        problems.append(f"lib/libnccl.so.2 -> {real}, DeepEP was built against NCCL {want}")
    if not (prefix / "include" / "nccl_device.h").exists():
        problems.append("include/nccl_device.h missing: the JIT compiles against the env's NCCL headers")
    envs = (site / "deep_ep" / "envs.py")
    text = envs.read_text() if envs.exists() else ""
    m = re.search(r"persistent_envs\['EP_NCCL_ROOT_DIR'\] = '([^']*)'", text)
    if not m or os.path.realpath(m.group(1)) != os.path.realpath(prefix):
        problems.append(f"deep_ep/envs.py does not point EP_NCCL_ROOT_DIR at {prefix} ({m.group(1) if m else 'unset'})")
    link = nccl.get("torch_preload_link")
    if link and os.path.realpath(site / link) != os.path.realpath(lib):
        problems.append(f"{link} does not resolve to the env's lib/libnccl.so.2")
    print("nccl:", real, "| EP_NCCL_ROOT_DIR:", m.group(1) if m else None, "| torch preload link:", link or "none")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--python-version", required=True)
    args = ap.parse_args()
    prefix = Path(args.prefix)
    site = prefix / "lib" / f"python{args.python_version}" / "site-packages"
    pkg = site / "deep_ep"
    record = json.loads((pkg / "_deepep_env_build.json").read_text())
    problems: list[str] = []
    if record.get("engine") != "v2":
        problems.append(f"build record engine {record.get('engine')!r}, expected 'v2'")
    for feat in record.get("require", []):
        if feat not in FEATURE_CHECKS:
            problems.append(f"no check known for required feature {feat!r}")
            continue
        fname, symbol = FEATURE_CHECKS[feat]
        if symbol not in defined_names(pkg / fname):
            problems.append(f"{feat}: {symbol} missing from installed {pkg / fname}")
    check_extension(pkg, problems)
    check_nccl(prefix, site, record, problems)
    print("deep_ep build record:", json.dumps(record, sort_keys=True))
    for p in problems:
        print("FAIL:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
