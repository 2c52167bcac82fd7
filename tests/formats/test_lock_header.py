"""The deepep-env header of pixi.lock (``# deepep-env-lock: {...,"format":"deepep-env/lock-meta/v2"}``,
stamp ``formats.LOCK_META``): a header this deepep-env cannot read is refused in one line naming the
file, by the library (``read_lock``) and by every command that reads a lock (``lock ENV --check``,
``diff``), never half-read and never overwritten; the v1 header older deepep-env wrote (one
environment per header) is still read.

The locks are the committed pixi.lock with its header rewritten, and a real v1 lock
(tests/fixtures/lock/header-v1, see its README). The project is this checkout: ``lock --check``
does not solve, so nothing here needs a channel or the network."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_runner import cli_in_process
from deepep_env.base.errors import UserError
from deepep_env.formats.lockfile import META_PREFIX, read_lock

REPO = Path(__file__).resolve().parents[2]
V1_LOCK = Path(__file__).resolve().parents[1] / "fixtures" / "lock" / "header-v1" / "h200-nvlink.pixi.lock"
FIELD = "# deepep-env-lock"


def _committed() -> tuple[dict, str]:
    head, body = (REPO / "pixi.lock").read_text(encoding="utf-8").split("\n", 1)
    assert head.startswith(META_PREFIX)
    return json.loads(head[len(META_PREFIX):]), body


def _write(path: Path, meta, body: str) -> Path:
    header = meta if isinstance(meta, str) else json.dumps(meta, sort_keys=True, separators=(",", ":"))
    path.write_text(META_PREFIX + header + "\n" + body, encoding="utf-8")
    return path


def _with_format(fmt):
    meta, body = _committed()
    meta = dict(meta)
    if fmt is None:
        del meta["format"]
    else:
        meta["format"] = fmt
    return meta, body


# (id, header format (None: the key removed), what the one line says)
BAD = [
    ("newer", "deepep-env/lock-meta/v3",
     "deepep-env header format deepep-env/lock-meta/v3 is newer than this deepep-env reads"),
    ("not-ours", "something-else/v1", "not a deepep-env header (format 'something-else/v1')"),
    ("no-format", None, "not a deepep-env header (format none)"),
    ("older-than-v1", "deepep-env/lock-meta/v0", "deepep-env header format deepep-env/lock-meta/v0 is no longer read"),
    ("no-version", "deepep-env/lock-meta", "not a deepep-env header (format 'deepep-env/lock-meta')"),
]


@pytest.fixture(params=BAD, ids=[b[0] for b in BAD])
def bad_lock(request, tmp_path):
    _, fmt, says = request.param
    meta, body = _with_format(fmt)
    return _write(tmp_path / "pixi.lock", meta, body), says


def test_committed_lock_has_the_current_header():
    from deepep_env.formats.stamps import LOCK_META

    meta, _ = _committed()
    assert meta["format"] == LOCK_META.stamp == "deepep-env/lock-meta/v2"
    data = read_lock(REPO / "pixi.lock")
    assert set(data.meta) == set(meta["envs"]) and data.meta == meta["envs"]


def test_read_lock_refuses_in_one_line_naming_the_file(bad_lock):
    path, says = bad_lock
    with pytest.raises(UserError) as err:
        read_lock(path)
    e = err.value
    assert e.file == str(path) and e.field == FIELD and e.exit_code == 2
    text = str(e)
    assert "\n" not in text and text.startswith(f"{path}: {FIELD}: ") and says in text
    assert "deepep-env/lock-meta/v1, deepep-env/lock-meta/v2" in e.accepted
    if "newer" in says:
        assert "upgrade deepep-env" in e.accepted


def _assert_refused(res, path: Path, says: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stdout[-500:], res.stderr[-500:])
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr
    assert lines[0].startswith("deepep-env: error: ") and str(path) in lines[0] and says in lines[0]


def test_lock_check_refuses(bad_lock, capsys):
    path, says = bad_lock
    for extra in ((), ("--json",)):
        res = cli_in_process(capsys, "lock", "h200-nvlink", "--check", "--project", REPO, "--output", path, *extra)
        _assert_refused(res, path, says)


def test_diff_refuses_either_side(bad_lock, capsys):
    path, says = bad_lock
    good = REPO / "pixi.lock"
    for old, new in ((good, path), (path, good)):
        res = cli_in_process(capsys, "diff", old, new)
        _assert_refused(res, path, says)
    res = cli_in_process(capsys, "diff", good, path, "--json")
    _assert_refused(res, path, says)


def test_a_lock_it_cannot_read_is_never_overwritten(bad_lock):
    """`deepep-env lock ENV` writes through write_env, which reads every other environment first:
    an unreadable header stops it before anything is written."""
    from deepep_env.formats.lockfile import EnvSection, write_env

    path, says = bad_lock
    before = path.read_bytes()
    with pytest.raises(UserError, match="deepep-env-lock") as err:
        write_env(path, "h200-nvlink", EnvSection([], {}), [])
    assert says in str(err.value)
    assert path.read_bytes() == before


@pytest.mark.parametrize("header, says", [
    ("{not json", "not a deepep-env header (format not a JSON object)"),
    ("[1, 2]", "not a deepep-env header (format not a JSON object)"),
    ('"deepep-env/lock-meta/v2"', "not a deepep-env header (format not a JSON object)"),
    ('{"format":"deepep-env/lock-meta/v2","envs":[1]}', "'envs' must map environment names to objects"),
    ('{"format":"deepep-env/lock-meta/v2","envs":{"h200-nvlink":5}}', "'envs' must map environment names to objects"),
])
def test_header_that_is_not_a_header_object(header, says, tmp_path, capsys):
    _, body = _committed()
    path = _write(tmp_path / "pixi.lock", header, body)
    with pytest.raises(UserError) as err:
        read_lock(path)
    assert says in str(err.value) and err.value.file == str(path)
    _assert_refused(cli_in_process(capsys, "diff", REPO / "pixi.lock", path), path, says)


def test_a_lock_without_header_is_read(tmp_path, capsys):
    """pixi rewrites the lock without the comment: that is no refusal, only no provenance."""
    _, body = _committed()
    path = tmp_path / "pixi.lock"
    path.write_text(body, encoding="utf-8")
    data = read_lock(path)
    assert data.meta == {} and "h200-nvlink" in data.envs
    res = cli_in_process(capsys, "diff", REPO / "pixi.lock", path)
    assert res.returncode == 0, res.stderr


# --------------------------------------------------------------------------------------------- v1


V1_FIELDS = {
    "builds": {
        "deep-ep": {"build": "h19c907f3ca_0",
                    "id": "sha256:19c907f3ca03e68ddc7e926e42c56cba5040c444ce29bd90eaf6467506b084a9",
                    "version": "1.2.1"},
        "nvshmem": {"build": "hf1021977a4_0",
                    "id": "sha256:f1021977a4a175b42aa17d2b2c619f66f0ef9284aff61a74a3dfdb850d5bff82",
                    "version": "3.4.5"},
    },
    "channels": ["https://conda.deepep-env.example/h200/"],
    "machine_local": False,
    "spec_version": "2026.11.0",
}


def test_v1_header_as_older_deepep_env_wrote_it_is_read():
    head = V1_LOCK.read_text(encoding="utf-8").splitlines()[0]
    raw = json.loads(head[len(META_PREFIX):])
    assert raw["format"] == "deepep-env/lock-meta/v1" and raw["env"] == "h200-nvlink" and "envs" not in raw
    data = read_lock(V1_LOCK)
    # one environment, named by "env"; its fields without "format" and "env"
    assert data.meta == {"h200-nvlink": V1_FIELDS}
    assert data.meta_for("h200-nvlink") == V1_FIELDS and data.meta_for("other") == {}
    assert list(data.envs) == ["h200-nvlink"]


def test_v1_header_on_the_current_lock_body(tmp_path):
    """A v1 header in front of today's lock: the fields go to the environment it names, the others
    carry none."""
    meta, body = _committed()
    v1 = {**meta["envs"]["h200-nvlink-v2"], "env": "h200-nvlink-v2", "format": "deepep-env/lock-meta/v1"}
    data = read_lock(_write(tmp_path / "pixi.lock", v1, body))
    assert data.meta == {"h200-nvlink-v2": meta["envs"]["h200-nvlink-v2"]}
    assert set(data.envs) >= {"h200-nvlink", "h200-nvlink-conda", "h200-nvlink-v2"}


def test_v1_lock_is_checked_and_diffed_not_refused(capsys):
    """`lock --check` reads the v1 lock and says why it is stale (typed reasons, exit 1, the
    header's fields as `made_from`); `diff` against today's lock works."""
    res = cli_in_process(capsys, "lock", "h200-nvlink", "--check", "--project", REPO, "--output", V1_LOCK, "--json")
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr and "deepep-env-lock" not in res.stderr
    data = json.loads(res.stdout)
    assert data["status"] == "stale" and data["made_from"] == V1_FIELDS
    assert {r["kind"] for r in data["reasons"]} >= {"build-id-changed"}

    res = cli_in_process(capsys, "diff", V1_LOCK, REPO / "pixi.lock", "-e", "h200-nvlink", "--json")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert {b["package"]: (b["old"], b["new"]) for b in d["build_ids"]}["deep-ep"][0] == "19c907f3ca"
