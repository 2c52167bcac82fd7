"""The CUDA_HOME a build gets from a wheel-provided CUDA (``[cuda] provider = "wheel"``).

The toolkit is a package of the graph (recipes/cuda-wheel: NVIDIA's wheels repacked into
deepep-cuda-toolkit, its id a dependency of every node that reads CUDA). The recipes read CUDA the way
they read a host toolkit, as ``cuda_prefix``; so before such a build the builder unpacks the toolkit
package inside the build's own folder (``<build root>/<id>-<package>/cuda``, a function of the id, like
every path a compiler may record) and hands that folder over:

- ``package/``: the package's files as built (checked by sha256 in the store before they are used);
- ``home/``: the CUDA_HOME: a link to each entry of the toolkit, and ``include/`` with the toolkit's
  headers plus the headers of the CUDA libraries PyTorch's own headers include (cublas, cusparse,
  cusolver, cufft, curand), linked from the host Python's ``nvidia/cuNN/include``: the wheels torch runs
  with, fingerprinted as the node's ``library_headers`` fact (sources/hostprint.py). A toolkit header of
  the same name wins.

Nothing here is an input the id does not already name: the package by its id, the library headers by
their digest.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Mapping, Optional

from deepep_env.base.errors import UserError
from deepep_env.sources.hostprint import python_probe

TOOLKIT_ROOT = "cuda"   # where recipes/cuda-wheel puts the toolkit inside its package


def reads_wheel_cuda(externals: Mapping[str, Any]) -> bool:
    info = externals.get("cuda")
    return isinstance(info, Mapping) and info.get("provider") == "wheel"


def library_headers(meta: Mapping[str, Any]) -> Optional[Path]:
    """The host Python's ``nvidia/cuNN/include`` (None when it has none)."""
    where = python_probe(str(meta.get("python_executable") or "python3")).get("cuda_libraries") or ""
    inc = Path(where) / "include" if where else None
    return inc if inc is not None and inc.is_dir() else None


def make_home(package_file: Path, dest: Path, headers: Optional[Path]) -> Path:
    """Unpack ``package_file`` (deepep-cuda-toolkit) under ``dest`` and return the CUDA_HOME made of it."""
    from rattler.package_streaming import extract   # lazy: py-rattler's native module, only for a wheel CUDA

    if dest.exists():
        shutil.rmtree(dest)
    pkg = dest / "package"
    extract(package_file, pkg)
    real = pkg / TOOLKIT_ROOT
    if not (real / "bin" / "nvcc").is_file():
        raise UserError(f"{package_file.name} has no {TOOLKIT_ROOT}/bin/nvcc: not a deepep-cuda-toolkit package",
                        file=package_file, accepted="the package recipes/cuda-wheel builds")
    home = dest / "home"
    (home / "include").mkdir(parents=True)
    for e in sorted(real.iterdir()):
        if e.name not in ("include", "targets"):
            (home / e.name).symlink_to(e)
    for e in sorted((real / "include").iterdir()):
        (home / "include" / e.name).symlink_to(e)
    for h in sorted(headers.glob("*.h")) if headers is not None else ():
        if not os.path.lexists(home / "include" / h.name):
            (home / "include" / h.name).symlink_to(h)
    tgt = home / "targets" / "x86_64-linux"
    tgt.mkdir(parents=True)
    (tgt / "include").symlink_to("../../include")
    (tgt / "lib").symlink_to("../../lib")
    return home
