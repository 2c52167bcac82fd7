"""Source cache: fetch by URL (real HTTP server on 127.0.0.1), git, or a local folder; verify by
content; stage and patch. No mocks: real archives, real git, real ``patch``."""
from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from build_fixtures import sandbox, tar_gz
from cli_runner import cli_subprocess
from deepep_env.base.errors import UserError
from deepep_env.base.hashing import file_sha256, tree_sha256
from deepep_env.sources import SourceCache, Want, fetch, import_dir, require_present, stage, unpack


@pytest.fixture()
def upstream(tmp_path):
    sb = sandbox(tmp_path)
    return sb


def _want(tree: Path, digest: str | None = "auto", **kw) -> Want:
    d = tree_sha256(tree) if digest == "auto" else digest
    return Want("libgreet", "source", "libgreet", d, **kw)


@pytest.fixture()
def http_root(tmp_path):
    """A real HTTP server on 127.0.0.1 serving tmp_path/www (404 for anything else)."""
    www = tmp_path / "www"
    www.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(www))
    handler.log_message = lambda *a, **k: None
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield www, f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_unpack_strips_single_top_dir_and_keeps_exec_bits(tmp_path, upstream):
    src = upstream.upstream / "libgreet-1.0"
    (src / "configure").write_text("#!/bin/sh\n")
    os.chmod(src / "configure", 0o755)
    expected = tree_sha256(src)
    gh = tar_gz(src, tmp_path / "gh.tar.gz", top="libgreet-abc123")  # GitHub style: one top dir
    flat = tmp_path / "flat.tar.xz"                                  # git archive style: no top dir
    with tarfile.open(flat, "w:xz") as tf:
        for p in sorted(src.iterdir()):
            tf.add(p, arcname=p.name)
    zp = tmp_path / "src.zip"
    with zipfile.ZipFile(zp, "w") as zf:
        for p in sorted(src.iterdir()):
            info = zipfile.ZipInfo(f"libgreet-1.0/{p.name}")
            info.external_attr = (p.stat().st_mode & 0xFFFF) << 16
            zf.writestr(info, p.read_bytes())
    for i, archive in enumerate((gh, flat, zp)):
        root = unpack(archive, tmp_path / f"u{i}")
        assert tree_sha256(root) == expected, archive.name


def test_download_verifies_and_mirror_falls_through(tmp_path, upstream, http_root):
    www, base = http_root
    src = upstream.upstream / "libgreet-1.0"
    tar_gz(src, www / "libgreet-1.0.tar.gz")
    cache = SourceCache(tmp_path / "cache")
    w = _want(src, urls=(f"{base}/missing.tar.gz", f"{base}/libgreet-1.0.tar.gz"))
    rep = fetch([w], cache)
    assert [i.status for i in rep.items] == ["fetched"]
    assert rep.items[0].origin.endswith("/libgreet-1.0.tar.gz")
    assert tree_sha256(cache.tree(w.digest)) == w.digest
    # second time: from the cache, no network needed
    assert [i.status for i in fetch([w], cache, offline=True).items] == ["cached"]


def test_hash_mismatch_names_package_expected_and_got_and_writes_nothing(tmp_path, upstream, http_root):
    www, base = http_root
    src = upstream.upstream / "libgreet-1.0"
    pinned = tree_sha256(src)
    (src / "greet.c").write_text("/* tampered */\n")
    tar_gz(src, www / "libgreet-1.0.tar.gz")
    cache = SourceCache(tmp_path / "cache")
    with pytest.raises(UserError) as err:
        fetch([Want("libgreet", "source", "libgreet", pinned, (f"{base}/libgreet-1.0.tar.gz",))], cache)
    msg = str(err.value)
    assert "libgreet" in msg and pinned in msg and tree_sha256(src) in msg and "\n" not in msg
    assert not cache.trees.exists() or not any(cache.trees.iterdir())


