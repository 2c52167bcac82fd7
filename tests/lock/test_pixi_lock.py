"""The project's one pixi.lock, as pixi reads it (issue 16): rows written as pixi writes them, pixi's
satisfiability verdict derived from pixi.toml and the lock (deepep_env/lock/satisfy.py, rules cited
from pixi's source there and in docs/lockfiles.md), and third-party readers of the lock."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import lock_fixtures as lf
from cli_runner import cli_in_process

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _verdict(manifest_path: Path, lock_path: Path) -> dict[str, list[str]]:
    from deepep_env.lock.satisfy import verdict

    m = tomllib.loads(manifest_path.read_text())
    return {v.env: v.messages() for v in verdict(m, lock_path, manifest_path.parent)}


def test_repo_lock_is_what_pixi_accepts_for_repo_manifest(repo_root):
    """The committed pair: every environment of pixi.toml, `default` included, is satisfiable, so
    `pixi install --locked` installs exactly the reviewed lock (no re-solve)."""
    got = _verdict(repo_root / "pixi.toml", repo_root / "pixi.lock")
    m = tomllib.loads((repo_root / "pixi.toml").read_text())
    assert set(got) == set(m["environments"]) | {"default"}
    assert got == {env: [] for env in got}, got


def test_rows_are_written_as_pixi_writes_them(repo_root):
    """pixi ≥ 0.71 (crates/pixi_core/src/lock_file/platform_rename.rs shorten_platform_names): rich
    platforms as p1, p2… in the manifest's order, subdir written, virtual packages in declared order
    then subdir defaults, spelled as rattler's GenericVirtualPackage displays them."""
    text = (repo_root / "pixi.lock").read_text()
    assert "- name: p1\n  subdir: linux-64\n  virtual-packages:\n  - __cuda=12.9\n  - __archspec=0=x86_64\n" \
           "  - __glibc=2.28\n  - __linux=4.18\n  - __unix=0=0\n" in text
    assert "- name: p2\n  subdir: linux-64\n  virtual-packages:\n  - __cuda=13.0\n" in text
    assert "  default:\n    channels: []\n    packages: {}\n" in text
    from deepep_env.lock import read_lock

    data = read_lock(repo_root / "pixi.lock")   # read back under the spec's names
    assert set(data.platforms) == {"linux-64-cuda129", "linux-64-cuda130"}
    assert list(data.env("h200-nvlink").packages) == ["linux-64-cuda130"]


def _mutate(tmp_path: Path, repo_root: Path, lock_edit=None, manifest_edit=None) -> dict[str, list[str]]:
    m, lk = tmp_path / "pixi.toml", tmp_path / "pixi.lock"
    mt, lt = (repo_root / "pixi.toml").read_text(), (repo_root / "pixi.lock").read_text()
    m.write_text(manifest_edit(mt) if manifest_edit else mt)
    lk.write_text(lock_edit(lt) if lock_edit else lt)
    return _verdict(m, lk)


def _old_rows(t: str) -> str:
    """The lock format deepep-env wrote before: `linux-64` rows with `__unix=0`, `__archspec=1=x86_64`."""
    t = re.sub(r"- name: p2\n  subdir: linux-64\n  virtual-packages:\n(  - .*\n)+",
               "- name: linux-64\n  virtual-packages:\n  - __unix=0\n  - __linux=4.18\n  - __glibc=2.28\n"
               "  - __cuda=13.0\n  - __archspec=1=x86_64\n", t)
    return t.replace("      p2:\n", "      linux-64:\n")


