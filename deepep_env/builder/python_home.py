"""The Python a build gets from a wheel-provided PyTorch (``[pytorch] provider = "wheel"``).

PyTorch is a package of the graph (recipes/pytorch-wheel: pip's closure of torch repacked into
deepep-pytorch, its id a dependency of DeepEP's). The recipes read PyTorch the way they read a host one,
through ``python_executable``; so before such a build the builder unpacks the package inside the build's
own folder (``<build root>/<id>-<package>/pytorch``, a function of the id) and hands over a wrapper:

- ``package/``: the package's files as built (checked by sha256 in the store before they are used);
- ``bin/python3``: the spec's host interpreter with the package's ``site-packages`` first on
  ``PYTHONPATH``, as ``deepep-env activate`` puts the env's for that interpreter at run time.

The interpreter itself stays a host external (fingerprinted: sources/hostprint.py); torch, its CUDA
libraries and setuptools are the package's, named by its id.
"""
from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Any, Mapping, Optional

from deepep_env.base.errors import UserError


def reads_wheel_torch(externals: Mapping[str, Any]) -> bool:
    info = externals.get("pytorch")
    return isinstance(info, Mapping) and info.get("provider") == "wheel"


def site_packages(root: Path, python_version: str) -> Path:
    return root / "lib" / f"python{python_version}" / "site-packages"


def make_python(package_file: Path, dest: Path, interpreter: str, python_version: str) -> tuple[Path, Path]:
    """Unpack ``package_file`` (deepep-pytorch) under ``dest``; return (the wrapper, its site-packages)."""
    from rattler.package_streaming import extract   # lazy: py-rattler's native module, only for a wheel PyTorch

    if dest.exists():
        shutil.rmtree(dest)
    pkg = dest / "package"
    extract(package_file, pkg)
    site = site_packages(pkg, python_version)
    if not (site / "torch" / "__init__.py").is_file():
        raise UserError(f"{package_file.name} has no {site.relative_to(pkg)}/torch: not a deepep-pytorch package "
                        f"for Python {python_version}", file=package_file, accepted="the package recipes/pytorch-wheel builds")
    wrapper = dest / "bin" / "python3"
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text("#!/bin/sh\n# deepep-env: the host interpreter with deepep-pytorch first on its path "
                       "(builder/python_home.py)\n"
                       f"PYTHONPATH={shlex.quote(str(site))}${{PYTHONPATH:+:$PYTHONPATH}} "
                       f"exec {shlex.quote(interpreter)} \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper, site


def cuda_library_headers(site: Optional[Path]) -> Optional[Path]:
    """The ``nvidia/cuNN/include`` of an unpacked closure (cublas, cusparse, … headers torch's own include)."""
    if site is None:
        return None
    found = sorted(p for p in (site / "nvidia").glob("cu[0-9]*/include") if p.is_dir())
    return found[-1] if found else None
