"""Issue 15: every bad input gets one clear line — the general guards, one test per finding fixed."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from cli_runner import cli_subprocess
from platform_fixtures import REPO, no_traceback


def _gid_files(root):
    return sorted(p for p in root.rglob("gids/*") if p.is_file())


@pytest.mark.parametrize("command", [["detect"], ["overlay", "gcp-b200"], ["activate", "gcp-b200"],
                                     ["doctor", "gcp-b200"]])
def test_a_fifo_in_a_captured_host_tree_never_hangs_a_probe(command, host_tree, tmp_path):
    """A FIFO anywhere in a host tree (…/gids/3) hung detect, overlay, activate and doctor."""
    root = tmp_path / "host"
    shutil.copytree(host_tree("gcp-b200"), root, symlinks=True)
    gid = _gid_files(root)[3]
    gid.unlink()
    os.mkfifo(gid)
    try:
        res = cli_subprocess(*command, "--root", str(root), env={**os.environ, "DEEPEP_ENV_PROJECT": str(REPO)})
    except subprocess.TimeoutExpired:  # pragma: no cover - the bug itself
        pytest.fail("the probe blocked on a FIFO")
    no_traceback(res)


def test_make_hosts_help_prints_usage_and_creates_nothing(tmp_path):
    script = REPO / "tests" / "fixtures" / "hosts" / "make_hosts.py"
    for arg, code in (("--help", 0), ("-h", 0), ("--bogus", 2)):
        res = subprocess.run([sys.executable, str(script), arg], cwd=tmp_path, capture_output=True, text=True,
                             timeout=60)
        assert res.returncode == code, res.stderr
        assert not (tmp_path / arg).exists()


def test_a_forged_hca_name_never_reaches_the_mapping(host_tree, tmp_path):
    """An HCA directory named `mlx5_9:1,0:mlx5_7` forged extra entries into DEEP_EP_DEVICE_TO_HCA_MAPPING."""
    root = tmp_path / "host"
    shutil.copytree(host_tree("gcp-b200"), root, symlinks=True)
    ib = root / "sys" / "class" / "infiniband"
    os.rename(ib / "mlx5_1", ib / "mlx5_9:1,0:mlx5_7")
    res = cli_subprocess("overlay", "gcp-b200", "--root", str(root), "--shell", "json",
                         env={**os.environ, "DEEPEP_ENV_PROJECT": str(REPO)})
    no_traceback(res)
    assert "mlx5_9" not in res.stdout
    res = cli_subprocess("detect", "--root", str(root), env={**os.environ, "DEEPEP_ENV_PROJECT": str(REPO)})
    assert "not a valid RDMA device name" in res.stdout + res.stderr


def test_a_spec_version_with_an_empty_segment_is_refused(tmp_path):
    from deepep_env.base.errors import UserError
    from deepep_env.base.project import Project
    from deepep_env.envspec import load_resolved

    proj = tmp_path / "proj"
    shutil.copytree(REPO / "env_specs", proj / "env_specs")
    shutil.copytree(REPO / "recipes", proj / "recipes")
    for bad in ("2026..0", "2026.11.", "2026.11.0."):
        spec = proj / "env_specs" / "h200-nvlink.toml"
        text = (REPO / "env_specs" / "h200-nvlink.toml").read_text()
        spec.write_text(text.replace('version = "2026.11.0"', f'version = "{bad}"'))
        with pytest.raises(UserError) as err:
            load_resolved("h200-nvlink", Project(proj))
        assert "version" in str(err.value) and "\n" not in str(err.value)


def test_a_catalog_naming_another_package_is_refused(tmp_path):
    from deepep_env.base.errors import UserError
    from deepep_env.envspec.catalog import load_catalog

    shutil.copytree(REPO / "recipes" / "nvshmem", tmp_path / "nvshmem")
    cat = tmp_path / "nvshmem" / "sources.toml"
    cat.write_text(cat.read_text().replace('package = "nvshmem"', 'package = "nvshmem2"'))
    with pytest.raises(UserError) as err:
        load_catalog(tmp_path, "nvshmem")
    assert "package = 'nvshmem2'" in str(err.value) and "recipes/nvshmem/" in str(err.value)


def test_a_malformed_archive_pin_is_one_clear_line(tmp_path):
    from deepep_env.base.errors import UserError
    from deepep_env.envspec.catalog import load_catalog

    shutil.copytree(REPO / "recipes" / "nvshmem", tmp_path / "nvshmem")
    cat = tmp_path / "nvshmem" / "sources.toml"
    assert 'archive_sha256 = "sha256:eb2c8fb3' in cat.read_text()
    cat.write_text(cat.read_text().replace('archive_sha256 = "sha256:eb2c8fb3', 'archive_sha256 = "md5:eb2c8fb3'))
    with pytest.raises(UserError) as err:
        load_catalog(tmp_path, "nvshmem")
    msg = str(err.value)
    assert "archive_sha256" in msg and "64 lowercase hex" in msg and "\n" not in msg, msg


def test_a_failing_build_script_is_not_reported_with_a_success_line():
    """`build failed: ✔ Successfully updated the host environment (exit 3)` named rattler-build's own
    progress line as the cause."""
    from deepep_env.builder.driver import _failure_hint

    log = ["╭─ Running build script", "✔ Successfully updated the host environment", "+ exit 3",
           "Script failed with status 3"]
    hint = _failure_hint(log)
    assert "Successfully" not in hint and hint.endswith("(exit 3)")
    log = ["✔ Successfully updated the host environment", "make: *** [all] Error 2", "Script failed with status 2"]
    assert _failure_hint(log).startswith("make: *** [all] Error 2")


def test_garbage_driver_params_are_reported_unknown_not_none(host_tree, tmp_path):
    root = tmp_path / "host"
    shutil.copytree(host_tree("gcp-b200"), root, symlinks=True)
    params = root / "proc" / "driver" / "nvidia" / "params"
    params.write_text("EnableStreamMemOPs: \\x00\\xffgarbage\nRegistryDwords: ;;==;\n")
    res = cli_subprocess("detect", "--root", str(root), env={**os.environ, "DEEPEP_ENV_PROJECT": str(REPO)})
    no_traceback(res)
    out = res.stdout + res.stderr
    assert "=None" not in out and "EnableStreamMemOPs=unknown" in out
    assert "EnableStreamMemOPs is missing or not a number" in out


def _fetch_from(tmp_path, make):
    """`deepep-env fetch --recipes` of the builder's fixture graph, --from a folder holding one bad file."""
    fx = tmp_path / "fx"
    shutil.copytree(REPO / "tests" / "fixtures" / "recipes", fx)
    src = tmp_path / "from"
    src.mkdir()
    make(src, fx)
    return cli_subprocess("fetch", "--recipes", str(fx / "graph"), "--source-cache", str(tmp_path / "cache"), "--offline",
                          "--from", str(src), cwd=tmp_path)


