"""Issue 51.5: a real conda client installs the lock. The closest this machine gets to `pixi install
&& pixi run` (pixi itself is not installable here): py-rattler — the library pixi is built on —
reads pixi.lock with its own LockFile reader and installs one environment's records into an empty
prefix, straight from a channel `deepep-env publish` made; then deepep-env's doctor, activate and
task work on that prefix. deepep-env's own lock reader and installer take no part in the install.

The small stand-in env is tests/lock_fixtures.py's lt-host (NVSHMEM + DeepEP stand-ins, the real
deepep-env package), its spec's publish_url pointed at a file channel."""
from __future__ import annotations

import asyncio
import json
import shutil

from cli_runner import cli_in_process


def test_rattler_installs_the_lock_from_a_published_channel(lt_world, tmp_path, monkeypatch, capsys):
    import rattler

    import lock_fixtures as lf

    monkeypatch.setenv("DEEPEP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    proj = lf.project_copy(lt_world, tmp_path / "proj")
    pub = tmp_path / "published"
    lf.set_spec_value(proj, "lt-host", 'publish_url = "https://conda.deepep-env.invalid/lt-host"',
                      f'publish_url = "{pub.as_uri()}"')
    p = ["--project", str(proj.root)]
    files = sorted(str(f) for f in proj.channel.glob("*/*.conda"))
    rc, out, err = cli_in_process(capsys, "publish", "--to", pub.as_uri(), *[a for f in files for a in ("--package", f)], *p)
    assert rc == 0, err
    rc, _, err = cli_in_process(capsys, "lock", "lt-host", *p)   # the lock names the published channel
    assert rc == 0, err
    shutil.rmtree(proj.channel)                                     # only the published channel serves them

    lock = rattler.LockFile.from_path(proj.pixi_lock)               # rattler's reader, not deepep-env's
    env = lock.environment("lt-host")
    assert env is not None
    (platform,) = env.platforms()
    records = env.conda_repodata_records_for_platform(platform)
    assert records and all(r.url.startswith(pub.as_uri()) for r in records), [r.url for r in records]
    assert {"deep-ep", "deepep-nvshmem", "deepep-env"} <= {r.name.normalized for r in records}
    prefix = tmp_path / "empty-prefix"
    asyncio.run(rattler.install(records, prefix, cache_dir=tmp_path / "rattler-cache", show_progress=False))
    assert (prefix / "share" / "deep-ep" / "tests" / "test_intranode.py").is_file()
    assert not (prefix / "conda-meta" / "deepep-env").exists()      # nothing of deepep-env's installer

    monkeypatch.setenv("DEEPEP_ENV_PREFIX", str(prefix))
    monkeypatch.setenv("DEEPEP_ENV_PROJECT", str(proj.root))   # the spec stands in for deepep-env's marker
    rc, out, err = cli_in_process(capsys, "doctor", "lt-host", *p, "--prefix", str(prefix), "--platform", "nvlink",
                                  "--json")
    errors = {f["id"] for f in json.loads(out)["findings"] if f["severity"] == "error"}
    assert errors <= {"deepep.not-installed"}, out   # the stand-in deep-ep ships DeepEP's tests, no module
    rc, out, err = cli_in_process(capsys, "activate", "lt-host", "--prefix", str(prefix), "--shell", "json")
    assert rc == 0 and str(prefix) in out, err
    assert cli_in_process(capsys, "pixi", "sync", *p)[0] == 0       # pixi.toml: the tasks `pixi run` would run
    rc, out, err = cli_in_process(capsys, "task", "deepep-test-intranode", "-e", "lt-host", "--dry-run", *p)
    assert rc == 0 and "test_intranode.py" in out, out + err
    # and the task itself, from that prefix (the stand-in script passes; its output goes to the terminal)
    rc, out, err = cli_in_process(capsys, "task", "deepep-test-intranode", "-e", "lt-host", "--no-record", *p)
    assert rc == 0, err