def test_patch_download_verified_by_sha256(tmp_path, upstream, http_root):
    www, base = http_root
    patch = upstream.upstream / "greet-loud.patch"
    shutil.copy(patch, www / "p.patch")
    cache = SourceCache(tmp_path / "cache")
    good = Want("libgreet", "patch", "greet-loud", file_sha256(patch), (f"{base}/p.patch",))
    assert fetch([good], cache).items[0].status == "fetched"
    assert cache.patch(good.digest).read_bytes() == patch.read_bytes()
    bad = Want("libgreet", "patch", "greet-loud", "sha256:" + "1" * 64, (f"{base}/p.patch",))
    with pytest.raises(UserError, match="patch greet-loud of package libgreet: content hash mismatch"):
        fetch([bad], SourceCache(tmp_path / "cache2"))


def test_git_checkout_at_revision_hashes_like_the_archive(tmp_path, upstream):
    src = upstream.upstream / "libgreet-1.0"
    repo = tmp_path / "repo"
    shutil.copytree(src, repo)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}
    for cmd in (["git", "init", "-q"], ["git", "add", "."], ["git", "commit", "-qm", "v1"]):
        subprocess.run(cmd, cwd=repo, env=env, check=True)
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    (repo / "greet.c").write_text("/* later commit */\n")
    subprocess.run(["git", "commit", "-qam", "v2"], cwd=repo, env=env, check=True)
    w = Want("libgreet", "source", "libgreet", tree_sha256(src), (), git=repo.as_uri(), rev=rev)
    cache = SourceCache(tmp_path / "cache")
    item = fetch([w], cache).items[0]
    assert item.status == "fetched" and item.origin.startswith("git+")
    assert not (cache.tree(w.digest) / ".git").exists()


def test_unpinned_source_is_recorded_not_invented_and_build_refuses_it(tmp_path, upstream, http_root):
    www, base = http_root
    src = upstream.upstream / "libgreet-1.0"
    tar_gz(src, www / "x.tar.gz")
    cache = SourceCache(tmp_path / "cache")
    w = Want("libgreet", "source", "libgreet", None, (f"{base}/x.tar.gz",))
    rep = fetch([w], cache)
    assert rep.recorded and rep.recorded[0].digest == tree_sha256(src)
    assert cache.tree(tree_sha256(src)) is not None  # cached under its hash, for review
    with pytest.raises(UserError, match="not pinned by content"):
        require_present([w], cache, offline=True)


def test_an_archive_pin_guards_the_first_fetch_of_an_unpinned_tree(tmp_path, upstream, http_root):
    """archive_sha256 (a publisher's or Spack's hash of the tarball): the tree hash is recorded only
    from that archive; another archive at the URL is refused in one line, nothing cached."""
    www, base = http_root
    src = upstream.upstream / "libgreet-1.0"
    good = tar_gz(src, www / "good.tar.gz")
    (src / "greet.c").write_text((src / "greet.c").read_text() + "/* changed upstream */\n")
    tar_gz(src, www / "other.tar.gz")
    want = functools.partial(Want, "libgreet", "source", "libgreet", None, archive=file_sha256(good))
    cache = SourceCache(tmp_path / "cache")
    with pytest.raises(UserError) as err:
        fetch([want((f"{base}/other.tar.gz",))], cache)
    msg = str(err.value)
    assert "other.tar.gz has sha256" in msg and file_sha256(good) in msg and "nothing was written" in msg
    assert cache.tree(tree_sha256(src)) is None                       # the other archive's tree: not cached
    rep = fetch([want((f"{base}/good.tar.gz",))], cache)
    assert rep.recorded and rep.recorded[0].digest == tree_sha256(_unpacked(good, tmp_path / "u"))


def test_an_archive_pin_takes_no_git_checkout_for_an_unpinned_tree(tmp_path, upstream, http_root):
    """A checkout has no archive to compare: with only an archive pin, git is not a fallback."""
    _, base = http_root
    w = Want("libgreet", "source", "libgreet", None, (f"{base}/missing.tar.gz",), git=str(tmp_path / "no-repo"),
             rev="0" * 40, archive="sha256:" + "1" * 64)
    with pytest.raises(UserError) as err:
        fetch([w], SourceCache(tmp_path / "cache"))
    assert "missing.tar.gz" in str(err.value) and "git " not in str(err.value)