def test_fetch_from_a_truncated_tarball_says_so_in_one_line(tmp_path):
    import tarfile

    def make(src, fx):
        tar = src / "libgreet-1.0.tar.gz"
        with tarfile.open(tar, "w:gz") as tf:
            tf.add(fx / "upstream" / "libgreet-1.0", arcname="libgreet-1.0")
        tar.write_bytes(tar.read_bytes()[: tar.stat().st_size // 2])
    res = _fetch_from(tmp_path, make)
    no_traceback(res)
    assert res.returncode == 2 and "cannot unpack libgreet-1.0.tar.gz" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_fetch_from_a_tarball_escaping_its_folder_is_refused_in_one_line(tmp_path):
    import io
    import tarfile

    def make(src, fx):
        with tarfile.open(src / "evil.tar.gz", "w:gz") as tf:
            data = b"owned\n"
            info = tarfile.TarInfo("../escaped.txt")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    res = _fetch_from(tmp_path, make)
    no_traceback(res)
    assert res.returncode == 2 and "refused to unpack evil.tar.gz" in res.stderr
    assert not (tmp_path / "escaped.txt").exists()


def test_fetch_offline_of_an_unpinned_source_names_what_to_do(tmp_path):
    res = cli_subprocess("fetch", "gcp-b200-seed", "--offline", "--source-cache", str(tmp_path / "c"),
                         env={**os.environ, "DEEPEP_ENV_PROJECT": str(REPO)})
    no_traceback(res)
    assert res.returncode == 2 and "(None)" not in res.stderr and "not pinned by content yet" in res.stderr


@pytest.mark.parametrize("args,needle", [
    (["activate", "gcp-b200", "--shell", "tcsh"], "'tcsh'"),
    (["build", "--ofline"], "--ofline"),
    (["nosuchcommand"], "nosuchcommand"),
])
def test_usage_errors_are_one_line_naming_what_is_accepted(args, needle):
    res = cli_subprocess(*args, env={**os.environ, "DEEPEP_ENV_PROJECT": str(REPO)})
    no_traceback(res)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and needle in lines[0] and "--help" in lines[0], res.stderr


def test_a_spec_that_is_a_symlink_loop_is_named_as_such(tmp_path):
    from deepep_env.base.errors import UserError
    from deepep_env.base.project import Project
    from deepep_env.envspec import load_resolved

    proj = tmp_path / "proj"
    shutil.copytree(REPO / "recipes", proj / "recipes")
    (proj / "env_specs").mkdir()
    (proj / "env_specs" / "h200-nvlink.toml").symlink_to("h200-nvlink.toml")
    with pytest.raises(UserError) as err:
        load_resolved("h200-nvlink", Project(proj))
    assert "symbolic link that resolves to nothing" in str(err.value) and "unknown env" not in str(err.value)


def test_fetch_from_a_tarball_with_the_wrong_content_names_the_file_and_both_hashes(tmp_path):
    import tarfile

    def make(src, fx):
        tree = tmp_path / "tampered" / "libgreet-1.0"
        shutil.copytree(fx / "upstream" / "libgreet-1.0", tree)
        (tree / "greet.c").write_text((tree / "greet.c").read_text() + "\n/* not upstream */\n")
        with tarfile.open(src / "libgreet-1.0.tar.gz", "w:gz") as tf:
            tf.add(tree, arcname="libgreet-1.0")
    res = _fetch_from(tmp_path, make)
    no_traceback(res)
    assert res.returncode == 2 and "libgreet-1.0.tar.gz" in res.stderr
    assert res.stderr.count("sha256:") >= 2 and "mismatch" in res.stderr


# -- issue 39: hostile input, third round ---------------------------------------------------------------------------


def _fake_env(tmp_path, **extra):
    env = {**os.environ, "DEEPEP_ENV_STATE": str(tmp_path / "state"), "DEEPEP_ENV_CACHE_DIR": str(tmp_path / "cache"),
           **extra}
    env.pop("DEEPEP_ENV_MIRRORS", None)
    return env


def test_a_mkdir_planted_beside_the_pinned_patchelf_never_runs_in_a_build(tmp_path):
    """39.1: `<root>/.tools/patchelf-<hex>/` was first on PATH and reused on its patchelf's sha256 alone."""
    from build_fixtures import fake_project
    from deepep_env.base.hashing import file_sha256
    from deepep_env.builder import tools

    fp = fake_project(tmp_path)
    exe = tools.pinned_patchelf()
    planted = tmp_path / "root" / ".tools" / f"patchelf-{file_sha256(exe)[7:19]}"
    planted.mkdir(parents=True)
    shutil.copy(exe, planted / "patchelf")
    (planted / "mkdir").write_text(f'#!/bin/sh\ntouch {tmp_path}/PLANTED\nexec /bin/mkdir "$@"\n')
    (planted / "mkdir").chmod(0o755)
    env = _fake_env(tmp_path, DEEPEP_ENV_BUILD_ROOT=str(tmp_path / "root"))
    cli_subprocess("fetch", "h200-nvlink", "--from", fp.upstream, "--offline", "--project", fp.root, env=env, check=True)
    res = cli_subprocess("build", "h200-nvlink", "--offline", "--project", fp.root, env=env, timeout=300)
    no_traceback(res)
    assert res.returncode == 0, res.stderr
    assert not (tmp_path / "PLANTED").exists()
    assert sorted(p.name for p in planted.iterdir()) == ["patchelf"]


@pytest.mark.parametrize("flag", ["--partition", "--account", "--time"])
def test_a_newline_in_a_slurm_option_is_refused_and_nothing_is_written(flag, tmp_path):
    """39.2: `--partition $'p\\ntouch PW'` exited 0 with `touch PW` on a line of the job script."""
    out = tmp_path / "job.sbatch"
    res = cli_subprocess("launch", "h200-nvlink", "internode", "--nodes", "2", "--target", "slurm", flag, "p\ntouch PW",
                         "-o", out, env={**os.environ, "DEEPEP_ENV_PROJECT": str(REPO)})
    no_traceback(res)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and flag in lines[0] and "'p\\ntouch PW'" in lines[0], res.stderr
    assert not out.exists()


def test_fetch_from_an_endless_server_stops_at_its_cap_in_one_line(tmp_path):
    """39.6: a catalogued URL served by an endless server gave 2,450 MiB in 20 s and went on."""
    import http.server
    import threading

    from build_fixtures import fake_project

    class Endless(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a, **k):
            pass

        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            try:
                while True:
                    self.wfile.write(b"\0" * (1 << 16))
            except OSError:
                return

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        fp = fake_project(tmp_path)
        cat = fp.root / "recipes" / "nvshmem" / "sources.toml"
        cat.write_text(cat.read_text()
                       .replace("https://github.com/NVIDIA/nvshmem/archive/refs/tags/v3.4.5-0.tar.gz",
                                f"http://127.0.0.1:{srv.server_address[1]}/v3.4.5-0.tar.gz")
                       .replace("https://github.com/NVIDIA/nvshmem.git", "http://127.0.0.1:1/nvshmem.git"))
        next(fp.upstream.glob("nvshmem-*.tar.gz")).unlink()
        res = cli_subprocess("fetch", "h200-nvlink", "--from", fp.upstream, "--project", fp.root, timeout=120,
                             env=_fake_env(tmp_path, DEEPEP_ENV_FETCH_MAX_BYTES=str(16 << 20)))
    finally:
        srv.shutdown()
        srv.server_close()
    no_traceback(res)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert "more than DEEPEP_ENV_FETCH_MAX_BYTES (16777216 bytes); stopped" in lines[0]
    assert not any((tmp_path / "state" / "sources" / ".tmp").glob("*"))


def _fleet_dir(host_tree, tmp_path):
    folder = tmp_path / "fleet"
    folder.mkdir()
    res = cli_subprocess("doctor", "--root", host_tree("gcp-b200"), "--json",
                         env={**os.environ, "DEEPEP_ENV_PROJECT": str(REPO)})
    (folder / "node-0.json").write_text(res.stdout)
    return folder


@pytest.mark.parametrize("target", ["dir", "proc", "empty", "under-a-file", "fifo"])
@pytest.mark.parametrize("command", ["detect --svg", "fleet report --html", "export -o", "launch -o", "lock -o"])
def test_a_user_named_output_that_cannot_be_a_file_is_one_line(command, target, tmp_path, host_tree):
    """39.7: a directory or a path under /proc gave the atomic writer's traceback; `--svg ''` wrote nothing, exit 0."""
    (tmp_path / "a-file").write_text("x")
    os.mkfifo(tmp_path / "a-fifo")
    out = {"dir": str(tmp_path), "proc": "/proc/deepep-env-x", "empty": "", "under-a-file": str(tmp_path / "a-file" / "x"),
           "fifo": str(tmp_path / "a-fifo")}[target]
    if command == "launch -o" and target == "dir":
        pytest.skip("launch -o DIR writes DIR/<job>.sbatch, by design")
    args = {"detect --svg": lambda: ["detect", "--root", host_tree("gcp-b200"), "--svg", out],
            "fleet report --html": lambda: ["fleet", "report", _fleet_dir(host_tree, tmp_path), "--html", out],
            "export -o": lambda: ["export", "h200-nvlink", "-o", out],
            "launch -o": lambda: ["launch", "h200-nvlink", "internode", "-n", "2", "-o", out],
            "lock -o": lambda: ["lock", "h200-nvlink", "-o", out]}[command]()
    before = sorted(p.name for p in tmp_path.iterdir())
    res = cli_subprocess(*args, env={**os.environ, "DEEPEP_ENV_PROJECT": str(REPO)}, timeout=120)
    no_traceback(res)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    flag = command.split()[-1]
    assert lines[0].startswith(f"deepep-env: error: {flag.replace('-o', '--output')}: "), lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("flag", ["--store", "--channel", "--source-cache"])
def test_a_build_folder_that_cannot_be_one_is_one_line(flag, tmp_path):
    (tmp_path / "a-file").write_text("x")
    for bad in ("/proc/deepep-env-x", str(tmp_path / "a-file")):
        res = cli_subprocess("build", "h200-nvlink", "--offline", flag, bad,
                             env={**os.environ, "DEEPEP_ENV_PROJECT": str(REPO), "DEEPEP_ENV_STATE": str(tmp_path / "s")})
        no_traceback(res)
        assert res.returncode == 2 and res.stderr.startswith(f"deepep-env: error: {flag}: "), res.stderr


def test_output_file_and_dir_say_what_the_path_is():
    from deepep_env.base.atomic import output_dir, output_file
    from deepep_env.base.errors import UserError

    for fn, raw, needle in ((output_file, "/dev/null", "is a character device, not a file"),
                            (output_file, "/tmp", "is a directory, not a file"),
                            (output_dir, "/etc/hostname", "is a file, not a folder"),
                            (output_dir, "/proc/1/x", "/proc/1 takes no new file")):
        with pytest.raises(UserError, match=needle):
            fn(raw, field="--x")


def test_the_activation_hook_says_an_unnamed_hca_and_maps_no_gpu_to_another_gpus_nic(host_tree, tmp_path):
    """39.11: the hook dropped `mlx5_9:1,0:mlx5_7` without a word and gave GPU1 GPU0's NIC (mlx5_0)."""
    root = tmp_path / "host"
    shutil.copytree(host_tree("gcp-b200"), root, symlinks=True)
    ib = root / "sys" / "class" / "infiniband"
    os.rename(ib / "mlx5_1", ib / "mlx5_9:1,0:mlx5_7")
    (tmp_path / "pfx" / "conda-meta").mkdir(parents=True)
    res = cli_subprocess("hook", "--shell", "bash", "--prefix", tmp_path / "pfx",
                         env={**os.environ, "DEEPEP_ENV_PROJECT": str(REPO), "DEEPEP_ENV_HOST_ROOT": str(root)})
    no_traceback(res)
    assert res.returncode == 0
    warning = next(ln for ln in res.stderr.splitlines() if ln.startswith("deepep-env: warning: DEEP_EP_DEVICE_TO_HCA"))
    assert "GPU0, GPU1 are nearest to RDMA device 'mlx5_9:1,0:mlx5_7'" in warning
    exports = [ln for ln in res.stdout.splitlines() if ln.startswith("export ")]
    assert exports and not any("DEVICE_TO_HCA" in ln or "NIC_PE_MAPPING" in ln for ln in exports)
    healthy = cli_subprocess("hook", "--shell", "bash", "--prefix", tmp_path / "pfx",
                             env={**os.environ, "DEEPEP_ENV_PROJECT": str(REPO), "DEEPEP_ENV_HOST_ROOT": str(host_tree("gcp-b200"))})
    assert healthy.stderr == "" and "export DEEP_EP_DEVICE_TO_HCA_MAPPING='0:mlx5_0:1,1:mlx5_1:1," in healthy.stdout