CASES = {
    # (lock edit, manifest edit, env, expected reason fragment)
    "old-row-spelling": (_old_rows, None, "h200-nvlink", "UnsatisfiableMatchSpec"),
    "no-default-env": (lambda t: t.replace("  default:\n    channels: []\n    packages: {}\n", ""), None, "default",
                       "environment missing from the lock"),
    "channel-appended": (None, lambda t: t.replace('channels = ["https://conda.deepep-env.example/h200"]',
                                                   'channels = ["https://conda.deepep-env.example/h200", "conda-forge"]', 1),
                         "h200-nvlink", "ChannelsExtended"),
    "channel-replaced": (None, lambda t: t.replace('channels = ["https://conda.deepep-env.example/h200"]',
                                                   'channels = ["conda-forge"]', 1), "h200-nvlink", "ChannelsMismatch"),
    "build-pin-changed": (None, lambda t: re.sub(r'(\[feature\.h200-nvlink\.dependencies\]\n(?:.*\n)*?deep-ep = .*build = )"h[0-9a-f]{10}_0"',
                                                 r'\1"h0000000000_0"', t, count=1),
                          "h200-nvlink", "UnsatisfiableMatchSpec"),
    "cuda-changed": (lambda t: t.replace("  - __cuda=13.0\n", "  - __cuda=13.1\n"), None, "h200-nvlink",
                     "UnsatisfiableMatchSpec"),
    "extra-package": (None, lambda t: t.replace('[feature.h200-nvlink-conda.dependencies]\n',
                                                '[feature.h200-nvlink-conda.dependencies]\n').replace(
        'numpy = "*"\n', ''), "h200-nvlink-conda", "TooManyCondaPackages"),
    "options-differ": (lambda t: t.replace("  h200-nvlink:\n    channels:", "  h200-nvlink:\n    options:\n"
                                           "      strategy: lowest-version\n    channels:"), None, "h200-nvlink",
                       "SolveStrategyMismatch"),
    "env-not-in-manifest": (lambda t: t.replace("environments:\n", "environments:\n  stray:\n    channels: []\n"
                                                "    packages: {}\n", 1), None, "stray", "not in the manifest"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_verdict_names_why_pixi_would_re_solve(case, repo_root, tmp_path):
    lock_edit, manifest_edit, env, fragment = CASES[case]
    got = _mutate(tmp_path, repo_root, lock_edit, manifest_edit)
    assert any(fragment in r for r in got.get(env, [])), got
    # Everything else stays satisfiable: one change, one finding.
    # (The environments on the linux-64-cuda130 row share it: a change to the row reaches them all.)
    others = {e: r for e, r in got.items() if r and e != env}
    m = tomllib.loads((repo_root / "pixi.toml").read_text())
    on_row = {e for e, f in m["feature"].items() if f.get("platforms") == ["linux-64-cuda130"]} - {env}
    assert not others or (case in ("cuda-changed", "old-row-spelling") and set(others) == on_row), others


def test_verdict_cli_exit_codes(repo_root, tmp_path, capsys):
    rc, out, _ = cli_in_process(capsys, "pixi", "verdict", "--project", repo_root)
    assert rc == 0 and "h200-nvlink: satisfiable" in out
    (tmp_path / "pixi.toml").write_text((repo_root / "pixi.toml").read_text())
    (tmp_path / "pixi.lock").write_text(_old_rows((repo_root / "pixi.lock").read_text()))
    rc, out, err = cli_in_process(capsys, "pixi", "verdict", "--manifest", tmp_path / "pixi.toml", "--json")
    assert rc == 1 and "pixi would re-solve " in err and "h200-nvlink," in err   # every env it names
    data = json.loads(out)
    assert {e["env"]: e["satisfiable"] for e in data["environments"]}["h200-nvlink"] is False


def test_a_fresh_project_locked_and_synced_is_satisfiable(lt_world, tmp_path, capsys, monkeypatch):
    """What deepep-env writes for a new project (lock each spec, then pixi sync) is what pixi accepts,
    and relocking one environment leaves every other environment's bytes in the lock as they were."""
    from deepep_env.lock import lock_env

    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(lt_world.root / "cache"))
    proj = lf.project_copy(lt_world, tmp_path / "proj")
    lock_env("lt-conda", proj)
    lock_env("lt-host", proj)
    assert cli_in_process(capsys, "pixi", "sync", "--project", proj.root)[0] == 0
    assert _verdict(proj.pixi_toml, proj.pixi_lock) == {"default": [], "lt-conda": [], "lt-host": []}

    def section(text: str, env: str) -> str:
        return text[text.index(f"  {env}:\n"):].split("\n  lt-", 1)[0]

    before = proj.pixi_lock.read_text()
    lf.set_spec_value(proj, "lt-host", 'version = "2026.1.0"', 'version = "2026.1.1"')
    lock_env("lt-host", proj)
    after = proj.pixi_lock.read_text()
    assert after != before  # the header records the new spec version
    assert section(after, "lt-conda") == section(before, "lt-conda")
    assert after.split("\npackages:\n", 1)[1] == before.split("\npackages:\n", 1)[1]


def _tool(name: str) -> str:
    exe = shutil.which(name) or str(Path(sys.executable).with_name(name))
    if not Path(exe).exists():
        pytest.fail(f"{name} is not installed: it is in the test extras (pip install -e '.[test]')")
    return exe


PIXI_TO_CONDA_LOCK = "pixi-to-conda-lock==0.4.5"


@pytest.fixture(scope="session")
def pixi_to_conda_lock() -> str:
    """pixi-to-conda-lock in a virtual environment of its own, with the dependencies it declares
    (py-rattler <0.25, which deepep-env's own pin excludes): the tool as its users run it. Made by
    .ci/setup-pixi-to-conda-lock.sh (CI runs it); the tests install nothing, so without it: skip."""
    exe = Path.home() / ".cache" / "deepep-env-tests" / PIXI_TO_CONDA_LOCK.replace("==", "-") / "bin" / "pixi-to-conda-lock"
    if not exe.exists():
        pytest.skip(f"{PIXI_TO_CONDA_LOCK} is not set up (run .ci/setup-pixi-to-conda-lock.sh, which needs PyPI once)")
    return str(exe)


def _envs_with_packages(repo_root) -> dict[str, str]:
    """env → the on-disk platform alias its packages are under."""
    import yaml

    raw = yaml.safe_load((repo_root / "pixi.lock").read_text())
    return {e: next(iter(v["packages"])) for e, v in raw["environments"].items() if v["packages"]}


def test_pixi_to_conda_lock_reads_every_environment(repo_root, tmp_path, pixi_to_conda_lock):
    from conda_lock.lockfile import parse_conda_lock_file

    from deepep_env.lock import read_lock

    res = subprocess.run([pixi_to_conda_lock, str(repo_root / "pixi.lock"), "-o", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    data = read_lock(repo_root / "pixi.lock")
    for env, alias in _envs_with_packages(repo_root).items():
        parsed = parse_conda_lock_file(tmp_path / f"{env}.conda-lock.yml")
        (plat,) = data.env(env).packages.values()
        assert {(p.name, p.hash.sha256) for p in parsed.package} == {(p.name, p.sha256) for p in plat}
        # The tool names the platform as the lock row does (pixi's own pN aliases too): a limit of
        # the tool, which `deepep-env export` (the subdir) does not share.
        assert list(parsed.metadata.platforms) == [alias]


def test_pixi_sbom_describes_every_environment(repo_root, tmp_path):
    from deepep_env.lock import read_lock

    data = read_lock(repo_root / "pixi.lock")
    for env, alias in _envs_with_packages(repo_root).items():
        out = tmp_path / f"{env}.cdx.json"
        res = subprocess.run([_tool("pixi-sbom"), "--lockfile", str(repo_root / "pixi.lock"), "-e", env,
                              "--platform", alias, "--output", str(out)], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        bom = json.loads(out.read_text())
        assert bom["bomFormat"] == "CycloneDX" and bom["specVersion"] == "1.6"
        (plat,) = data.env(env).packages.values()
        assert {c["name"] for c in bom["components"]} >= {p.name for p in plat}


def test_one_url_two_contents_is_refused(repo_root, tmp_path):
    """rattler keeps one record per URL: relocking an environment whose package file was rebuilt with
    other bytes, while another environment still locks the old ones, is refused (found on a GPU run:
    same build id, other bytes) and writes nothing."""
    from deepep_env.base.errors import UserError
    from deepep_env.formats.lockfile import _existing_sections, write_env
    from deepep_env.formats.lock_platforms import platform_for

    lock = tmp_path / "pixi.lock"
    lock.write_bytes((repo_root / "pixi.lock").read_bytes())
    sections, _ = _existing_sections(lock)
    # deepep-env's package is locked by h200-nvlink and h200-nvlink-v2 at one build (one URL)
    (recs,) = sections["h200-nvlink-v2"].records.values()
    next(r for r in recs if r.name.normalized == "deepep-env").sha256 = bytes(32)
    before = lock.read_bytes()
    with pytest.raises(UserError, match="one file, two contents; nothing written"):
        write_env(lock, "h200-nvlink-v2", sections["h200-nvlink-v2"],
                  [platform_for("linux-64", "12.9"), platform_for("linux-64", "13.0")])
    assert lock.read_bytes() == before


def test_the_lock_holds_no_indexing_time(repo_root, tmp_path):
    """Issue 25.5: when a channel was indexed is the indexing machine's fact, not the package's (pixi
    drops it on any rewrite): the writer drops it for every record of every channel, in the
    environment it writes and in those it keeps; the committed lock has none."""
    import re

    from deepep_env.formats.lockfile import _existing_sections, write_env
    from deepep_env.formats.lock_platforms import platform_for

    committed = (repo_root / "pixi.lock").read_bytes()
    assert b"indexed_timestamp" not in committed
    lock = tmp_path / "pixi.lock"
    stamped = re.sub(r"(?m)^(  timestamp: \d+\n)", r"\1  indexed_timestamp: 1795512013980\n", committed.decode())
    lock.write_text(stamped)
    sections, _ = _existing_sections(lock)
    assert all(r.indexed_timestamp is not None for s in sections.values() for rs in s.records.values() for r in rs)
    write_env(lock, "h200-nvlink-conda", sections["h200-nvlink-conda"],
              [platform_for("linux-64", "12.9"), platform_for("linux-64", "13.0")])
    assert lock.read_bytes() == committed


def test_verdict_reasons_are_typed(tmp_path, repo_root):
    """The reasons are data, as pixi's EnvironmentUnsat/PlatformUnsat are: a kind, the facts, and the
    one line `pixi verdict` prints (issue 29.3)."""
    from deepep_env.lock.satisfy import ChannelsExtended, EnvironmentUnsat, verdict

    _, manifest_edit, env, _ = CASES["channel-appended"]
    m, lk = tmp_path / "pixi.toml", tmp_path / "pixi.lock"
    m.write_text(manifest_edit((repo_root / "pixi.toml").read_text()))
    lk.write_text((repo_root / "pixi.lock").read_text())
    v = next(v for v in verdict(tomllib.loads(m.read_text()), lk, tmp_path) if v.env == env)
    r = v.reasons[0]
    assert isinstance(r, ChannelsExtended) and isinstance(r, EnvironmentUnsat) and r.kind == "ChannelsExtended"
    assert r.manifest[:len(r.locked)] == r.locked and len(r.manifest) > len(r.locked)
    assert str(r) == r.message() == v.to_dict()["reasons"][0]
    assert str(r).startswith("channels extended: locked [") and str(r).endswith("(ChannelsExtended)")
