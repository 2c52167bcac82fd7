"""Shared helpers for the builder and source-cache tests (tests/test_build_*.py, test_sources_*.py).

The fixture recipes live in tests/fixtures/recipes/:
    graph/libgreet        C library from a pinned upstream tree + a patch (sources.toml)
    graph/greet-app       links libgreet (host requirement -> graph edge); own ``path:`` source
    graph/greet-activate  noarch, activation scripts; run-depends on greet-app
    upstream/             the "upstream" copies: libgreet-1.0/ tree, greet-loud.patch, greet-app/
Tests copy that tree into tmp_path (so they may edit it) and fill a source cache from upstream/
with ``fetch --from`` (offline), then build with the real rattler-build.
"""
from __future__ import annotations

import shutil
import tarfile
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "recipes"


@dataclass
class Sandbox:
    root: Path                 # copy of tests/fixtures/recipes

    @property
    def graph(self) -> Path:
        return self.root / "graph"

    @property
    def upstream(self) -> Path:
        return self.root / "upstream"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def store(self) -> Path:
        return self.state / "store"

    @property
    def channel(self) -> Path:
        return self.state / "channel"

    @property
    def cache(self) -> Path:
        return self.state / "sources"

    def fill_cache(self, cache: Path | None = None):
        from deepep_env.builder.graph import nodes_from_recipe_dirs, recipe_dirs_under
        from deepep_env.sources import fetch, wants_for_nodes

        nodes = nodes_from_recipe_dirs(recipe_dirs_under(self.graph))
        return fetch(wants_for_nodes(nodes), cache or self.cache, offline=True, from_dir=self.upstream)

    def nodes(self, **kw):
        from deepep_env.builder.graph import nodes_from_recipe_dirs, recipe_dirs_under

        return {n.package: n for n in nodes_from_recipe_dirs(recipe_dirs_under(self.graph), **kw)}

    def build(self, **kw):
        from deepep_env.builder.build import build_recipes

        args: dict[str, Any] = dict(store=self.store, channel=self.channel, source_cache=self.cache, offline=True, jobs=1)
        args.update(kw)
        return build_recipes(self.graph, **args)

    def statuses(self, report) -> dict[str, str]:
        return {n.package: n.status for n in report.nodes}


def sandbox(tmp_path: Path) -> Sandbox:
    root = tmp_path / "fx"
    shutil.copytree(FIXTURES, root, symlinks=True)
    return Sandbox(root)


def tar_gz(src: Path, dest: Path, top: str | None = None) -> Path:
    """A tarball of ``src`` with one top-level folder (GitHub style) unless ``top`` is ""."""
    with tarfile.open(dest, "w:gz") as tf:
        tf.add(src, arcname=top if top is not None else src.name)
    return dest


def add_recipe(parent: Path, name: str, text: str, files: dict[str, str] | None = None) -> Path:
    d = parent / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "recipe.yaml").write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    for rel, content in (files or {}).items():
        (d / rel).write_text(textwrap.dedent(content).lstrip(), encoding="utf-8")
    return d


# --- a throwaway deepep-env project whose nvshmem/deep-ep recipes are tiny stand-ins -------------

FAKE_NVSHMEM = """
# Stand-in for recipes/nvshmem in tests: same recipe inputs as the real one (docs/build-id.md §6).
package:
  name: nvshmem
  version: ${{ version }}
source:
  path: ${{ source_dir }}
  use_gitignore: false
build:
  string: ${{ build_string }}
  script:
    env:
      CUDA_HOME: ${{ cuda_prefix }}
      ARCHS: ${{ cuda_architectures }}
      IBGDA: ${{ "ON" if ibgda == "true" else "OFF" }}
      GDRCOPY: ${{ "ON" if gdrcopy == "true" else "OFF" }}
    content:
      - mkdir -p $PREFIX/share/nvshmem
      - echo "cuda_home=$CUDA_HOME archs=$ARCHS ibgda=$IBGDA gdrcopy=$GDRCOPY jobs=${{ jobs }}" > $PREFIX/share/nvshmem/variant.txt
      - cp VERSION $PREFIX/share/nvshmem/VERSION
"""

def stand_in_deepep(script: str, nvshmem: str = "nvshmem") -> str:
    """A stand-in deep-ep recipe: the real one's package, staged source and build string, ``script``
    (the lines under ``build: script:``, indented as there) as its build, and the edges to NVSHMEM the
    real one has (host: the exact build; run: its version and build string). ``nvshmem``: the name of
    NVSHMEM's package (the wheel repack's is ``deepep-nvshmem``)."""
    return f"""
package:
  name: deep-ep
  version: ${{{{ version }}}}
source:
  path: ${{{{ source_dir }}}}
  use_gitignore: false
build:
  string: ${{{{ build_string }}}}
  script:
{script.strip(chr(10))}
requirements:
  host:
    - {nvshmem} ${{{{ dep_nvshmem }}}}
  run:
    - {nvshmem} ==${{{{ nvshmem_version }}}} ${{{{ nvshmem_build_string }}}}
"""