def test_from_dir_finds_an_archive_pinned_source_by_its_sha256_and_refuses_a_named_impostor(tmp_path, upstream):
    src = upstream.upstream / "libgreet-1.0"
    d = tmp_path / "carry"
    d.mkdir()
    good = tar_gz(src, d / "any-name-at-all.txz")
    w = Want("nvshmem", "source", "nvshmem", None, ("https://example.invalid/nvshmem_src_3.2.5-1.txz",),
             archive=file_sha256(good))
    got, _ = import_dir(d, [w], SourceCache(tmp_path / "cache"))
    assert got[0].status == "recorded" and got[0].digest == tree_sha256(_unpacked(good, tmp_path / "u"))
    bad = tmp_path / "bad"
    bad.mkdir()
    (src / "greet.c").write_text("int tampered;\n")
    tar_gz(src, bad / "nvshmem_src_3.2.5-1.txz")          # the URL's file name, other bytes
    with pytest.raises(UserError, match="nvshmem_src_3.2.5-1.txz has sha256 .* which is not the archive"):
        import_dir(bad, [w], SourceCache(tmp_path / "cache2"))


def test_a_pinned_tree_is_checked_as_a_tree_whatever_its_archive(tmp_path, upstream, http_root):
    """With tree_sha256 set, the tree is the identity: a recompressed copy of the same tree is fine."""
    www, base = http_root
    src = upstream.upstream / "libgreet-1.0"
    tar_gz(src, www / "x.tar.gz")
    w = _want(src, urls=(f"{base}/x.tar.gz",), archive="sha256:" + "2" * 64)
    assert fetch([w], SourceCache(tmp_path / "cache")).items[0].status == "fetched"


def test_require_present_names_the_archive_for_an_offline_user(tmp_path):
    w = Want("nvshmem", "source", "nvshmem", None, archive="sha256:" + "3" * 64)
    with pytest.raises(UserError) as err:
        require_present([w], SourceCache(tmp_path / "cache"), offline=True, env="gke-a4")
    assert "fetch gke-a4 --from DIR` with the archive whose sha256 is sha256:333" in str(err.value)


def _unpacked(archive: Path, dest: Path) -> Path:
    return unpack(archive, dest)


def test_offline_missing_source_is_one_clear_line(tmp_path, upstream):
    cache = SourceCache(tmp_path / "cache")
    w = _want(upstream.upstream / "libgreet-1.0", urls=("https://example.invalid/x.tar.gz",))
    rep = fetch([w], cache, offline=True)
    assert rep.missing
    with pytest.raises(UserError) as err:
        require_present([w], cache, offline=True, env="h200-nvlink")
    assert "libgreet" in str(err.value) and "--offline" in str(err.value) and "fetch h200-nvlink --from" in str(err.value)


def test_fetch_from_dir_matches_by_content_not_name(tmp_path, upstream):
    src = upstream.upstream / "libgreet-1.0"
    d = tmp_path / "carry"
    d.mkdir()
    tar_gz(src, d / "whatever-name.tar.gz", top="odd-top")
    shutil.copy(upstream.upstream / "greet-loud.patch", d / "renamed.diff")
    (d / "unrelated.txt").write_text("nothing to see\n")
    wants = [_want(src), Want("libgreet", "patch", "greet-loud", file_sha256(upstream.upstream / "greet-loud.patch"))]
    cache = SourceCache(tmp_path / "cache")
    rep = fetch(wants, cache, offline=True, from_dir=d)
    assert [i.status for i in rep.items] == ["imported", "imported"]
    assert rep.ignored == ["unrelated.txt"]
    # an unpacked tree works too, and a second cache path holds the same content-addressed entry
    rep2 = fetch(wants[:1], tmp_path / "other-cache", offline=True, from_dir=upstream.upstream)
    assert rep2.items[0].status == "imported"


def test_from_dir_records_unpinned_source_by_revision_in_file_name(tmp_path, upstream):
    src = upstream.upstream / "libgreet-1.0"
    d = tmp_path / "carry"
    d.mkdir()
    rev = "131da55f643ac87c810ba0bc51d359258bf433a1"
    tar_gz(src, d / f"nvshmem-{rev}.tar.gz")
    w = Want("nvshmem", "source", "nvshmem", None, (), rev=rev)
    got, ignored = import_dir(d, [w], SourceCache(tmp_path / "cache"))
    assert got[0].status == "recorded" and got[0].digest == tree_sha256(src)


