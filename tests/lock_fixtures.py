"""Shared fixtures for the lock/install/diff/pixi/task tests: a real local channel, built offline.

The packages are built for real with rattler-build (py-rattler-build) from the tiny recipes in
``tests/fixtures/lock/recipes`` — host tools only, no compilers, no network — at the build ids
the real build plan computes for the test specs, then indexed with rattler's indexer. A stand-in
for conda-forge (python, cuda-version, nccl, pytorch with conda-forge-like build strings) is
assembled with ``rattler_build.assemble_package``.

Built once per session (:func:`world`; the ``lt_world`` fixture); every test gets its own copy of
the project and channel (:func:`project_copy`), so tests that corrupt a package or edit a spec never
disturb others.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

FIX = Path(__file__).resolve().parent / "fixtures" / "lock"
REPO = Path(__file__).resolve().parents[1]
SUBDIR = "linux-64"


@dataclass(frozen=True)
class World:
    root: Path            # a session folder holding everything below
    project: Path         # recipes/ + env_specs/ (pristine)
    channel: Path         # the builder's channel for lt-host and lt-conda (pristine)
    forge: Path           # stand-in for conda-forge
    builds: dict          # env → {package: build_string}


def index(channel: Path) -> None:
    import rattler.index

    (channel / "noarch").mkdir(parents=True, exist_ok=True)
    asyncio.run(rattler.index.index_fs(channel, write_shards=False, write_zst=False, force=True))


def write_project(root: Path, forge_url: str) -> Path:
    (root / "recipes").mkdir(parents=True, exist_ok=True)
    for name in ("nvshmem", "deep-ep"):
        shutil.copytree(FIX / "recipes" / name, root / "recipes" / name, dirs_exist_ok=True)
    # The real deepep-env package recipe: every environment holds the tool and its activation hook.
    shutil.copytree(REPO / "recipes" / "deepep-env", root / "recipes" / "deepep-env", dirs_exist_ok=True)
    (root / "env_specs").mkdir(exist_ok=True)
    for spec in (FIX / "specs").glob("*.toml"):
        text = spec.read_text().replace("@PYTHON@", sys.executable).replace("@FORGE@", forge_url)
        (root / "env_specs" / spec.name).write_text(text)
    return root


def build_recipe(recipe: Path, variants: dict, out: Path, channels: list[str]) -> list[Path]:
    from rattler_build import Stage0Recipe, ToolConfiguration, VariantConfig

    out.mkdir(parents=True, exist_ok=True)
    r = Stage0Recipe.from_file(str(recipe))
    r.run_build(variant_config=VariantConfig({k: [v] for k, v in variants.items()}),
                tool_config=ToolConfiguration(test_strategy="skip"), output_dir=out, channels=channels)
    return sorted(out.glob("*/*.conda"))


def publish(files: list[Path], channel: Path) -> None:
    for f in files:
        dst = channel / f.parent.name / f.name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dst)
    index(channel)


def build_env(project_root: Path, env: str, channel: Path, work: Path) -> dict[str, str]:
    """Build the plan's packages for ``env`` into ``channel`` (as `deepep-env build` would); a build
    id the channel already has is not rebuilt (like the builder's store)."""
    from deepep_env.builder.plan import plan
    from deepep_env.base.project import Project
    from deepep_env.envspec.resolve import load_resolved

    project = Project(project_root)
    bp = plan(load_resolved(env, project), project)
    built: dict[str, str] = {}
    by_pkg = {n.package: n for n in bp.nodes}
    for node in bp.nodes:
        built[node.package] = node.build_string
        if list(channel.glob(f"*/*-{node.version}-{node.build_string}.conda")):
            continue
        variants = {"version": node.version, "build_string": node.build_string}
        if node.meta.get("local_source"):
            variants["source_dir"] = node.meta["local_source"]
        for d in node.deps:
            dn = by_pkg[d]
            variants[f"dep_{d.replace('-', '_')}"] = f"=={dn.version} {dn.build_string}"
        out = work / f"{env}-{node.package}"
        files = build_recipe(project.recipes / node.package / "recipe.yaml", variants, out, [channel.as_uri()])
        publish(files, channel)
    return built


def make_forge(forge: Path, work: Path) -> None:
    """A stand-in for conda-forge: conda-forge-like names, versions and build strings."""
    from rattler_build import assemble_package

    staged = work / "forge-files"
    staged.mkdir(parents=True, exist_ok=True)
    (staged / "README").write_text("stand-in package\n")
    pkgs = [
        ("python", "3.12.8", "h9e4cc4f_1_cpython", ["__glibc >=2.17,<3.0.a0", "libzlib-fake >=1.3"]),
        ("python", "3.11.11", "h9e4cc4f_1_cpython", ["__glibc >=2.17,<3.0.a0", "libzlib-fake >=1.3"]),
        ("libzlib-fake", "1.3.1", "hb9d3cd8_2", []),
        ("cuda-version", "12.9", "h4f385c5_3", []),
        ("cuda-version", "13.0", "h4f385c5_3", []),
        ("nccl", "2.28.9", "h4d09622_0", ["cuda-version >=12.9,<13", "__cuda >=12"]),
        ("nccl", "2.27.7", "h4d09622_0", ["cuda-version >=12.9,<13", "__cuda >=12"]),
        ("pytorch", "2.10.0", "cuda129_generic_py312_h3c2b4c3_200",
         ["python >=3.12,<3.13.0a0", "cuda-version >=12.9,<13", "nccl >=2.27", "__cuda"]),
        ("pytorch", "2.10.0", "cpu_generic_py312_h3c2b4c3_0", ["python >=3.12,<3.13.0a0"]),
        ("pytorch", "2.8.0", "cuda129_generic_py312_h1a2b3c4_100",
         ["python >=3.12,<3.13.0a0", "cuda-version >=12.9,<13", "nccl >=2.27", "__cuda"]),
    ]
    for name, version, build, depends in pkgs:
        assemble_package(name=name, version=version, target_platform=SUBDIR, build_string=build,
                         output_dir=forge / SUBDIR, files_dir=staged, depends=depends, compression_level=1)
    index(forge)


_WORLD: Optional[World] = None


def world(tmp_path_factory) -> World:
    """Build everything once per session."""
    global _WORLD
    if _WORLD is not None:
        return _WORLD
    root = tmp_path_factory.mktemp("lock-world")
    forge = root / "forge"
    make_forge(forge, root / "work")
    project = write_project(root / "project", forge.as_uri())
    channel = root / "channel"
    (channel / "noarch").mkdir(parents=True)
    build_recipe(FIX / "recipes" / "testdep" / "recipe.yaml", {"version": "1.0"}, root / "work" / "testdep", [])
    publish(sorted((root / "work" / "testdep").glob("*/*.conda")), channel)
    builds = {env: build_env(project, env, channel, root / "work") for env in ("lt-host", "lt-conda")}
    _WORLD = World(root=root, project=project, channel=channel, forge=forge, builds=builds)
    return _WORLD


@pytest.fixture(scope="session")
def lt_world(tmp_path_factory) -> World:
    """The session's :func:`world`, for every test module that builds on it."""
    return world(tmp_path_factory)


def project_copy(w: World, dest: Path):
    """A private copy of the project with the built channel at ``<state>/channel``."""
    from deepep_env.base.project import Project

    shutil.copytree(w.project, dest)
    p = Project(dest)
    shutil.copytree(w.channel, p.channel)
    return p


def installed_lt_host(w: World, dest: Path):
    """lt-host locked into a private copy of the project's pixi.lock and installed where pixi puts it:
    (project, prefix). Its deepep-env package is the activation (issue 50)."""
    from deepep_env.install.installer import install_env
    from deepep_env.lock import lock_env

    os.environ.setdefault("DEEPEP_ENV_CACHE_DIR", str(w.root / "cache"))
    proj = project_copy(w, dest)
    lock_env("lt-host", proj)
    res = install_env("lt-host", proj)
    assert {p["name"] for p in res.packages} >= {"deep-ep", "deepep-env"}
    return proj, Path(res.prefix)


def set_spec_value(project, env: str, old: str, new: str) -> None:
    path = project.spec_path(env)
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def corrupt(path: Path, offset: int = 200) -> None:
    """Flip one byte in place (keeps the size: only a hash catches it)."""
    data = bytearray(path.read_bytes())
    data[min(offset, len(data) - 1)] ^= 0xFF
    path.write_bytes(bytes(data))


def env_for_cli(project, cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["DEEPEP_ENV_PROJECT"] = str(project.root)
    env["DEEPEP_ENV_CACHE_DIR"] = str(cache)
    return env


def data_request(project, env: str, packages: list[str], subdirs: list[str]):
    """A lock request given as data: explicit package specs, the spec's channels and CUDA."""
    from deepep_env.base.channels.urls import resolve_channels
    from deepep_env.formats.lock_platforms import platform_for
    from deepep_env.lock.request import LockRequest, Requirement
    from deepep_env.envspec.resolve import load_resolved

    r = load_resolved(env, project)
    refs = resolve_channels(list(r.channels), publish_url=r.publish_url, local_dir=project.channel)
    reqs = [Requirement(p.split()[0], p, "extra", kind="extra") for p in packages]
    return LockRequest(env=env, platforms=[platform_for(s, r.cuda.version) for s in subdirs], channels=refs,
                       requirements=reqs, spec_version=r.version, publish_url=r.publish_url)
