"""A package with python in its host env gets .pyc files compiled by rattler-build itself
(``python -m py_compile`` in a temporary folder of a random name, which ``co_filename`` keeps, and
with the build's clock in the header). On GPU machines conda-mode DeepEP gave one id three byte
strings, every pyc different and nothing else (issue 25.1). The builder's normalization drops such
timestamp pycs (stale by construction: the package's .py files carry the epoch, not that clock) and
their ``info/paths.json`` entries; a checked-hash pyc the recipe writes itself stays. Real
rattler-build, a real local channel; the host env's python is a two-line wrapper of this one."""
from __future__ import annotations

import json
import re
import struct
import sys
import time
from pathlib import Path

from build_fixtures import read_in_package
from deepep_env.builder import driver
from deepep_env.builder.check import member_fingerprints
from deepep_env.builder.channel import index
from deepep_env.builder.normalize import normalize_conda

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"

PYTHON_RECIPE = f"""
package:
  name: python
  version: "{PY}.0"
build:
  number: 0
  string: wrapper_0
  script:
    - mkdir -p $PREFIX/bin
    - printf '#!/bin/sh\\nexec {sys.executable} "$@"\\n' > $PREFIX/bin/python
    - chmod +x $PREFIX/bin/python
"""

PKG_RECIPE = f"""
package:
  name: pyctest
  version: "1.0"
build:
  number: 0
  string: h0_0
  script:
    - mkdir -p $PREFIX/lib/python{PY}/site-packages/pyctest
    - printf 'def f(x):\\n    return x in {{"alpha", "beta", "gamma", "delta", "epsilon", "zeta"}}\\n' > $PREFIX/lib/python{PY}/site-packages/pyctest/__init__.py
    - mkdir -p $PREFIX/share/pyctest && printf 'X = 1\\n' > $PREFIX/share/pyctest/own.py
    - $PREFIX/bin/python -m compileall -q --invalidation-mode checked-hash -d share/pyctest $PREFIX/share/pyctest
requirements:
  host:
    - python
"""


def _channel(tmp_path: Path) -> Path:
    chan = tmp_path / "chan"
    for sub in ("noarch", "linux-64"):
        (chan / sub).mkdir(parents=True)
        (chan / sub / "repodata.json").write_text('{"packages": {}, "packages.conda": {}}')
    (tmp_path / "py").mkdir()
    (tmp_path / "py" / "recipe.yaml").write_text(PYTHON_RECIPE)
    driver.run(tmp_path / "py" / "recipe.yaml", {}, package="python", output_dir=chan,
               channels=[chan.as_uri()], log_path=tmp_path / "py.log", test=False)
    index(chan)
    return chan


def _build(tmp_path: Path, chan: Path, n: int) -> Path:
    """One build in the same folders each time (as the builder's id-named roots are), kept aside."""
    r = tmp_path / "r"
    r.mkdir(exist_ok=True)
    (r / "recipe.yaml").write_text(PKG_RECIPE)
    res = driver.run(r / "recipe.yaml", {}, package="pyctest", output_dir=tmp_path / "out", channels=[chan.as_uri()],
                     log_path=tmp_path / "logs" / "build.log", test=False)
    (pkg,) = res.packages
    kept = tmp_path / f"build{n}.conda"
    Path(pkg).rename(kept)
    return kept


TAG = f"cpython-{sys.version_info[0]}{sys.version_info[1]}"
RB_PYC = f"lib/python{PY}/site-packages/pyctest/__pycache__/__init__.{TAG}.pyc"   # rattler-build's
OWN_PYC = f"share/pyctest/__pycache__/own.{TAG}.pyc"                               # the recipe's


def _paths(pkg: Path) -> list[str]:
    return [p["_path"] for p in json.loads(read_in_package(pkg, "info/paths.json"))["paths"]]


def test_two_builds_give_one_package_without_rattler_builds_pycs(tmp_path):
    chan = _channel(tmp_path)
    first = _build(tmp_path, chan, 1)
    time.sleep(1.1)
    second = _build(tmp_path, chan, 2)
    a, b = read_in_package(first, RB_PYC), read_in_package(second, RB_PYC)
    assert a[4:8] == b"\0\0\0\0" and a != b, "rattler-build's own pycs: timestamp pycs, a random folder inside"
    assert read_in_package(first, OWN_PYC)[4:8] == struct.pack("<I", 3)        # checked-hash
    for pkg in (first, second):
        assert normalize_conda(pkg, 1600000000)
    assert first.read_bytes() == second.read_bytes()
    assert RB_PYC not in _paths(first) and OWN_PYC in _paths(first)
    members = member_fingerprints(first)
    assert RB_PYC not in members and OWN_PYC in members
    assert not normalize_conda(first, 1600000000), "idempotent: a dropped pyc stays dropped"


def test_the_builder_makes_one_package_in_two_checkouts(tmp_path):
    """The whole builder (plan, build, normalize, store, channel), two checkouts a second apart: a
    package with python in its host env has one sha256 and no rattler-build pyc."""
    from build_fixtures import add_recipe, sandbox
    from deepep_env.base.hashing import file_sha256

    chan = _channel(tmp_path)
    shas, pkgs = [], []
    for where in ("first/checkout", "second/elsewhere/clone"):
        sb = sandbox(tmp_path / where)
        add_recipe(sb.graph, "pyctest", PKG_RECIPE.replace("string: h0_0", "string: ${{ build_string }}"))
        sb.fill_cache()
        report = sb.build(extra_channels=[chan.as_uri()])
        outs = [o for n in report.nodes if n.package == "pyctest" for o in n.outputs]
        assert outs, [n.package for n in report.nodes]
        shas.append({o: file_sha256(sb.channel / o) for o in outs})
        pkgs.append(sb.channel / outs[0])
        _live_log_says_what_isolation_cost(sb.state / "logs")
        time.sleep(1.1)
    assert shas[0] == shas[1]
    assert RB_PYC not in member_fingerprints(pkgs[0]) and OWN_PYC in member_fingerprints(pkgs[0])


def _live_log_says_what_isolation_cost(logs: Path) -> None:
    """Each build's live log records, timestamped, the package-cache checks around rattler-build
    (the host env's python extracted and verified when first seen: the cache is the process's, so
    an earlier test may have seen it) and the normalization after it."""
    (live,) = [p for p in logs.glob("*.log.live") if "pyctest" in p.read_text()]
    text = live.read_text()
    before, after = (line for line in text.splitlines() if "package cache checked in" in line)
    assert "before the build" in before and "after the build" in after
    assert re.search(r"after the build, package cache checked in [0-9.]+ s: [1-9][0-9]* extractions kept "
                     r"\([0-9]+ first seen, verified file by file\)", after), after   # python's, at least
    assert re.search(r"deepep-env: 1 package\(s\) normalized in [0-9.]+ s", text), text
    assert text.index("package cache checked") < text.index("normalized in")