def test_stage_applies_patches_in_order_and_refuses_bad_ones(tmp_path, upstream):
    sb = upstream
    rep = sb.fill_cache()
    assert {i.status for i in rep.items} == {"imported"}
    cache = SourceCache(sb.cache)
    tree = tree_sha256(sb.upstream / "libgreet-1.0")
    patch = file_sha256(sb.upstream / "greet-loud.patch")
    out = stage("libgreet", {"libgreet": tree}, [("greet-loud", patch, 1)], cache, tmp_path / "w")
    assert "HELLO from patched libgreet" in (out["libgreet"] / "greet.c").read_text()
    assert tree_sha256(cache.tree(tree)) == tree  # the cache entry itself is untouched
    # applying the same patch twice: --forward refuses instead of reversing it
    with pytest.raises(UserError, match="package libgreet: patch again does not apply"):
        cache.add_patch((sb.upstream / "greet-loud.patch").read_bytes(), patch)
        stage("libgreet", {"libgreet": tree}, [("greet-loud", patch, 1), ("again", patch, 1)], cache, tmp_path / "w")


def test_stage_detects_a_modified_cache_entry(tmp_path, upstream):
    sb = upstream
    sb.fill_cache()
    cache = SourceCache(sb.cache)
    tree = tree_sha256(sb.upstream / "libgreet-1.0")
    (cache.tree(tree) / "greet.c").write_text("corrupt\n")
    with pytest.raises(UserError, match="corrupt"):
        stage("libgreet", {"libgreet": tree}, [], cache, tmp_path / "w")


def test_fetch_cli_from_dir_and_json(tmp_path, upstream):
    sb = upstream
    code, out, err = cli_subprocess("fetch", "--recipes", str(sb.graph), "--source-cache", str(tmp_path / "c"),
                                    "--from", str(sb.upstream), "--offline", "--json")
    assert code == 0, err
    import json

    data = json.loads(out)
    assert data["format"] == "deepep-env/fetch-report/v1"
    assert sorted(i["status"] for i in data["items"]) == ["imported", "imported"]
    code, out, err = cli_subprocess("fetch", "--recipes", str(sb.graph), "--source-cache", str(tmp_path / "empty"), "--offline")
    assert code == 2 and err.count("\n") == 1 and "libgreet" in err and "Traceback" not in err


# -- issue 39.6: a download is bounded in all, and a killed fetch leaves nothing behind ---------------------------


@pytest.fixture()
def endless(tmp_path):
    """A real HTTP server on 127.0.0.1 that never stops sending (``/fast``: as fast as it can, no length;
    ``/slow``: a byte a second; ``/declared``: a Content-Length of 10 GB)."""
    class Endless(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a, **k):
            pass

        def do_GET(self):
            self.send_response(200)
            if self.path == "/declared":
                self.send_header("Content-Length", str(10 ** 10))
            self.end_headers()
            if self.path == "/silent":            # headers, then nothing (issue 52.11)
                self.wfile.flush()
                threading.Event().wait(30.0)
                return
            chunk = b"\0" * (1 << 16)
            try:
                while True:
                    if self.path == "/slow":
                        self.wfile.write(b"\0")
                        self.wfile.flush()
                        threading.Event().wait(1.0)
                    else:
                        self.wfile.write(chunk)
            except OSError:
                return

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def _tmp_entries(cache: SourceCache) -> list[str]:
    base = cache.root / ".tmp"
    return sorted(p.name for p in base.iterdir()) if base.is_dir() else []


