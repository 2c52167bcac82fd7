"""Issue 52.2-4, 52.12: every wheel provider's pinned wheels pass one check before a recipe sees them
(builder/wheel_check.py). Each hostile member, its neighbours that stay accepted, and the refusal
through ``deepep-env build`` with a stand-in wheel re-pinned to its hostile sha256."""
from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from build_fixtures import fetched, write_wheel
from cli_runner import cli_in_process
from deepep_env.base.errors import UserError
from deepep_env.builder.wheel_check import check_wheels

DI = "foo_bar-1.0.dist-info"


def _wheel(tmp_path: Path, extra: dict, name: str = "foo_bar", meta_name: str = "foo-bar", *, link: str = "") -> Path:
    members = {f"{DI}/METADATA": (f"Metadata-Version: 2.1\nName: {meta_name}\nVersion: 1.0\n", 0o644),
               f"{DI}/RECORD": ("", 0o644), "foo_bar/__init__.py": ("", 0o644), **extra}
    w = write_wheel(tmp_path / f"{name}-1.0-py3-none-any.whl", members)
    if link:
        with zipfile.ZipFile(w, "a") as z:
            info = zipfile.ZipInfo(link, date_time=(2025, 1, 1, 0, 0, 0))
            info.external_attr = (0o120777) << 16
            z.writestr(info, "/etc/passwd")
    return w


@pytest.mark.parametrize("member, rule", [
    ("/abs/path/x", "has an absolute path"),
    ("foo_bar/../../x", "has a '..' component"),
    ("nvidia/cu13/../../etc/x", "has a '..' component"),
    (f"{DI}/licenses/../../../x", "has a '..' component"),
    ("nvidia/cu13//etc/x", "has an empty or '.' component"),
    ("nvidia/./x", "has an empty or '.' component"),
    ("C:/x", "has an absolute path"),
    ("a\\..\\x", "has an absolute path"),
    ("foo_bar-1.0.data/data/etc/conda/activate.d/x.sh", "installs etc/conda/activate.d/x.sh into the environment's prefix"),
    ("foo_bar-1.0.data/data/bin/python", "installs bin/python"),
    ("foo_bar-1.0.data/data/lib/libc.so.6", "installs lib/libc.so.6"),
    ("foo_bar-1.0.data/data/sharex/x", "installs sharex/x"),
    ("foo_bar-1.0.data/data/x", "installs x"),
])
def test_a_hostile_member_is_refused_in_one_line_naming_wheel_member_and_rule(tmp_path, member, rule):
    w = _wheel(tmp_path, {member: ("x", 0o644)})
    with pytest.raises(UserError) as ei:
        check_wheels("pytorch", {"foo": w})
    msg = str(ei.value)
    assert f"wheel {w.name}: member {member!r} {rule}" in msg and "\n" not in msg


def test_a_symlink_member_is_refused(tmp_path):
    w = _wheel(tmp_path, {}, link="lib/x.so")
    with pytest.raises(UserError, match=r"member 'lib/x.so' is not a regular file or folder"):
        check_wheels("nvshmem", {"nvshmem": w})


@pytest.mark.parametrize("meta_name", ["/abs/path", "../x", "other", "foo bar", "", "fo\u043e-bar", "foo-bar/x"])
def test_a_metadata_name_that_is_not_the_catalogs_project_is_refused(tmp_path, meta_name):
    w = _wheel(tmp_path, {}, meta_name=meta_name)
    with pytest.raises(UserError) as ei:
        check_wheels("pytorch", {"foo": w})
    assert "names the project" in str(ei.value) and "not the catalog's 'foo-bar'" in str(ei.value)


