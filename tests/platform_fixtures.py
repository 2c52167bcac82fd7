"""Shared fixtures for the platform/overlay/activate tests: host trees built once per session.

`host_tree(name)` builds tests/fixtures/hosts/make_hosts.py's host ``name`` into a session temp
dir (once) and returns its path. `fake_prefix(...)` lays out an installed env prefix the way the
install step leaves it (conda-meta/deepep-env.json and friends).
"""
from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Optional

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("make_hosts", REPO / "tests" / "fixtures" / "hosts" / "make_hosts.py")
make_hosts = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
assert _spec and _spec.loader
sys.modules.setdefault("make_hosts", make_hosts)
_spec.loader.exec_module(make_hosts)  # type: ignore[union-attr]

HOST_NAMES = tuple(make_hosts.HOSTS)
CAPTURE_ROOT = make_hosts.CAPTURE / "root"


@pytest.fixture(scope="session")
def host_tree(tmp_path_factory) -> Callable[[str], Path]:
    base = tmp_path_factory.mktemp("hosts")
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            built[name] = make_hosts.build(name, base / name)
        return built[name]

    return get


def fake_prefix(
    path: Path,
    env: str = "gcp-b200",
    platforms=("gcp-b200",),
    provider: str = "host",
    version: Optional[str] = "3.12",
    spec_env: Optional[dict] = None,
    nvshmem: bool = True,
    pip_nvshmem: bool = True,
    scripts: Optional[dict] = None,
    executable: Optional[str] = None,
) -> Path:
    """An installed prefix: bin/, lib/, site-packages, conda-meta/deepep-env.json, activate.d."""
    (path / "conda-meta").mkdir(parents=True, exist_ok=True)
    (path / "bin").mkdir(exist_ok=True)
    (path / "lib").mkdir(exist_ok=True)
    if version:
        sp = path / "lib" / f"python{version}" / "site-packages"
        sp.mkdir(parents=True, exist_ok=True)
        if pip_nvshmem:
            lib = sp / "nvidia" / "nvshmem" / "lib"
            lib.mkdir(parents=True, exist_ok=True)
            (lib / "libnvshmem_host.so.3").write_bytes(b"")
    if nvshmem:
        (path / "lib" / "libnvshmem_host.so.3").write_bytes(b"")
    for name, text in (scripts or {}).items():
        d = path / "etc" / "conda" / "activate.d"
        d.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(text)
    py = {"provider": provider}
    if version:
        py["version"] = version
    if executable:
        py["executable"] = executable
    meta = {"env": env, "platforms": list(platforms), "python": py, "spec_env": spec_env or {}}
    (path / "conda-meta" / "deepep-env.json").write_text(json.dumps(meta))
    return path


def has_shell(name: str) -> bool:
    return shutil.which(name) is not None


def no_traceback(res: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in res.stderr, res.stderr
    assert "Traceback" not in res.stdout, res.stdout