@pytest.mark.parametrize("path, env, needle", [
    ("/fast", {"DEEPEP_ENV_FETCH_MAX_BYTES": str(8 << 20)}, "more than DEEPEP_ENV_FETCH_MAX_BYTES (8388608 bytes); stopped"),
    ("/declared", {}, "10000000000 bytes declared, over DEEPEP_ENV_FETCH_MAX_BYTES"),
    ("/slow", {"DEEPEP_ENV_FETCH_DEADLINE": "2"}, "still downloading after 2 s (DEEPEP_ENV_FETCH_DEADLINE)"),
    ("/silent", {"DEEPEP_ENV_FETCH_DEADLINE": "2"}, "still downloading after 2 s (DEEPEP_ENV_FETCH_DEADLINE); stopped at 0"),
    ("/silent", {"DEEPEP_ENV_FETCH_DEADLINE": "3"}, "still downloading after 3 s (DEEPEP_ENV_FETCH_DEADLINE); stopped at 0"),
])
def test_an_endless_download_is_stopped_by_its_bound(tmp_path, endless, monkeypatch, path, env, needle):
    import time

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    cache = SourceCache(tmp_path / "cache")
    started = time.monotonic()
    with pytest.raises(UserError) as err:
        fetch([Want("libgreet", "source", "libgreet", "sha256:" + "1" * 64, (f"{endless}{path}",))], cache)
    assert needle in str(err.value) and "\n" not in str(err.value)
    assert _tmp_entries(cache) == []
    if "DEEPEP_ENV_FETCH_DEADLINE" in env:         # the deadline holds, silence included
        assert time.monotonic() - started < int(env["DEEPEP_ENV_FETCH_DEADLINE"]) + 5


def test_the_catalogued_size_caps_a_download(tmp_path, endless):
    cache = SourceCache(tmp_path / "cache")
    w = Want("nvshmem", "source", "nvshmem", "sha256:" + "1" * 64, (f"{endless}/fast",), file="x.whl", size=1000)
    with pytest.raises(UserError, match=r"more than the catalogued size \(1000 bytes\); stopped"):
        fetch([w], cache)


@pytest.mark.parametrize("env", ["DEEPEP_ENV_FETCH_MAX_BYTES", "DEEPEP_ENV_FETCH_DEADLINE"])
@pytest.mark.parametrize("value", ["0", "-1", "1e9", "lots", "\u00b2", "\uff11", "\u0661", "9" * 400, "99999999999999"])
def test_a_bound_that_is_not_a_number_is_one_line(tmp_path, endless, monkeypatch, env, value):
    monkeypatch.setenv(env, value)
    with pytest.raises(UserError) as err:
        fetch([Want("p", "source", "p", "sha256:" + "1" * 64, (f"{endless}/fast",))], SourceCache(tmp_path / "c"))
    assert f"{env}=" in str(err.value) and "is not a positive whole number of at most" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_terminated_fetch_removes_its_partial_download(tmp_path, endless):
    """SIGTERM mid-download left `.tmp/dl-…/download` (GBs) in the cache, never swept."""
    import signal
    import sys
    import time

    cache = SourceCache(tmp_path / "cache")
    code = ("import sys; from pathlib import Path; from deepep_env.sources import SourceCache, Want, fetch\n"
            f"fetch([Want('p', 'source', 'p', 'sha256:' + '1' * 64, ({endless + '/slow'!r},))], SourceCache(Path({str(cache.root)!r})))\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(200):
            if any((cache.root / ".tmp").glob("dl-*/download")):
                break
            time.sleep(0.05)
        assert any((cache.root / ".tmp").glob("dl-*/download")), "the download never started"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        proc.kill()
    assert _tmp_entries(cache) == []


def test_scratch_of_a_fetch_that_is_gone_is_swept_and_a_running_ones_kept(tmp_path, upstream, http_root):
    www, base = http_root
    src = upstream.upstream / "libgreet-1.0"
    tar_gz(src, www / "libgreet-1.0.tar.gz")
    cache = SourceCache(tmp_path / "cache")
    gone = subprocess.Popen(["true"])
    gone.wait()
    tmp = cache.root / ".tmp"
    for name in (f"dl-{gone.pid}-abc", "tmp-oldstyle", f"dl-{os.getppid()}-live"):
        (tmp / name).mkdir(parents=True)
        (tmp / name / "download").write_bytes(b"partial")
    old = tmp / "tmp-oldstyle"
    os.utime(old, (0, 0))
    fetch([_want(src, urls=(f"{base}/libgreet-1.0.tar.gz",))], cache)
    assert _tmp_entries(cache) == [f"dl-{os.getppid()}-live"]     # its process runs: kept
