"""deepep_env/formats/stamps.py: how a format stamp is read (both JSON conventions) and the one refusal of a
stamp this deepep-env cannot read. Pure unit tests: no file is written, nothing is run."""
from __future__ import annotations

import pytest

from deepep_env.base.errors import UserError
from deepep_env.formats.stamps import LOCK_META, Format, read_stamp

# a format at version 3 that still reads 2 (v1 is "no longer read"), to exercise every branch
THING = Format("deepep-env/thing", 3, "thing file", oldest=2)
FILE = "/some/where/thing.json"


def _refusal(data, fmt: Format = THING, **kw) -> UserError:
    with pytest.raises(UserError) as err:
        fmt.check(data, file=FILE, **kw)
    return err.value


# --------------------------------------------------------------------------------------------- read_stamp


@pytest.mark.parametrize("data, want", [
    # convention 1: "format": "<name>/v<N>"
    ({"format": "deepep-env/thing/v3"}, ("deepep-env/thing", 3)),
    ({"format": "deepep-env/lock-meta/v2", "envs": {}}, ("deepep-env/lock-meta", 2)),
    ({"format": "something-else/v1"}, ("something-else", 1)),
    # convention 2: "_meta": {"format": "<name>", "version": N}
    ({"_meta": {"format": "deepep-env/doctor", "version": 4}}, ("deepep-env/doctor", 4)),
    # _meta wins when a document has both
    ({"_meta": {"format": "deepep-env/a", "version": 1}, "format": "deepep-env/b/v9"}, ("deepep-env/a", 1)),
    # an _meta that is not an object does not hide a valid "format"
    ({"_meta": "junk", "format": "deepep-env/thing/v2"}, ("deepep-env/thing", 2)),
])
def test_read_stamp_both_conventions(data, want):
    assert read_stamp(data) == want


@pytest.mark.parametrize("data", [
    None, [], ["format", "deepep-env/thing/v1"], "deepep-env/thing/v1", 3, 2.0,   # not a dict
    {},                                                   # no stamp at all
    {"format": None}, {"format": 1}, {"format": "deepep-env/thing"},   # no /vN
    {"format": "deepep-env/thing/vX"}, {"format": "deepep-env/thing/v"}, {"format": "/v"},
    {"format": "deepep-env/thing/v1234567"},              # more digits than any real version
    {"_meta": {"format": "deepep-env/thing"}},           # _meta without a version
    {"_meta": {"format": "deepep-env/thing", "version": "3"}},   # version as a string
    {"_meta": {"format": "deepep-env/thing", "version": True}},  # bool is not a version
    {"_meta": {"format": "deepep-env/thing", "version": 3.0}},
    {"_meta": {"format": 5, "version": 3}},
])
def test_read_stamp_none_when_there_is_no_readable_stamp(data):
    assert read_stamp(data) is None


# --------------------------------------------------------------------------------------------- spelling


def test_stamp_meta_and_readable_spell_the_same_name_and_version():
    assert THING.stamp == "deepep-env/thing/v3"
    assert THING.meta() == {"format": "deepep-env/thing", "version": 3}
    assert THING.readable == ("deepep-env/thing/v2", "deepep-env/thing/v3")
    # what a writer puts down, in either convention, is what the reader reads back
    assert read_stamp({"format": THING.stamp}) == read_stamp({"_meta": THING.meta()}) == ("deepep-env/thing", 3)
    assert LOCK_META.stamp == "deepep-env/lock-meta/v2"
    assert LOCK_META.readable == ("deepep-env/lock-meta/v1", "deepep-env/lock-meta/v2")


# --------------------------------------------------------------------------------------------- check / accepts


@pytest.mark.parametrize("data, version", [
    ({"format": "deepep-env/thing/v3"}, 3),
    ({"format": "deepep-env/thing/v2"}, 2),                        # older, still read
    ({"_meta": {"format": "deepep-env/thing", "version": 3}}, 3),
    ({"_meta": {"format": "deepep-env/thing", "version": 2}}, 2),
])
def test_check_returns_the_version_read(data, version):
    assert THING.check(data, file=FILE) == version
    assert THING.accepts(data)


def _assert_one_line(e: UserError, *, field: str = "format") -> str:
    text = str(e)
    assert "\n" not in text and e.exit_code == 2
    assert e.file == FILE and e.field == field and text.startswith(f"{FILE}: {field}: ")
    return text


