"""`deepep-env lock --check`: typed staleness reasons, one fixture folder per reason
(tests/fixtures/lock/check/<reason>/case.toml: what to change after locking, what to expect)."""
from __future__ import annotations

import json
import sys

import pytest

import lock_fixtures as lf
from cli_runner import cli_in_process

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CASES = sorted(p for p in (lf.FIX / "check").iterdir() if (p / "case.toml").is_file())


@pytest.fixture
def proj(lt_world, tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(lt_world.root / "cache"))
    return lf.project_copy(lt_world, tmp_path / "proj")


def test_every_reason_has_a_fixture_folder():
    from deepep_env.lock.check import REASON_TYPES

    kinds = {t.kind for t in REASON_TYPES}
    covered = {k for c in CASES for k in tomllib.loads((c / "case.toml").read_text())["expect"]}
    assert kinds <= covered, f"reasons without a fixture folder: {sorted(kinds - covered)}"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_check_reason(case, proj, capsys):
    from deepep_env.lock import check_request, lock_env, lock_request, read_lock
    from deepep_env.lock import check_lock

    c = tomllib.loads((case / "case.toml").read_text())
    env = c["env"]
    path = proj.pixi_lock
    if "request" in c:
        rq = c["request"]
        lock_request(lf.data_request(proj, env, rq["packages"], rq["lock_subdirs"]), path)
        res = check_request(lf.data_request(proj, env, rq["packages"], rq["check_subdirs"]), read_lock(path), path)
    else:
        lock_env(env, proj)
        for e in c.get("spec_edit", []):
            lf.set_spec_value(proj, env, e["old"], e["new"])
        for e in c.get("recipe_edit", []):
            f = proj.recipes / e["file"]
            f.write_text(f.read_text() + e["append"])
        for e in c.get("lock_edit", []):
            text = path.read_text()
            assert e["old"] in text, e["old"]
            path.write_text(text.replace(e["old"], e["new"], -1 if e.get("all") else 1))
        for name in c.get("channel_touch", []):
            (url,) = [p.url for p in read_lock(path).env(env).packages_for("linux-64") if p.name == name]
            (f,) = proj.channel.glob(f"*/{url.rsplit('/', 1)[-1]}")
            data = bytearray(f.read_bytes())
            data[len(data) // 2] ^= 0xFF          # other bytes under the same name and build id
            f.write_bytes(bytes(data))
        if c.get("delete_lock"):
            path.unlink()
        res = check_lock(env, proj)
        # The CLI: exit 0 fresh, 1 stale; --json carries the same reasons.
        rc, out, err = cli_in_process(capsys, "lock", env, "--check", "--json", "--project", proj.root)
        assert rc == (0 if res.fresh else 1), err
        data = json.loads(out)
        assert [r["kind"] for r in data["reasons"]] == [r.kind for r in res.reasons]
        assert data["status"] == ("fresh" if res.fresh else "stale")
    kinds = {r.kind for r in res.reasons}
    expect = set(c["expect"])
    assert expect <= kinds, [r.message() for r in res.reasons]
    if c.get("only"):
        assert kinds == expect, [r.message() for r in res.reasons]
    for r in res.reasons:
        d = r.to_dict()
        assert d["kind"] == r.kind and d["message"] and "\n" not in d["message"]


def test_pin_changed_names_component_old_and_new(proj):
    from deepep_env.lock import PinChanged, check_lock, lock_env

    lock_env("lt-conda", proj)
    lf.set_spec_value(proj, "lt-conda", '[pytorch]\nversion = "2.10.0"', '[pytorch]\nversion = "2.8.0"')
    res = check_lock("lt-conda", proj)
    pins = [r for r in res.reasons if isinstance(r, PinChanged)]
    assert pins and pins[0].component == "pytorch" and pins[0].old.startswith("2.10.0 cuda129")
    assert pins[0].new == "==2.8.0 cuda129*"


def test_build_id_changed_names_old_and_new_build(proj, lt_world):
    from deepep_env.lock import BuildIdChanged, check_lock, lock_env

    lock_env("lt-host", proj)
    f = proj.recipes / "deep-ep" / "recipe.yaml"
    f.write_text(f.read_text() + "# edit\n")
    res = check_lock("lt-host", proj)
    (r,) = [r for r in res.reasons if isinstance(r, BuildIdChanged)]
    assert r.package == "deep-ep" and r.old == lt_world.builds["lt-host"]["deep-ep"]
    assert r.new != r.old and r.new.startswith("h") and r.new.endswith("_0")


def test_text_output_lists_reasons(proj, capsys):
    from deepep_env.lock import lock_env

    lock_env("lt-conda", proj)
    lf.set_spec_value(proj, "lt-conda", '[nccl]\nversion = "2.28.9"', '[nccl]\nversion = "2.27.7"')
    rc, out, err = cli_in_process(capsys, "lock", "lt-conda", "--check", "--project", proj.root)
    assert rc == 1
    assert "lock stale" in out and "[pin-changed]" in out and "nccl" in out
    assert "deepep-env: error:" in err and "stale" in err
