"""doctor asks a libnccl its version the way DeepEP PR #712 does (ncclGetVersion), in a child process:
a real shared library, compiled here, answers; a file that is no library gives no answer (None)."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from deepep_env.doctor.runtime_probe import nccl_code_to_version, nccl_get_version


def test_version_codes():
    assert nccl_code_to_version(22809) == "2.28.9"
    assert nccl_code_to_version(23007) == "2.30.7"
    assert nccl_code_to_version(2804) == "2.8.4"     # before 2.9: major*1000 + minor*100 + patch


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_a_library_answers_its_own_version(tmp_path):
    src = tmp_path / "nccl.c"
    src.write_text("int ncclGetVersion(int *v) { *v = 22809; return 0; }\n")
    lib = tmp_path / "libnccl.so.2.30.7"          # the file name lies; the library does not
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    assert nccl_get_version(str(lib)) == "2.28.9"


def test_no_answer_from_what_is_not_a_library(tmp_path):
    fake = tmp_path / "libnccl.so.2"
    fake.write_text("not an ELF file\n")
    assert nccl_get_version(str(fake)) is None
    assert nccl_get_version(str(tmp_path / "missing.so")) is None
