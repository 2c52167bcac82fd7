"""Env specs: every committed spec validates and resolves; bad input gets one clear line, exit 2."""
from __future__ import annotations

from pathlib import Path

import pytest

from cli_runner import cli_subprocess
from deepep_env.base.errors import UserError
from deepep_env.base.project import Project
from deepep_env.envspec import load_resolved, load_spec_file, parse_spec_text
from deepep_env.envspec.resolve import resolve

REPO = Path(__file__).resolve().parents[2]
SPECS = sorted((REPO / "env_specs").glob("*.toml"))
GOOD = (REPO / "env_specs" / "h200-nvlink.toml").read_text()


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_committed_specs_resolve(path: Path) -> None:
    r = load_resolved(str(path), Project(REPO))
    assert r.name == path.stem
    assert all(c.count(".") == 1 for c in r.cuda.architectures)


def test_seed_versions_are_the_seeds() -> None:
    p = Project(REPO)
    gcp = load_resolved("gcp-b200-seed", p)
    assert (gcp.cuda.version, gcp.nvshmem.version, gcp.pytorch.version) == ("12.9", "3.5.19", "2.10.0")
    assert gcp.cuda.architectures == ["10.0"] and gcp.nvshmem.ibgda and not gcp.nvshmem.gdrcopy
    assert gcp.deepep.revision.startswith("8a07e7e") and "pr-466" in gcp.deepep.features
    gke = load_resolved("gke-a4-seed", p)
    assert gke.nvshmem.version == "3.2.5" and [x.name for x in gke.nvshmem.patches] == ["deepep-nvshmem-3.2.5"]
    assert gke.gdrcopy and gke.gdrcopy.version == "2.5.1"
    h20 = load_resolved("h20-roce-seed", p)
    assert h20.cuda.architectures == ["9.0"] and h20.env["NVSHMEM_QP_DEPTH"] == "1024"
    h200 = load_resolved("h200-nvlink", p)
    assert h200.nvshmem.version == "3.4.5" and h200.deepep.revision.startswith("8a07e7e")
    assert h200.cuda.provider == "host" and h200.pytorch.provider == "host"


def test_cli_validate_all_specs() -> None:
    res = cli_subprocess("spec", "validate", *map(str, SPECS))
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("ok") == len(SPECS)


def _bad(text: str, tmp_path: Path, name: str = "h200-nvlink") -> UserError:
    f = tmp_path / f"{name}.toml"
    f.write_text(text)
    with pytest.raises(UserError) as ei:
        spec = load_spec_file(f)
        resolve(spec, Project(REPO), file=f)
    msg = str(ei.value)
    assert "\n" not in msg and str(f) in msg
    assert ei.value.exit_code == 2
    return ei.value


def test_malformed_toml(tmp_path: Path) -> None:
    e = _bad(GOOD + "\n[deepep\n", tmp_path)
    assert "malformed TOML" in str(e) and e.line


def test_unknown_key_names_field_and_line(tmp_path: Path) -> None:
    e = _bad(GOOD.replace("ibgda = true", "ibgda = true\nibgdaa = false"), tmp_path)
    assert e.field == "nvshmem.ibgdaa" and "unknown key" in str(e)
    assert GOOD.replace("ibgda = true", "ibgda = true\nibgdaa = false").splitlines()[e.line - 1].startswith("ibgdaa")


def test_wrong_type(tmp_path: Path) -> None:
    e = _bad(GOOD.replace("gdrcopy = false", 'gdrcopy = "no"'), tmp_path)
    assert e.field == "nvshmem.gdrcopy"


def test_unknown_version(tmp_path: Path) -> None:
    e = _bad(GOOD.replace('version = "3.4.5"', 'version = "9.9.9"'), tmp_path)
    assert e.field == "nvshmem.version" and "3.4.5" in (e.accepted or "")


def test_unknown_revision_lists_known(tmp_path: Path) -> None:
    e = _bad(GOOD.replace("8a07e7e7ed57cfc63005f670d64d410cb30b061b", "deadbeef"), tmp_path)
    assert e.field == "deepep.revision" and "8a07e7e7ed57" in (e.accepted or "")


def test_conflicting_pins_cite_rule(tmp_path: Path) -> None:
    # DeepEP 2.1.0 (EPv2 line) with NCCL below 2.30.4
    text = GOOD.replace("8a07e7e7ed57cfc63005f670d64d410cb30b061b", "dd758caf451848bd150e1046af3d0a73e5fff38d")
    text = text.replace('require = ["pr-466"]', "require = []")
    e = _bad(text, tmp_path)
    assert "deepep-v2-nccl" in str(e) and e.field == "nccl.version"