FAKE_DEEPEP = stand_in_deepep("""
    env:
      TORCH_CUDA_ARCH_LIST: ${{ torch_cuda_arch_list }}
      PYTHON: ${{ python_executable }}
      REQUIRE: ${{ require }}
    content:
      - mkdir -p $PREFIX/share/deep-ep
      - echo "arch=$TORCH_CUDA_ARCH_LIST python=$PYTHON require=$REQUIRE torch=${{ pytorch_provider }} rev=${{ revision }}" > $PREFIX/share/deep-ep/variant.txt
      - cp buffer.py $PREFIX/share/deep-ep/buffer.py
      - cp $PREFIX/share/nvshmem/VERSION $PREFIX/share/deep-ep/nvshmem-version
""")


@dataclass
class FakeProject:
    root: Path
    upstream: Path

    @property
    def project(self):
        from deepep_env.base.project import Project

        return Project(self.root)


def fake_project(tmp_path: Path) -> FakeProject:
    """env_specs/ (the real h200-nvlink spec), recipes/*/sources.toml (the real catalogs, with the
    pins of NVSHMEM 3.4.5 and DeepEP 8a07e7e pointed at tiny upstream stand-ins) and fake recipes."""
    from deepep_env.base.hashing import tree_sha256

    root = tmp_path / "proj"
    (root / "env_specs").mkdir(parents=True)
    shutil.copy(REPO / "env_specs" / "h200-nvlink.toml", root / "env_specs" / "h200-nvlink.toml")
    up = tmp_path / "upstream"
    nv = up / "nvshmem-src"
    nv.mkdir(parents=True)
    (nv / "VERSION").write_text("3.4.5 (stand-in)\n")
    dp = up / "deepep-src"
    dp.mkdir(parents=True)
    (dp / "buffer.py").write_text("class Buffer:\n    def _setup_device_hca_mapping(self):\n        pass\n")
    for pkg in ("nvshmem", "deep-ep", "gdrcopy"):
        (root / "recipes" / pkg).mkdir(parents=True)
        text = (REPO / "recipes" / pkg / "sources.toml").read_text()
        if pkg == "nvshmem":
            text = text.replace("sha256:24058fa72280c12b5bec5a5b0a6649e2f8f324fb722d52aaca3eb035c870cbf0", tree_sha256(nv))
        if pkg == "deep-ep":
            text = text.replace("sha256:27cb6ec8f475b0ce4af89b99a472de064825f302676165236e2ff20461be4689", tree_sha256(dp))
        (root / "recipes" / pkg / "sources.toml").write_text(text)
    (root / "recipes" / "nvshmem" / "recipe.yaml").write_text(textwrap.dedent(FAKE_NVSHMEM).lstrip())
    (root / "recipes" / "deep-ep" / "recipe.yaml").write_text(textwrap.dedent(FAKE_DEEPEP).lstrip())
    tar_gz(nv, up / "nvshmem-131da55f643ac87c810ba0bc51d359258bf433a1.tar.gz", top="nvshmem-131da55")
    tar_gz(dp, up / "deepep-8a07e7e7ed57cfc63005f670d64d410cb30b061b.tar.gz", top="DeepEP-8a07e7e")
    shutil.rmtree(nv)
    shutil.rmtree(dp)
    return FakeProject(root, up)


def fake_project_with_toolkit(tmp_path: Path) -> FakeProject:
    """:func:`fake_project` whose h200-nvlink spec reads a stand-in CUDA toolkit (``tmp_path/toolkit``: a
    ``cuda.h`` and an ``nvcc`` that prints CUDA 13.0) instead of the machine's /usr/local/cuda."""
    fp = fake_project(tmp_path)
    tk = tmp_path / "toolkit"
    (tk / "bin").mkdir(parents=True)
    (tk / "include").mkdir()
    (tk / "include" / "cuda.h").write_text("#define CUDA_VERSION 13000\n")
    nvcc = tk / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0'\necho 'Build cuda_13.0.fake_0'\n")
    nvcc.chmod(0o755)
    spec = fp.root / "env_specs" / "h200-nvlink.toml"
    spec.write_text(spec.read_text().replace('prefix = "/usr/local/cuda"', f'prefix = "{tk}"'))
    return fp


