"""``deepep-env fetch ENV --from`` + ``deepep-env build ENV`` on a throwaway project: the real
h200-nvlink spec and catalogs, with stand-in nvshmem/deep-ep recipes that use the same recipe
inputs as the real ones (docs/build-id.md §6), built for real and offline."""
from __future__ import annotations

import json

from build_fixtures import fake_project, read_in_package
from cli_runner import cli_subprocess


def test_fetch_from_dir_then_build_env_offline_and_manifest(tmp_path, monkeypatch):
    fp = fake_project(tmp_path)
    state = tmp_path / "state"
    monkeypatch.setenv("DEEPEP_ENV_STATE", str(state))
    p = ["--project", str(fp.root)]

    # offline with an empty cache: one line naming the package and the way out
    code, out, err = cli_subprocess("build", "h200-nvlink", *p, "--offline")
    assert code == 2 and "package nvshmem: source nvshmem" in err and "--from DIR" in err
    assert err.count("\n") == 1

    code, out, err = cli_subprocess("fetch", "h200-nvlink", *p, "--from", str(fp.upstream), "--offline", "--json")
    assert code == 0, err
    assert sorted(i["status"] for i in json.loads(out)["items"]) == ["imported", "imported"]

    code, out, err = cli_subprocess("build", "h200-nvlink", *p, "--offline", "--json", "-j", "3")
    assert code == 0, err
    rep = json.loads(out)
    assert [(n["package"], n["status"]) for n in rep["nodes"]] == [("nvshmem", "built"), ("deep-ep", "built")]
    for n in rep["nodes"]:
        assert set(n) >= {"package", "id", "status", "seconds", "outputs"}
    nv, dp = rep["nodes"]
    channel = state / "channel"
    variant = read_in_package(channel / nv["outputs"][0], "share/nvshmem/variant.txt").decode()
    assert variant == "cuda_home=/usr/local/cuda archs=90 ibgda=ON gdrcopy=OFF jobs=3\n"
    dvar = read_in_package(channel / dp["outputs"][0], "share/deep-ep/variant.txt").decode()
    assert dvar == ("arch=9.0 python=/opt/torch/.venv/bin/python3 require=pr-466 torch=host "
                    "rev=8a07e7e7ed57cfc63005f670d64d410cb30b061b\n")
    # deep-ep was built against exactly this nvshmem build
    assert read_in_package(channel / dp["outputs"][0], "share/deep-ep/nvshmem-version") == b"3.4.5 (stand-in)\n"
    index = json.loads(read_in_package(channel / dp["outputs"][0], "info/index.json"))
    assert index["depends"] == [f"nvshmem ==3.4.5 h{nv['id'][7:17]}_0"]

    manifest = json.loads((state / "builds" / "h200-nvlink.json").read_text())
    assert manifest["format"] == "deepep-env/build-manifest/v1" and manifest["env"] == "h200-nvlink"
    assert manifest["channel"] == str(channel.resolve())
    assert [(m["name"], m["file"], m["build_id"]) for m in manifest["packages"]] == [
        ("nvshmem", nv["outputs"][0], nv["id"]), ("deep-ep", dp["outputs"][0], dp["id"])]
    assert all(m["subdir"] == "linux-64" and m["build"].startswith("h") for m in manifest["packages"])

    # no-op rebuild
    code, out, err = cli_subprocess("build", "h200-nvlink", *p, "--offline", "--json")
    assert [n["status"] for n in json.loads(out)["nodes"]] == ["cached", "cached"]
    # the human form goes to stdout (summary) and stderr (progress)
    code, out, err = cli_subprocess("build", "h200-nvlink", *p, "--offline")
    assert code == 0 and "0 built, 2 cached" in out and "nvshmem" in err