def test_v2_with_nvshmem_3_5_19_refused(tmp_path: Path) -> None:
    text = GOOD.replace("8a07e7e7ed57cfc63005f670d64d410cb30b061b", "dd758caf451848bd150e1046af3d0a73e5fff38d")
    text = text.replace('require = ["pr-466"]', "require = []").replace('version = "2.28.9"', 'version = "2.30.4"')
    text = text.replace('version = "3.4.5"', 'version = "3.5.19"')
    e = _bad(text, tmp_path)
    assert "#764" in str(e)


def test_range_backtracks_past_rule(tmp_path: Path) -> None:
    text = GOOD.replace("8a07e7e7ed57cfc63005f670d64d410cb30b061b", "dd758caf451848bd150e1046af3d0a73e5fff38d")
    text = text.replace('require = ["pr-466"]', "require = []").replace('version = "2.28.9"', 'version = "2.30.4"')
    text = text.replace('version = "3.4.5"', 'version = ">=3.3.9"')
    f = tmp_path / "h200-nvlink.toml"
    f.write_text(text)
    r = resolve(load_spec_file(f), Project(REPO), file=f)
    assert r.nvshmem.version == "3.4.5"
    assert any("skipped 3.5.19" in d for d in r.decisions)


def test_cpu_handler_without_gdrcopy(tmp_path: Path) -> None:
    e = _bad(GOOD.replace("gdrcopy = false", 'gdrcopy = false\nnic_handler = "cpu"'), tmp_path)
    assert "cpu-nic-handler-needs-gdrcopy" in str(e)


def test_sm100_needs_cuda_12_8(tmp_path: Path) -> None:
    text = GOOD.replace('architectures = ["9.0"]', 'architectures = ["10.0"]').replace('version = "13.0"', 'version = "12.6"')
    text = text.replace('cuda = "13.0"', 'cuda = "12.6"').replace("aggressive_ptx = false", "")
    e = _bad(text, tmp_path)
    assert "sm100-needs-cuda-12.8" in str(e)


def test_aggressive_ptx_needs_sm90_only(tmp_path: Path) -> None:
    text = GOOD.replace('architectures = ["9.0"]', 'architectures = ["9.0", "10.0"]').replace("aggressive_ptx = false", "aggressive_ptx = true")
    e = _bad(text, tmp_path)
    assert "aggressive-ptx-sm90-only" in str(e)


def test_required_feature_missing(tmp_path: Path) -> None:
    text = GOOD.replace("8a07e7e7ed57cfc63005f670d64d410cb30b061b", "29d31c095796f3c8ece47ee9cdcc167051bbeed9")
    e = _bad(text, tmp_path)
    assert "pr-466" in str(e) and e.field == "deepep.require"


def test_name_must_match_file(tmp_path: Path) -> None:
    e = _bad(GOOD, tmp_path, name="other")
    assert e.field == "name" and "'other'" in (e.accepted or "")


def test_unknown_format_version(tmp_path: Path) -> None:
    e = _bad(GOOD.replace("format = 1", "format = 7"), tmp_path)
    assert e.field == "format" and "upgrade" in (e.accepted or "")


def test_missing_format(tmp_path: Path) -> None:
    e = _bad(GOOD.replace("format = 1\n", ""), tmp_path)
    assert e.field == "format"


def test_hostile_values_stay_one_line(tmp_path: Path) -> None:
    e = _bad(GOOD.replace('description = "', 'description = 5 #"'), tmp_path)
    assert e.field == "description"
    e = _bad(GOOD.replace('NCCL_NVLS_ENABLE = "0"', '"BAD NAME\\n$(rm -rf /)" = "0"'), tmp_path)
    assert e.field == "env" and "\n" not in str(e)


def test_channel_with_credentials_refused(tmp_path: Path) -> None:
    e = _bad(GOOD.replace('channels = ["local"]', 'channels = ["https://user:s3cret@conda.example.com/x"]'), tmp_path)
    assert e.field == "channels" and "s3cret" not in str(e)


def test_cli_bad_spec_exit_2_one_line(tmp_path: Path) -> None:
    f = tmp_path / "h200-nvlink.toml"
    f.write_text(GOOD.replace("ibgda = true", "ibgda = true\nbogus = 1"))
    res = cli_subprocess("spec", "validate", str(f))
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and "nvshmem.bogus" in res.stderr
    assert "Traceback" not in res.stderr


def test_cli_unknown_env(tmp_path: Path) -> None:
    res = cli_subprocess("spec", "show", "nope")
    assert res.returncode == 2 and "h200-nvlink" in res.stderr


def test_comment_and_key_order_do_not_change_resolution(tmp_path: Path) -> None:
    a = parse_spec_text(GOOD, expect_name="h200-nvlink")
    lines = GOOD.splitlines()
    # move `description` below `platforms` and add comments
    text = "\n".join(l for l in lines if not l.startswith("description")) + "\n"
    text = text.replace("platforms =", "# a comment\n" + next(l for l in lines if l.startswith("description")) + "\nplatforms =")
    b = parse_spec_text(text, expect_name="h200-nvlink")
    assert a == b
