"""The prefix marker is one type (issue 29.3): PrefixMarker reads it (the legacy .json too) and
writes it, byte for byte as install always wrote it."""
from __future__ import annotations

import json

import pytest

from deepep_env.base.errors import UserError
from deepep_env.formats.prefix import LEGACY_RELPATH, META_RELPATH, PrefixMarker, read_prefix_meta

FIELDS = {"format": "deepep-env/prefix/v1", "env": "gcp-b200", "spec_version": "1", "platforms": ["gcp-b200"],
          "python": {"provider": "host", "version": "3.12", "executable": "/usr/bin/python3"},
          "subdir": "linux-64", "spec_env": {"NCCL_NVLS_ENABLE": "0"}, "packages": []}


def test_write_then_read_gives_the_same_fields_and_bytes(tmp_path):
    (tmp_path / "conda-meta").mkdir()
    PrefixMarker(FIELDS).write(tmp_path)
    text = (tmp_path / META_RELPATH).read_text()
    assert text == json.dumps(FIELDS, indent=2, sort_keys=False) + "\n"   # what install wrote before
    m = PrefixMarker.read(tmp_path)
    assert m is not None and dict(m.fields) == FIELDS and m.to_json() == text
    assert m["env"] == "gcp-b200" and m.get("missing") is None
    meta = PrefixMarker.load(tmp_path, "gcp-b200").meta(tmp_path)
    assert meta == read_prefix_meta(tmp_path, "gcp-b200")
    assert meta.python_executable == "/usr/bin/python3" and meta.spec_env == {"NCCL_NVLS_ENABLE": "0"}


def test_the_legacy_marker_is_read_and_replaced_on_write(tmp_path):
    (tmp_path / "conda-meta").mkdir()
    (tmp_path / LEGACY_RELPATH).write_text(json.dumps(FIELDS))
    m = PrefixMarker.read(tmp_path)
    assert m is not None and m["env"] == "gcp-b200"
    assert read_prefix_meta(tmp_path).env == "gcp-b200"
    m.write(tmp_path)
    assert (tmp_path / META_RELPATH).is_file() and not (tmp_path / LEGACY_RELPATH).exists()


def test_an_unusable_marker_reads_as_none_and_loads_as_one_line(tmp_path):
    (tmp_path / "conda-meta").mkdir()
    assert PrefixMarker.read(tmp_path) is None
    (tmp_path / META_RELPATH).write_text("{not json")
    assert PrefixMarker.read(tmp_path) is None
    with pytest.raises(UserError, match="not valid JSON"):
        PrefixMarker.load(tmp_path)
    (tmp_path / META_RELPATH).write_text(json.dumps(FIELDS))
    with pytest.raises(UserError, match="not 'other'"):
        PrefixMarker.load(tmp_path, "other")