@pytest.mark.parametrize("meta_name", ["foo-bar", "Foo_Bar", "foo.bar", "FOO__bar"])
def test_a_name_that_normalises_to_the_project_and_shared_files_are_accepted(tmp_path, meta_name):
    """Neighbours: PEP 503 spellings, a folder entry, .data/data under share/, .data/purelib, and one
    namespace file two wheels install with the same bytes."""
    w = _wheel(tmp_path, {"foo_bar-1.0.data/data/share/man/man1/isympy.1": ("man", 0o644),
                          "foo_bar-1.0.data/purelib/mp/__init__.py": ("x = 1\n", 0o644),
                          "nvidia/__init__.py": ("", 0o644), "nvidia/cu13/": ("", 0o755)}, meta_name=meta_name)
    (tmp_path / "b").mkdir()
    other = write_wheel(tmp_path / "b" / "baz-2.0-py3-none-any.whl", {
        "baz-2.0.dist-info/METADATA": ("Name: baz\nVersion: 2.0\n", 0o644), "nvidia/__init__.py": ("", 0o644)})
    check_wheels("pytorch", {"foo": w, "baz": other})


def test_two_wheels_installing_one_path_with_other_bytes_are_refused(tmp_path):
    w = _wheel(tmp_path, {"nvidia/cu13/include/x.h": ("one", 0o644)})
    (tmp_path / "b").mkdir()
    other = write_wheel(tmp_path / "b" / "baz-2.0-py3-none-any.whl", {
        "baz-2.0.dist-info/METADATA": ("Name: baz\nVersion: 2.0\n", 0o644),
        "baz-2.0.data/purelib/nvidia/cu13/include/x.h": ("two", 0o644)})
    with pytest.raises(UserError, match=r"installs nvidia/cu13/include/x.h, which .* installs with other bytes"):
        check_wheels("cuda", {"a": w, "b": other})


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04 truncated", b"not a zip"])
def test_a_wheel_that_is_not_a_zip_is_one_line(tmp_path, content):
    w = tmp_path / "foo_bar-1.0-py3-none-any.whl"
    w.write_bytes(content)
    with pytest.raises(UserError, match="is not a readable wheel"):
        check_wheels("pytorch", {"foo": w})


def test_two_metadata_files_are_refused(tmp_path):
    w = _wheel(tmp_path, {"other-1.0.dist-info/METADATA": ("Name: other\n", 0o644)})
    with pytest.raises(UserError, match=r"has 2 \*\.dist-info/METADATA"):
        check_wheels("pytorch", {"foo": w})


# -- through `deepep-env build`: a stand-in torch closure with one wheel re-pinned to its hostile sha256 ----------

@pytest.mark.parametrize("hostile, needle", [
    ({"Name": "/abs/path"}, "names the project '/abs/path'"),
    ({"member": "etc/conda/activate.d/x.sh"}, "installs etc/conda/activate.d/x.sh into the environment's prefix"),
])
def test_build_refuses_a_hostile_pinned_wheel_before_its_recipe_runs(tmp_path, monkeypatch, capsys, hostile, needle):
    from test_pytorch_wheel_provider import REAL, _catalog, _members, _stem, torch_project

    fp, wheels = torch_project(tmp_path)
    part = "mpmath"
    w = REAL[part]
    members = _members(part, w)
    di = f"{_stem(w['project'])}-{w['version']}.dist-info"
    if "Name" in hostile:
        members[f"{di}/METADATA"] = (f"Name: {hostile['Name']}\nVersion: {w['version']}\n", 0o644)
    else:
        members[f"{_stem(w['project'])}-{w['version']}.data/data/{hostile['member']}"] = ("touch PWNED\n", 0o755)
    write_wheel(wheels[part], members)                                   # the same file name, hostile bytes
    (fp.root / "recipes" / "pytorch-wheel" / "sources.toml").write_text(_catalog(wheels))   # re-pinned
    p = fetched(fp, "h200-nvlink", tmp_path, monkeypatch, capsys)
    monkeypatch.setenv("DEEPEP_ENV_BUILD_ROOT", str(tmp_path / "broot"))
    rc, out, err = cli_in_process(capsys, "build", "h200-nvlink", *p, "--offline")
    assert rc != 0
    errors = [ln for ln in err.splitlines() if "error:" in ln]
    assert len(errors) == 1 and needle in errors[0] and f"wheel {wheels[part].name}" in errors[0], err
    assert not Path("/abs/path").exists()
    assert not list(fp.project.channel.glob("*/deepep-pytorch-*.conda"))
