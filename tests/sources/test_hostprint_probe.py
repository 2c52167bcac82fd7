"""The host-Python probe reads its own result line, whatever else the interpreter prints.

torch 2.11 on a venv without NumPy prints a UserWarning to stderr after the probe's result. The probe
took the last line of the output as the result, so every Python and PyTorch fact of the seed envs'
venv read "missing … printed no probe result": their build ids named no Python, no PyTorch headers,
no setuptools (issue 40; found 2026-11-28)."""
from __future__ import annotations

import sys

from deepep_env.sources import hostprint


def _chatty_python(tmp_path, after: str):
    exe = tmp_path / "python3"
    exe.write_text(f'#!/bin/sh\n"{sys.executable}" "$@"\nrc=$?\necho "{after}" >&2\nexit $rc\n')
    exe.chmod(0o755)
    return exe


def test_a_warning_after_the_result_is_not_the_result(tmp_path):
    exe = _chatty_python(tmp_path, "UserWarning: Failed to initialize NumPy: No module named 'numpy'")
    hostprint.clear_caches()
    facts = hostprint.python_facts({"python_executable": str(exe)})
    assert facts["python"] == sys.version.split()[0]
    assert facts["headers"].startswith("sha256:") and facts["tool_pip"] != "missing"
    assert not hostprint.missing_externals({}, {"python": {"fingerprint": facts}})
    hostprint.clear_caches()


def test_a_python_that_prints_no_result_is_missing_and_named(tmp_path):
    exe = tmp_path / "python3"
    exe.write_text('#!/bin/sh\necho "not a python"\n')
    exe.chmod(0o755)
    hostprint.clear_caches()
    facts = hostprint.python_facts({"python_executable": str(exe)})
    assert facts == {"python": f"missing: {exe} printed no probe result"}
    here = {"python": {"fingerprint": facts}}
    assert hostprint.missing_externals({"python": {"fingerprint": {"python": "3.12.1"}}}, here) == [
        f"python: {exe} printed no probe result"]
    assert hostprint.missing_externals(here, here) == []     # missing when the lock was made too: not "lacks"
    hostprint.clear_caches()


def test_a_venv_include_folder_with_a_header_is_a_fact_and_an_empty_one_is_not(tmp_path):
    import subprocess

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = str(venv / "bin" / "python3")
    hostprint.clear_caches()
    assert "venv_headers" not in hostprint.python_facts({"python_executable": py})   # what `python -m venv` makes
    (venv / "include").mkdir(exist_ok=True)
    (venv / "include" / "Python.h").write_text("/* shadows the interpreter's */\n")  # ahead of it on -I
    hostprint.clear_caches()
    assert hostprint.python_facts({"python_executable": py})["venv_headers"].startswith("sha256:")
    hostprint.clear_caches()
