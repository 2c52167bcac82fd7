"""Hostile and malformed env specs (issue 2): every one is refused with exit 2 and ONE line that
names the file and the field, escapes terminal controls, never repeats a secret, and writes nothing.

Each case goes through the three commands that read a spec (`spec validate FILE`, `spec show FILE`,
`plan NAME --demo-host …`) in-process through ``deepep_env.cli.main.main`` (the console script's
own error handling); a few that could hang or trace back (FIFO, /dev/zero, deep nesting) also run
as real subprocesses.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from cli_runner import cli_in_process, cli_subprocess

REPO = Path(__file__).resolve().parents[2]
GOOD = (REPO / "env_specs" / "h200-nvlink.toml").read_text()
R8 = "8a07e7e7ed57cfc63005f670d64d410cb30b061b"
V2 = "dd758caf451848bd150e1046af3d0a73e5fff38d"
CTRL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
SECRET = "SECRETTOK"


def sub(old: str, new: str, text: str = GOOD) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def sect(name: str, body: str, text: str = GOOD) -> str:
    pat = re.compile(r"(?ms)^\[" + re.escape(name) + r"\]\n.*?(?=^\[|\Z)")
    assert pat.search(text), name
    return pat.sub(lambda m: f"[{name}]\n{body}\n\n", text, count=1)


def env_line(line: str) -> str:
    return sub('NCCL_NVLS_ENABLE = "0"', line)


def host_line(line: str) -> str:
    return sub('driver = ">=575"', 'driver = ">=575"\n' + line)


V2_TEXT = sub(R8, V2).replace('require = ["pr-466"]', "require = []")
V2_NCCL_OK = V2_TEXT.replace('version = "2.28.9"', 'version = "2.30.4"')
LONG = "x" * 1_000_000

# (id, file content, field the error must name (None: any), file stem)
CASES: list[tuple[str, "str | bytes", "str | None"]] = [
    # --- not TOML / not text
    ("empty", "", "format"),
    ("whitespace-only", "  \n\n ", "format"),
    ("binary", bytes(range(256)) * 4, None),
    ("not-utf8", GOOD.encode().replace(b"8x H200", b"8x \xff\xfe H200"), None),
    ("utf16", GOOD.encode("utf-16"), None),
    ("bom", "\ufeff" + GOOD, None),
    ("nul-byte", sub("format = 1", "format = 1\x00"), None),
    ("duplicate-key", sub("format = 1", "format = 1\nformat = 1"), None),
    ("duplicate-table", GOOD + "\n[deepep]\nrevision = 'x'\n", None),
    ("deep-arrays", sub("description = ", "description = " + "[" * 5000 + "]" * 5000 + "\n#"), None),
    ("deep-inline-tables", sub("description = ", "description = " + "{a = " * 300 + "1" + "}" * 300 + "\n#"), "description"),
    # --- format header
    ("format-string", sub("format = 1", 'format = "1"'), "format"),
    ("format-float", sub("format = 1", "format = 1.0"), "format"),
    ("format-bool", sub("format = 1", "format = true"), "format"),
    ("format-huge", sub("format = 1", "format = 99999999999999999999"), "format"),
    ("format-negative", sub("format = 1", "format = -1"), "format"),
    ("format-future", sub("format = 1", "format = 2"), "format"),
    ("format-table", sub("format = 1", "format = {a = 1}"), "format"),
    ("format-date", sub("format = 1", "format = 1979-05-27"), "format"),
    ("format-ansi", sub("format = 1", 'format = "\\u001b[31mRED"'), "format"),
    ("format-1mb", sub("format = 1", f'format = "{LONG}"'), "format"),
    # --- shape
    ("array-of-tables", GOOD.replace("[python]", "[[python]]"), "python"),
    ("array-of-tables-host", GOOD.replace("[host]", "[[host]]"), "host"),
    ("array-of-tables-env", GOOD.replace("[env]", "[[env]]"), "env"),
    ("unknown-table", GOOD + "\n[extra]\na = 1\n", "extra"),
    ("unknown-key", sub("format = 1", "format = 1\nbogus = 1"), "bogus"),
    ("unknown-key-ansi", sub("format = 1", 'format = 1\n"\\u001b[2J" = 1'), None),
    ("unknown-key-long", sub("format = 1", "format = 1\n" + "k" * 5000 + " = 1"), None),
    ("python-as-string", sub("[python]\n", 'python = "3.12"\n[pythonx]\n'), "python"),
    # --- name
    ("name-dotdot", sub('name = "h200-nvlink"', 'name = "../etc/passwd"'), "name"),
    ("name-space", sub('name = "h200-nvlink"', 'name = "h200 nvlink"'), "name"),
    ("name-upper", sub('name = "h200-nvlink"', 'name = "H200-nvlink"'), "name"),
    ("name-cyrillic-i", sub('name = "h200-nvlink"', 'name = "h200-nvl\u0456nk"'), "name"),
    ("name-ansi", sub('name = "h200-nvlink"', 'name = "\\u001b]0;pwn\\u0007"'), "name"),
    ("name-newline", sub('name = "h200-nvlink"', 'name = "h200\\nnvlink"'), "name"),
    ("name-nul", sub('name = "h200-nvlink"', 'name = "h200\\u0000nvlink"'), "name"),
    ("name-bidi", sub('name = "h200-nvlink"', 'name = "h200\\u202envlink"'), "name"),
    ("name-mismatch", sub('name = "h200-nvlink"', 'name = "gcp-b200"'), "name"),
    ("name-empty", sub('name = "h200-nvlink"', 'name = ""'), "name"),
    ("name-1mb", sub('name = "h200-nvlink"', f'name = "{LONG}"'), "name"),
    ("name-int", sub('name = "h200-nvlink"', "name = 5"), "name"),
    # --- strings anywhere
    ("description-ansi", sub('description = "8x', 'description = "\\u001b[31m8x'), "description"),
    ("description-1mb", sub('description = "8x', f'description = "{LONG}8x'), "description"),
    ("description-int", re.sub(r'(?m)^description = ".*"$', "description = 5", GOOD), "description"),
    # --- lists
    ("platforms-empty", sub('platforms = ["nvlink"]', "platforms = []"), "platforms"),
    ("platforms-unknown", sub('platforms = ["nvlink"]', 'platforms = ["nope"]'), "platforms"),
    ("platforms-dotdot", sub('platforms = ["nvlink"]', 'platforms = ["../../etc"]'), "platforms"),
    ("platforms-dup", sub('platforms = ["nvlink"]', 'platforms = ["nvlink", "nvlink"]'), "platforms"),
    ("platforms-string", sub('platforms = ["nvlink"]', 'platforms = "nvlink"'), "platforms"),
    ("subdirs-win", sub('subdirs = ["linux-64"]', 'subdirs = ["win-64"]'), "subdirs"),
    ("subdirs-empty", sub('subdirs = ["linux-64"]', "subdirs = []"), "subdirs"),
    ("subdirs-dup", sub('subdirs = ["linux-64"]', 'subdirs = ["linux-64", "linux-64"]'), "subdirs"),
    ("channels-empty", sub('channels = ["local"]', "channels = []"), "channels"),
    ("channels-dup", sub('channels = ["local"]', 'channels = ["local", "local"]'), "channels"),
    # --- python / cuda / pytorch / nccl
    ("python-2.7", sect("python", 'version = "2.7"'), "python.version"),
    ("python-float", sect("python", "version = 3.12"), "python.version"),
    ("python-provider-pip", sect("python", 'version = "3.12"\nprovider = "pip"'), "python.provider"),
    ("python-exe-relative", sect("python", 'version = "3.12"\nprovider = "host"\nexecutable = "python; rm -rf /"'), "python.executable"),
    ("python-exe-newline", sect("python", 'version = "3.12"\nprovider = "host"\nexecutable = "/usr/bin/python\\nx"'), "python.executable"),
    ("python-exe-with-conda", sect("python", 'version = "3.12"\nexecutable = "/usr/bin/python3"'), "python"),
    ("cuda-prefix-with-conda", sect("cuda", 'version = "13.0"\narchitectures = ["9.0"]\nprefix = "/usr/local/cuda"'), "cuda"),
    ("cuda-prefix-relative", sect("cuda", 'version = "13.0"\narchitectures = ["9.0"]\nprovider = "host"\nprefix = "../cuda"'), "cuda.prefix"),
    *[(f"arch-{a or 'empty'}", sub('architectures = ["9.0"]', f'architectures = ["{a}"]'), "cuda.architectures")
      for a in ("9", "sm_90", "90", "9.0.0", "", "999.9z", "0.0", "99.0", "8.0a", "9.0f", "9.0a,10.0")],
    ("arch-empty-list", sub('architectures = ["9.0"]', "architectures = []"), "cuda.architectures"),
    ("arch-float", sub('architectures = ["9.0"]', "architectures = [9.0]"), "cuda.architectures"),
    ("arch-dup", sub('architectures = ["9.0"]', 'architectures = ["9.0", "9.0"]'), "cuda.architectures"),
    *[(f"cuda-{v or 'empty'}", sub('version = "13.0"', f'version = "{v}"'), "cuda.version")
      for v in ("13", "13.0.0", "13.x", "", "-13.0", "013.0", "99999999999999999999999.0")],
    *[(f"nvshmem-{v or 'empty'}", sub('version = "3.4.5"', f'version = "{v}"'), "nvshmem.version")
      for v in (">=", "3.4.5,", "==", "*", "3..4", ">=3.3.9,", ",3.4.5", "3.4.5 3.5.19", "=3.4.5", "~3.4",
                "^3.4", "3.4.*", "<3.0", ">99", ">=3.3.9,<3.3.9", "9" * 200, ">=3.3.9||<3", "3.4.5-")],
    *[(f"pytorch-{v or 'empty'}", sub('version = "2.11.0"', f'version = "{v}"'), "pytorch.version")
      for v in (">=", "2.11.0,", "*", "2..11", ">=2.10", "2.11.*", "")],
    *[(f"nccl-{v or 'empty'}", sub('version = "2.28.9"', f'version = "{v}"'), "nccl.version")
      for v in (">=", "2.28.9,", "*", "2..28", ">=2.28", "")],
    ("pytorch-cuda-cu130", sub('cuda = "13.0"', 'cuda = "cu130"'), "pytorch.cuda"),
    ("pytorch-build-ansi", sub('provider = "host"\n\n[nccl]', 'build = "\\u001b[31m"\n\n[nccl]'), "pytorch.build"),
    ("pytorch-build-space", sect("pytorch", 'version = "2.11.0"\ncuda = "13.0"\nbuild = "cuda 130 *"'), "pytorch.build"),
    # --- DeepEP / NVSHMEM / GDRCopy
    *[(f"revision-{i}", sub(R8, r), "deepep.revision")
      for i, r in enumerate((R8.upper(), R8 + "a", R8[:-1] + "g", "8a07e7", "", "HEAD", "v1.2.1", "0000000"))],
    ("revision-int", sub(f'"{R8}"', "8"), "deepep.revision"),
    ("deepep-patch-unknown", sub('require = ["pr-466"]', 'require = ["pr-466"]\npatches = ["nope"]'), "deepep.patches"),
    ("deepep-patch-dotdot", sub('require = ["pr-466"]', 'require = ["pr-466"]\npatches = ["../../etc/passwd"]'), "deepep.patches"),
    ("deepep-patch-dup", sub('require = ["pr-466"]', 'require = ["pr-466"]\npatches = ["a", "a"]'), "deepep.patches"),
    ("nvshmem-patch-unknown", sub("gdrcopy = false", 'gdrcopy = false\npatches = ["nope"]'), "nvshmem.patches"),
    ("nvshmem-patch-nested", sub("gdrcopy = false", 'gdrcopy = false\npatches = [["x"]]'), "nvshmem.patches"),
    ("require-unknown", sub('require = ["pr-466"]', 'require = ["pr-9999"]'), "deepep.require"),
    ("require-ansi", sub('require = ["pr-466"]', 'require = ["\\u001b[31m"]'), "deepep.require"),
    ("require-empty-string", sub('require = ["pr-466"]', 'require = [""]'), "deepep.require"),
    ("nic-handler-case", sub("gdrcopy = false", 'gdrcopy = false\nnic_handler = "GPU"'), "nvshmem.nic_handler"),
    ("nvshmem-provider-pip", sub('provider = "source"', 'provider = "pip"'), "nvshmem.provider"),
    ("nvshmem-host-range", sub('provider = "source"', 'provider = "host"').replace('version = "3.4.5"', 'version = ">=3.3.9"'), "nvshmem.version"),
    ("ibgda-string", sub("ibgda = true ", 'ibgda = "true" '), "nvshmem.ibgda"),
    ("ibgda-int", sub("ibgda = true ", "ibgda = 1 "), "nvshmem.ibgda"),
    ("gdrcopy-unknown", sub("[deepep]", '[gdrcopy]\nversion = "9.9.9"\n\n[deepep]'), "gdrcopy.version"),
    ("gdrcopy-range", sub("[deepep]", '[gdrcopy]\nversion = ">=2.5"\n\n[deepep]'), "gdrcopy.version"),
    ("gdrcopy-no-version", sub("[deepep]", "[gdrcopy]\n\n[deepep]"), "gdrcopy.version"),
    # --- [host]
    ("host-driver-word", sub('driver = ">=575"', 'driver = "latest"'), "host.driver"),
    ("host-driver-int", sub('driver = ">=575"', "driver = 575"), "host.driver"),
    ("host-params-string", host_line('driver_params = { PeerMappingOverride = "1" }'), "host.driver_params"),
    ("host-params-bool", host_line("driver_params = { PeerMappingOverride = true }"), "host.driver_params"),
    ("host-params-float", host_line("driver_params = { PeerMappingOverride = 1.0 }"), "host.driver_params"),
    ("host-params-huge", host_line("driver_params = { PeerMappingOverride = 99999999999999999999 }"), "host.driver_params"),
    ("host-params-negative", host_line("driver_params = { PeerMappingOverride = -1 }"), "host.driver_params"),
    ("host-params-name", host_line('driver_params = { "Peer Mapping;rm" = 1 }'), "host.driver_params"),
    ("host-params-nested", host_line("driver_params = { a = { b = 1 } }"), "host.driver_params"),
    ("host-kmod-shell", host_line('kernel_modules = ["nvidia peermem; rm"]'), "host.kernel_modules"),
    ("host-kmod-dotdot", host_line('kernel_modules = ["../../x"]'), "host.kernel_modules"),
    ("host-unknown-key", host_line('cuda = "12"'), "host.cuda"),
    ("host-prepare-newline", host_line('prepare = "bash make-host.sh\\nrm -rf /"'), "host.prepare"),
    ("host-prepare-escape", host_line('prepare = "bash make-host.sh \\u001b[2J"'), "host.prepare"),
    ("host-prepare-empty", host_line('prepare = "  "'), "host.prepare"),
    ("host-prepare-long", host_line('prepare = "' + "x" * 201 + '"'), "host.prepare"),
    ("host-prepare-list", host_line('prepare = ["bash", "make-host.sh"]'), "host.prepare"),
    # --- [env]
    ("env-name-digit", env_line('"1BAD" = "0"'), "env"),
    ("env-name-equals", env_line('"A=B" = "0"'), "env"),
    ("env-name-empty", env_line('"" = "0"'), "env"),
    ("env-name-ansi", env_line('"\\u001b[31m" = "0"'), "env"),
    ("env-value-newline", env_line('NCCL_NVLS_ENABLE = "0\\nexport EVIL=1"'), "env.NCCL_NVLS_ENABLE"),
    ("env-value-multiline", env_line('NCCL_NVLS_ENABLE = """0\nexport EVIL=1"""'), "env.NCCL_NVLS_ENABLE"),
    ("env-value-nul", env_line('NCCL_NVLS_ENABLE = "0\\u0000"'), "env.NCCL_NVLS_ENABLE"),
    ("env-value-ansi", env_line('NCCL_NVLS_ENABLE = "\\u001b[31m"'), "env.NCCL_NVLS_ENABLE"),
    ("env-value-int", env_line("NCCL_NVLS_ENABLE = 0"), "env.NCCL_NVLS_ENABLE"),
    ("env-value-1mb", env_line(f'NCCL_NVLS_ENABLE = "{LONG}"'), "env.NCCL_NVLS_ENABLE"),
    ("env-dotted", env_line('A.B = "0"'), "env"),
    # --- conflicting pins: one case per rule in deepep_env/envspec/rules.py
    ("rule-sm100-needs-cuda-12.8", sub('architectures = ["9.0"]', 'architectures = ["10.0"]')
     .replace('version = "13.0"', 'version = "12.6"').replace('cuda = "13.0"', 'cuda = "12.6"'), "cuda.version"),
    ("rule-sm120-needs-cuda-12.8", sub('architectures = ["9.0"]', 'architectures = ["12.0"]')
     .replace('version = "13.0"', 'version = "12.4"').replace('cuda = "13.0"', 'cuda = "12.4"'), "cuda.version"),
    ("rule-deepep-revision-nvshmem", sub(R8, "0c984e256bb83c901741a9bab6f9c3b9eadd7421")
     .replace('require = ["pr-466"]', "require = []").replace('version = "3.4.5"', 'version = "3.5.19"'), "nvshmem.version"),
    ("rule-deepep-v2-legacy-nvshmem-3.5.19", V2_TEXT.replace('version = "2.28.9"', 'version = "2.30.4"')
     .replace('version = "3.4.5"', 'version = "3.5.19"'), "nvshmem.version"),
    ("rule-deepep-v2-nccl", V2_TEXT, "nccl.version"),
    ("rule-deepep-v2-pytorch", V2_TEXT.replace('version = "2.28.9"', 'version = "2.30.4"')
     .replace('version = "2.11.0"', 'version = "2.9.0"'), "pytorch.version"),
    # DeepEP 2.x (issue 17): NCCL source/provider, one NCCL per process, the JIT's CUDA, NVSHMEM providers
    ("rule-deepep-v2-one-nccl", V2_NCCL_OK.replace('cuda = "13.0"\nprovider = "host"', 'cuda = "13.0"\nprovider = "conda"'),
     "nccl.provider"),
    ("rule-deepep-v2-nccl-provider", sect("nccl", 'version = "2.30.4"\nprovider = "host"', V2_TEXT), "nccl.provider"),
    ("rule-deepep-v2-cuda", V2_NCCL_OK.replace('version = "13.0"', 'version = "12.2"').replace('cuda = "13.0"', 'cuda = "12.2"'),
     "cuda.version"),
    ("rule-deepep-nvshmem-provider", V2_NCCL_OK.replace('provider = "source"', 'provider = "conda"'), "nvshmem.provider"),
    ("rule-nvshmem-pip-needs-host-python", sect("nccl", 'version = "2.30.4"\nprovider = "source"', V2_TEXT)
     .replace('provider = "source"\nibgda', 'provider = "pip"\nibgda')
     .replace('cuda = "13.0"\nprovider = "host"', 'cuda = "13.0"\nprovider = "conda"'), "nvshmem.provider"),
    ("nccl-provider-unknown", sect("nccl", 'version = "2.30.7"\nprovider = "sauce"'), "nccl.provider"),
    ("nccl-source-uncatalogued", sect("nccl", 'version = "9.9.9"\nprovider = "source"'), "nccl.version"),
    ("nccl-source-range-typo", sect("nccl", 'version = ">=2..30"\nprovider = "source"'), "nccl.version"),
    ("nccl-source-range-empty", sect("nccl", 'version = ">=2.31"\nprovider = "source"'), "nccl.version"),
    ("rule-cpu-nic-handler-needs-gdrcopy", sub("gdrcopy = false", 'gdrcopy = false\nnic_handler = "cpu"'), "nvshmem.nic_handler"),
    ("rule-nic-handler-needs-ibgda", sub("ibgda = true ", "ibgda = false ")
     .replace("gdrcopy = false", 'gdrcopy = false\nnic_handler = "cpu"'), "nvshmem.nic_handler"),
    ("rule-gdrcopy-version-given", sub("gdrcopy = false", "gdrcopy = true"), "gdrcopy"),
    ("rule-nvshmem-patch-needs-gdrcopy", sub('version = "3.4.5"', 'version = "3.2.5"')
     .replace(R8, "0c984e256bb83c901741a9bab6f9c3b9eadd7421").replace('require = ["pr-466"]', "require = []")
     .replace("gdrcopy = false", 'gdrcopy = false\npatches = ["deepep-nvshmem-3.2.5"]'), "nvshmem.patches"),
    ("rule-nvshmem-patch-version", sub("gdrcopy = false", 'gdrcopy = true\npatches = ["deepep-nvshmem-3.2.5"]')
     .replace("[deepep]", '[gdrcopy]\nversion = "2.5.1"\n\n[deepep]'), "nvshmem.patches"),
    ("rule-aggressive-ptx-sm90-only", sub('architectures = ["9.0"]', 'architectures = ["9.0", "10.0"]')
     .replace("aggressive_ptx = false", "aggressive_ptx = true"), "deepep.aggressive_ptx"),
    ("rule-pytorch-cuda-major", sub('cuda = "13.0"', 'cuda = "12.9"'), "pytorch.cuda"),
    ("rule-deepep-required-features", sub('require = ["pr-466"]', 'require = ["pr-9999"]'), "deepep.require"),
]

# Credentials in every URL form a channel list or publish_url could carry. The error must not
# repeat the secret (it would reach terminals, CI logs and bug reports).
URLS = [
    f"https://{SECRET}@host.example/c", f"https://u:{SECRET}@host.example/x", f"https://host.example/x?token={SECRET}",
    f"https://host.example/t/{SECRET}/conda-forge", f"https://host.example/x#{SECRET}",
    f"https://user%3A{SECRET}@host.example/x", f"HTTPS://u:{SECRET}@host.example/x", f"https:u:{SECRET}@host.example",
    f"//u:{SECRET}@host.example", f"https://host.example/x?access_token={SECRET}&x=1",
    f"s3://AKIA:{SECRET}@bucket/x", f"https://host.example@u:{SECRET}@evil/", f"https://host.example:{SECRET}/x",
]
CASES += [(f"channel-secret-{i}", sub('channels = ["local"]', f'channels = ["local", "{u}"]'), "channels")
          for i, u in enumerate(URLS)]
CASES += [(f"publish-url-secret-{i}", re.sub(r'(?m)^publish_url = "[^"]*"', f'publish_url = "{u}"', GOOD), "publish_url")
          for i, u in enumerate(URLS)]
CASES += [(f"channel-junk-{i}", sub('channels = ["local"]', f'channels = ["local", "{c}"]'), "channels")
          for i, c in enumerate(("", " ", "-c", "https://", "local/../../etc", "ftp://host/x", "/srv/channel",
                                 "https://host.example/x\\u001b[31m", "file:///etc/passwd\\nlocal"))]
CASES += [("publish-url-junk", re.sub(r'(?m)^publish_url = "[^"]*"', 'publish_url = "not a url"', GOOD), "publish_url"),
          ("publish-url-empty", re.sub(r'(?m)^publish_url = "[^"]*"', 'publish_url = ""', GOOD), "publish_url")]

IDS = [c[0] for c in CASES]
assert len(set(IDS)) == len(IDS)


def _project(tmp_path: Path, stem: str, content: "str | bytes") -> tuple[Path, Path]:
    proj = tmp_path / "proj"
    (proj / "env_specs").mkdir(parents=True)
    os.symlink(REPO / "recipes", proj / "recipes")
    f = proj / "env_specs" / f"{stem}.toml"
    f.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return proj, f


def _assert_one_refusal(rc: int, out: str, err: str, path: str, field: "str | None") -> str:
    assert rc == 2, (rc, err[:500])
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err[:500]
    line = err[:-1]
    assert "Traceback" not in line
    assert not CTRL.search(line), repr(line[:300])
    assert len(line) < 1200, f"{len(line)} characters"
    assert path in line, line[:300]
    if field:
        assert f": {field}" in line, line[:300]
    assert SECRET not in line
    return line


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_hostile_spec_refused_by_every_reader(case, tmp_path: Path, monkeypatch, capsys) -> None:
    _, content, field = case
    state = tmp_path / "state"
    monkeypatch.setenv("DEEPEP_ENV_STATE", str(state))
    monkeypatch.delenv("DEEPEP_ENV_PROJECT", raising=False)
    proj, f = _project(tmp_path, "h200-nvlink", content)
    before = sorted(tmp_path.rglob("*"))
    for argv in (["spec", "validate", str(f), "--project", str(proj)],
                 ["spec", "show", str(f), "--project", str(proj)],
                 ["plan", "h200-nvlink", "--demo-host", "gcp-b200-demo", "--project", str(proj)]):
        rc, out, err = cli_in_process(capsys, *argv)
        _assert_one_refusal(rc, out, err, str(f), field)
    assert not state.exists()
    assert sorted(tmp_path.rglob("*")) == before  # nothing written anywhere in the project


def test_accepted_is_named_where_it_helps(tmp_path: Path, capsys) -> None:
    want = {
        "format-string": "format = 1",
        "subdirs-win": "linux-aarch64",
        "arch-sm_90": "9.0",
        "arch-99.0": "10.0",
        "platforms-unknown": "gcp-b200",
        "nvshmem-3..4": "3.4.5",
        "revision-7": "8a07e7e7ed57",
        "deepep-patch-unknown": "deepep-pr696-nvshmem-rc-qp",
        "nvshmem-patch-unknown": "deepep-nvshmem-3.2.5",
        "gdrcopy-unknown": "2.5.1",
        "description-1mb": "4096",
        "env-value-newline": "one line",
        "name-mismatch": "'h200-nvlink'",
        "unknown-table": "documented keys",
        "host-prepare-newline": "one line",
        "host-prepare-long": "the command that makes the host externals",
    }
    by_id = {c[0]: c for c in CASES}
    for cid, acc in want.items():
        proj, f = _project(tmp_path / cid, "h200-nvlink", by_id[cid][1])
        rc, out, err = cli_in_process(capsys, "spec", "validate", str(f), "--project", str(proj))
        assert rc == 2 and "(accepted: " in err and acc in err.split("(accepted: ", 1)[1], (cid, err[:300])


def test_secret_urls_name_the_entry_not_the_url(tmp_path: Path, capsys) -> None:
    proj, f = _project(tmp_path, "h200-nvlink", sub('channels = ["local"]', f'channels = ["local", "{URLS[1]}"]'))
    rc, _, err = cli_in_process(capsys, "spec", "validate", str(f), "--project", str(proj))
    assert rc == 2 and "channel #2" in err and "credentials" in err and SECRET not in err


def test_line_is_reported_for_value_errors(tmp_path: Path, capsys) -> None:
    text = env_line('NCCL_NVLS_ENABLE = "0\\u001b[31m"')
    proj, f = _project(tmp_path, "h200-nvlink", text)
    rc, _, err = cli_in_process(capsys, "spec", "validate", str(f), "--project", str(proj))
    lineno = next(i for i, l in enumerate(text.splitlines(), 1) if l.startswith("NCCL_NVLS_ENABLE"))
    assert rc == 2 and f"{f}:{lineno}: env.NCCL_NVLS_ENABLE: control character U+001B" in err


@pytest.mark.parametrize("stem", ["h200-nvlink\x1b[31m", "h200\nnvlink", "h200 nvlink", "h200-nvl\u0456nk", "H200-NVLINK"])
def test_hostile_file_names(stem: str, tmp_path: Path, capsys) -> None:
    proj, f = _project(tmp_path, stem, GOOD)
    rc, out, err = cli_in_process(capsys, "spec", "validate", str(f), "--project", str(proj))
    assert rc == 2 and out == "" and err.count("\n") == 1 and not CTRL.search(err[:-1]), repr(err)
    assert str(proj / "env_specs") in err


def _special(tmp_path: Path) -> dict[str, Path]:
    d = tmp_path / "special"
    d.mkdir()
    (d / "dir.toml").mkdir()
    os.symlink("loop.toml", d / "loop.toml")
    os.mkfifo(d / "fifo.toml")
    os.symlink("/dev/zero", d / "zero.toml")
    os.symlink("/dev/null", d / "null.toml")
    big = d / "big.toml"
    with big.open("wb") as fh:
        fh.truncate(8 << 20)  # sparse 8 MiB
    return {"dir": d / "dir.toml", "loop": d / "loop.toml", "fifo": d / "fifo.toml", "zero": d / "zero.toml",
            "null": d / "null.toml", "big": big, "missing": d / "missing.toml"}


def test_files_that_are_not_specs(tmp_path: Path, monkeypatch) -> None:
    """Real subprocesses: a FIFO must not block, /dev/zero must not eat memory, nothing traces back."""
    monkeypatch.setenv("DEEPEP_ENV_STATE", str(tmp_path / "state"))
    for kind, path in _special(tmp_path).items():
        res = cli_subprocess("spec", "validate", path, timeout=120)
        assert res.returncode == 2, (kind, res.stderr[-500:])
        assert res.stderr.count("\n") == 1 and str(path) in res.stderr and "Traceback" not in res.stderr, (kind, res.stderr)
    assert not (tmp_path / "state").exists()


def test_deep_nesting_subprocess_no_traceback(tmp_path: Path) -> None:
    proj, f = _project(tmp_path, "h200-nvlink", sub("description = ", "description = " + "[" * 5000 + "]" * 5000 + "\n#"))
    res = cli_subprocess("spec", "validate", f, timeout=120)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "nested too deeply" in res.stderr, res.stderr[-500:]


def test_whitespace_around_values_is_not_identity(tmp_path: Path) -> None:
    """Stripping is deliberate (str_strip_whitespace): ' 9.0' resolves like '9.0', so a stray space
    can neither fail a build nor change a build id."""
    from deepep_env.base.project import Project
    from deepep_env.envspec import load_spec_file, parse_spec_text, resolve

    a = parse_spec_text(GOOD, expect_name="h200-nvlink")
    b = parse_spec_text(sub('architectures = ["9.0"]', 'architectures = [" 9.0 "]'), expect_name="h200-nvlink")
    assert a == b
    _, f = _project(tmp_path, "h200-nvlink", GOOD)
    assert resolve(load_spec_file(f), Project(REPO), file=f).cuda.architectures == ["9.0"]


def test_every_committed_spec_still_validates(capsys) -> None:
    specs = sorted((REPO / "env_specs").glob("*.toml"))
    rc, out, err = cli_in_process(capsys, "spec", "validate", *map(str, specs), "--project", str(REPO))
    assert rc == 0 and out.count("ok ") == len(specs), err