def read_in_package(conda: Path, member: str) -> bytes:
    """One file of a .conda package."""
    import tempfile

    import rattler.package_streaming as ps

    with tempfile.TemporaryDirectory() as d:
        ps.extract(str(conda), d)
        return (Path(d) / member).read_bytes()



def write_wheel(path: Path, members: dict[str, tuple[str, int]]) -> Path:
    """A stand-in wheel: a zip of ``members`` (name -> (text, mode)) in name order, at one fixed time."""
    import zipfile

    with zipfile.ZipFile(path, "w") as z:
        for name, (text, mode) in sorted(members.items()):
            info = zipfile.ZipInfo(name, date_time=(2025, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            z.writestr(info, text)
    return path


def wheel_catalog(package: str, version: str, pins: dict[str, tuple[str, str, Path]], fill: str) -> str:
    """A wheel catalog (recipes/<package>/sources.toml) pinning stand-in wheels by their real sha256 and size:
    ``pins`` is part -> (project, version, wheel file); ``fill`` makes the URL's 60-hex folder."""
    from deepep_env.base.hashing import file_sha256

    text = f'format = 1\npackage = "{package}"\n'
    for part, (project, ver, f) in pins.items():
        url = f"https://files.pythonhosted.org/packages/00/11/{fill * 60}/{f.name}"
        text += (f'\n[versions."{version}".linux-64.{part}]\nproject = "{project}"\nversion = "{ver}"\n'
                 f'filename = "{f.name}"\nurl = "{url}"\nsha256 = "{file_sha256(f)}"\nsize = {f.stat().st_size}\n')
    return text


def fetched(fp: FakeProject, env: str, tmp_path: Path, monkeypatch: Any, capsys: Any) -> list[str]:
    """A state folder and source cache of the test's own, the fake upstream fetched offline for ``env``:
    the ``--project`` arguments the test's commands take."""
    from cli_runner import cli_in_process

    monkeypatch.setenv("DEEPEP_ENV_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    p = ["--project", str(fp.root)]
    assert cli_in_process(capsys, "fetch", env, *p, "--from", str(fp.upstream), "--offline")[0] == 0
    return p


def refusal_after_edit(fp: FakeProject, env: str, old: str, new: str, count: int = -1) -> str:
    """The error ``load_resolved`` gives once ``old`` (which must be there) becomes ``new`` in the spec
    (``count`` occurrences, every one by default), as text."""
    import pytest

    from deepep_env.base.errors import UserError
    from deepep_env.envspec import load_resolved

    f = fp.root / "env_specs" / f"{env}.toml"
    assert old in f.read_text()
    f.write_text(f.read_text().replace(old, new, count))
    with pytest.raises(UserError) as ei:
        load_resolved(env, fp.project)
    return str(ei.value)


# --- conda-forge-shaped solves (tests/builder/test_conda_mode.py, tests/doctor/test_deepep_v2.py) -----

FORGE = Path(__file__).resolve().parent / "fixtures" / "conda-forge"


def solve_linux64(specs, channels, cuda="12.9"):
    import asyncio

    from rattler import MatchSpec, Subdir, solve

    from deepep_env.formats.lock_platforms import platform_for

    vps = [v.rattler() for v in platform_for("linux-64", cuda).virtual_packages]
    recs = asyncio.run(solve(sources=channels, specs=[MatchSpec(s) for s in specs],
                             platforms=[Subdir("linux-64"), Subdir("noarch")], virtual_packages=vps))
    return {r.name.normalized: r for r in recs}


def records_channel(tmp: Path, records: list[dict]) -> str:
    """A records-only channel for our own packages, in the repodata shape the builder's indexer writes."""
    import json

    pkgs = {f"{r['name']}-{r['version']}-{r['build']}.conda": {**r, "subdir": "linux-64", "build_number": 0,
                                                               "sha256": "0" * 64, "size": 1} for r in records}
    (tmp / "linux-64").mkdir(parents=True)
    (tmp / "linux-64" / "repodata.json").write_text(json.dumps({"info": {"subdir": "linux-64"}, "packages": {},
                                                                 "packages.conda": pkgs}))
    (tmp / "noarch").mkdir()
    (tmp / "noarch" / "repodata.json").write_text(json.dumps({"info": {"subdir": "noarch"}, "packages": {}}))
    return tmp.resolve().as_uri()



__all__ = ["Sandbox", "sandbox", "tar_gz", "add_recipe", "fake_project", "FakeProject", "read_in_package",
           "FIXTURES", "REPO", "FORGE", "solve_linux64", "records_channel"]