@pytest.mark.parametrize("data", [
    {"format": "deepep-env/thing/v4"},
    {"format": "deepep-env/thing/v999999"},
    {"_meta": {"format": "deepep-env/thing", "version": 4}},
])
def test_newer_is_refused_with_upgrade_advice(data):
    e = _refusal(data)
    text = _assert_one_line(e)
    assert "thing file format deepep-env/thing/v" in text and "is newer than this deepep-env reads" in text
    assert e.accepted == "deepep-env/thing/v2, deepep-env/thing/v3, or upgrade deepep-env"
    assert not THING.accepts(data)


@pytest.mark.parametrize("data", [
    {"format": "deepep-env/thing/v1"},
    {"format": "deepep-env/thing/v0"},
    {"_meta": {"format": "deepep-env/thing", "version": 1}},
    {"_meta": {"format": "deepep-env/thing", "version": -1}},
])
def test_older_than_oldest_is_refused_with_rewrite_advice(data):
    e = _refusal(data)
    text = _assert_one_line(e)
    assert "is no longer read" in text and "newer" not in text
    assert e.accepted == "deepep-env/thing/v2, deepep-env/thing/v3 (write it again with this deepep-env)"
    assert not THING.accepts(data)


@pytest.mark.parametrize("data, shown", [
    ({"format": "something-else/v1"}, "'something-else/v1'"),
    ({"format": "deepep-env/other/v3"}, "'deepep-env/other/v3'"),
    ({"format": "deepep-env/thing"}, "'deepep-env/thing'"),            # a stamp without a version
    ({"_meta": {"format": "deepep-env/other", "version": 3}}, "{'format': 'deepep-env/other', 'version': 3}"),
    ({"_meta": {"format": "deepep-env/thing", "version": "3"}}, "{'format': 'deepep-env/thing', 'version': '3'}"),
    ({}, "none"),
    ({"envs": {}}, "none"),
    ({"format": None}, "none"),
    (None, "not a JSON object"),
    ([1, 2], "not a JSON object"),
    ("deepep-env/thing/v3", "not a JSON object"),
])
def test_not_ours_or_no_stamp_is_refused_naming_what_was_found(data, shown):
    e = _refusal(data)
    text = _assert_one_line(e)
    assert f"not a thing file (format {shown})" in text
    assert e.accepted == "deepep-env/thing/v2, deepep-env/thing/v3"
    assert not THING.accepts(data)


def test_what_was_found_is_cut_short_in_the_message():
    e = _refusal({"format": "x" * 10_000})
    assert len(str(e)) < 300


def test_field_names_where_the_stamp_lives():
    e = _refusal({"format": "deepep-env/thing/v9"}, field="# deepep-env-lock")
    _assert_one_line(e, field="# deepep-env-lock")


def test_missing_reads_a_document_from_before_stamps_as_that_version():
    # a dict with neither "format" nor "_meta": read as the version given (files from before stamps)
    assert THING.check({}, file=FILE, missing=2) == 2
    assert THING.check({"env": "x", "builds": {}}, file=FILE, missing=1) == 1   # `missing` is taken as given
    # ...but a stamp that is present and wrong is never read as `missing`
    for data in ({"format": None}, {"format": "something-else/v1"}, {"format": "deepep-env/thing/v9"},
                 {"_meta": "junk"}, {"_meta": {"format": "deepep-env/thing"}}):
        with pytest.raises(UserError):
            THING.check(data, file=FILE, missing=2)
    # ...nor is something that is not a JSON object
    for data in (None, [], "text"):
        e = _refusal(data, missing=2)
        assert "not a JSON object" in str(e)
    # accepts() knows nothing of `missing`: an unstamped document is not accepted
    assert not THING.accepts({})


def test_file_may_be_a_path_or_absent():
    from pathlib import Path

    with pytest.raises(UserError) as err:
        THING.check({"format": "deepep-env/thing/v9"}, file=Path(FILE))
    assert err.value.file == FILE
    with pytest.raises(UserError) as err:
        THING.check({"format": "deepep-env/thing/v9"}, file=None)
    assert str(err.value).startswith("format: thing file format deepep-env/thing/v9 is newer")


@pytest.mark.parametrize("fmt", ["deepep-env/lock-meta/v01", "deepep-env/lock-meta/v2\n"])
def test_a_stamp_is_spelled_exactly(fmt):
    assert read_stamp({"format": fmt}) is None
    assert not LOCK_META.accepts({"format": fmt})
    assert not LOCK_META.accepts({"format": " deepep-env/lock-meta/v2"})
