"""Secrets in URLs have one owner: ``channels.auth.url_secret`` decides whether a URL carries a
credential (userinfo, a credential-like query parameter, an anaconda.org/quetz ``/t/<token>/``
segment), ``redact`` scrubs them from text, and every consumer — the spec model (channels,
``publish_url``), the lock's channels, ``publish --to`` — refuses such a URL through that one
decision, in the same words, without repeating the secret.

Unit tests over url_secret/redact/check_url_has_no_secret, then the consumers. The end-to-end
``publish --to`` refusal with the session's token is in tests/publish/test_publish_secrets.py (its grep
of every file the session wrote covers it)."""
from __future__ import annotations

from pathlib import Path

import pytest

from cli_runner import cli_in_process
from deepep_env.base.channels.auth import REDACTED, check_url_has_no_secret, redact, url_secret
from deepep_env.base.errors import UserError

REPO = Path(__file__).resolve().parents[2]
SECRET = "dpep-url-S3CRET-4f1c"

# (id, URL, kind)
SECRET_URLS = [
    ("userinfo-user-password", f"https://user:{SECRET}@host.example/ch", "userinfo"),
    ("userinfo-token-as-user", f"https://{SECRET}@host.example/ch", "userinfo"),
    ("userinfo-empty-user", f"https://:{SECRET}@host.example/ch", "userinfo"),
    ("userinfo-port", f"http://u:{SECRET}@127.0.0.1:8080/ch", "userinfo"),
    ("userinfo-s3", f"s3://AKIA:{SECRET}@bucket/prefix", "userinfo"),
    ("query-token", f"https://host.example/ch?token={SECRET}", "query"),
    ("query-token-upper", f"https://host.example/ch?TOKEN={SECRET}", "query"),
    ("query-api_key", f"https://host.example/ch?api_key={SECRET}", "query"),
    ("query-apikey", f"https://host.example/ch?apikey={SECRET}", "query"),
    ("query-access_token-second", f"https://host.example/ch?page=2&access_token={SECRET}", "query"),
    ("query-password", f"https://host.example/ch?password={SECRET}", "query"),
    ("query-s3-presigned", f"https://bucket.s3.amazonaws.com/ch/linux-64/repodata.json?X-Amz-Algorithm=AWS4-HMAC-SHA256"
                           f"&X-Amz-Date=20261124T000000Z&X-Amz-Signature={SECRET}", "query"),
    ("query-s3-security-token", f"https://bucket.s3.amazonaws.com/ch?X-Amz-Security-Token={SECRET}", "query"),
    ("query-azure-sas-sig", f"https://acct.blob.core.windows.net/ch?sv=2024-01-01&sr=c&sig={SECRET}", "query"),
    ("query-semicolon", f"https://host.example/ch?a=1;token={SECRET}", "query"),
    ("query-file-url", f"file:///srv/channel?token={SECRET}", "query"),
    ("conda-token-anaconda", f"https://conda.anaconda.org/t/{SECRET}/my-channel", "conda-token"),
    ("conda-token-quetz", f"https://quetz.example/t/{SECRET}/get/channel", "conda-token"),
    ("conda-token-at-end", f"https://conda.anaconda.org/t/{SECRET}", "conda-token"),
]

CLEAN_URLS = [
    "https://conda.anaconda.org/conda-forge",
    "https://conda.deepep-env.example/h200/",
    "http://127.0.0.1:8080/chan",
    "https://[::1]:8080/chan",
    "s3://bucket/prefix",
    "file:///srv/channel",
    "file:///home/me/.deepep-env/channel/",
    # paths merely containing "t": in words, as the last segment, as a trailing empty segment
    "https://host.example/tools/test/t-shirts/chan",
    "https://host.example/at/tt/chan",
    "https://host.example/ch/t",
    "https://host.example/t/",
    "https://host.example/t",
    # query parameters that only look alike (words are split at - _ .)
    "https://host.example/ch?page=2",
    "https://host.example/ch?keyboard=us&monkey=1",
    "https://host.example/ch?tokens_left=3",
]


def _ids(rows):
    return [r[0] for r in rows]


# --------------------------------------------------------------------------------------------- url_secret


@pytest.mark.parametrize("case", SECRET_URLS, ids=_ids(SECRET_URLS))
def test_url_secret_finds_every_form(case):
    _, url, kind = case
    found = url_secret(url)
    assert found is not None and found.kind == kind
    # its words say what and where instead, and never carry the secret
    assert found.carries and found.instead and SECRET not in found.carries + found.instead


@pytest.mark.parametrize("url", CLEAN_URLS)
def test_url_secret_none_for_clean_urls(url):
    assert url_secret(url) is None
    assert redact(url) == url
    check_url_has_no_secret(url)   # no error


@pytest.mark.parametrize("url", ["file:///data/t/channel", "s3://bucket/t/channel"])
def test_url_secret_no_conda_token_in_a_local_or_s3_path(url):
    assert url_secret(url) is None


def test_url_secret_never_raises_on_urls_that_do_not_parse():
    # an unbalanced IPv6 bracket makes urlsplit raise: judged on its text instead
    assert url_secret(f"https://[::1/ch?token={SECRET}").kind == "query"
    assert url_secret(f"https://u:{SECRET}@[::1/ch").kind == "userinfo"
    assert url_secret("https://[::1/ch") is None
    for junk in ("", "not a url", "://", "https://", "?token", "@"):
        url_secret(junk)


def test_one_wording_per_kind():
    kinds = {url_secret(u).kind: url_secret(u) for _, u, _ in SECRET_URLS}
    assert set(kinds) == {"userinfo", "query", "conda-token"}
    assert kinds["userinfo"].carries == "credentials (user:token@)"
    # every URL of a kind gets the very same object: one decision, one wording
    for _, url, kind in SECRET_URLS:
        assert url_secret(url) is kinds[kind]


# --------------------------------------------------------------------------------------------- redact


def _redact_cases():
    for cid, url, kind in SECRET_URLS:
        yield pytest.param(url, id=cid)


@pytest.mark.parametrize("url", list(_redact_cases()))
def test_redact_scrubs_the_secret_of_every_form(url, no_creds):
    out = redact(f"error: cannot reach {url} (retrying)")
    assert SECRET not in out and REDACTED in out
    assert out.startswith("error: cannot reach ") and out.endswith(" (retrying)")


def test_redact_keeps_what_is_not_secret(no_creds):
    assert redact(f"https://me:{SECRET}@host.example/ch") == "https://me:***@host.example/ch"   # the user stays
    assert redact(f"https://host.example/ch?page=2&token={SECRET}&x=1") == "https://host.example/ch?page=2&token=***&x=1"
    assert redact(f"https://conda.anaconda.org/t/{SECRET}/my-channel") == "https://conda.anaconda.org/t/***/my-channel"
    s3 = f"https://b.s3.amazonaws.com/k?X-Amz-Date=20261124T000000Z&X-Amz-Signature={SECRET}"
    assert redact(s3) == "https://b.s3.amazonaws.com/k?X-Amz-Date=20261124T000000Z&X-Amz-Signature=***"
    # several URLs in one message
    two = f"https://u:{SECRET}@a.example/x and https://b.example/y?sig={SECRET}"
    assert redact(two) == "https://u:***@a.example/x and https://b.example/y?sig=***"


# --------------------------------------------------------------------------------------------- check_url_has_no_secret


@pytest.mark.parametrize("case", SECRET_URLS, ids=_ids(SECRET_URLS))
def test_check_url_refuses_in_one_line_without_the_secret(case, no_creds):
    _, url, kind = case
    with pytest.raises(UserError) as err:
        check_url_has_no_secret(url, field="--to")
    e = err.value
    text = str(e)
    assert SECRET not in text and "\n" not in text
    assert e.field == "--to" and e.exit_code == 2 and text.startswith("--to: the URL ")
    found = url_secret(url)
    assert f"carries {found.carries}" in e.message and e.accepted == found.instead
    if kind == "userinfo":   # the whole userinfo goes, the user name too (it may be the token)
        assert "://***@" in text


# --------------------------------------------------------------------------------------------- consumers: one decision, one wording

GOOD = (REPO / "env_specs" / "h200-nvlink.toml").read_text()
SHARED = [c for c in SECRET_URLS if c[0] in ("userinfo-user-password", "userinfo-token-as-user", "query-token",
                                             "query-api_key", "conda-token-anaconda")]


def _spec_project(tmp_path: Path, text: str) -> tuple[Path, Path]:
    proj = tmp_path / "proj"
    (proj / "env_specs").mkdir(parents=True)
    (proj / "recipes").symlink_to(REPO / "recipes")
    f = proj / "env_specs" / "h200-nvlink.toml"
    f.write_text(text)
    return proj, f


@pytest.mark.parametrize("where", ["channels", "publish_url"])
@pytest.mark.parametrize("case", SHARED, ids=_ids(SHARED))
def test_spec_refuses_a_secret_url_in_the_shared_words(case, where, tmp_path, capsys, no_creds):
    _, url, kind = case
    if where == "channels":
        text = GOOD.replace('channels = ["local"]', f'channels = ["local", "{url}"]', 1)
    else:
        text = GOOD.replace('publish_url = "https://conda.deepep-env.example/h200"', f'publish_url = "{url}"', 1)
    assert url in text
    proj, f = _spec_project(tmp_path, text)
    found = url_secret(url)
    for argv in (["spec", "validate", f], ["plan", "h200-nvlink", "--demo-host", "gcp-b200-demo"]):
        rc, out, err = cli_in_process(capsys, *argv, "--project", proj)
        assert rc == 2 and out == "", err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert str(f) in err and f": {where}: " in err
        assert f"carries {found.carries}" in err and found.instead in err
        assert SECRET not in err
        if kind == "userinfo":
            assert "carries credentials" in err


@pytest.mark.parametrize("case", SHARED, ids=_ids(SHARED))
def test_lock_channels_and_publish_refuse_in_the_same_words(case, tmp_path, capsys, no_creds):
    from deepep_env.base.channels.urls import resolve_channels

    _, url, _ = case
    found = url_secret(url)
    with pytest.raises(UserError) as err:
        resolve_channels(["local", url], publish_url=None, local_dir=tmp_path / "channel", for_check=True)
    assert err.value.field == "channels" and f"carries {found.carries}" in str(err.value)
    assert SECRET not in str(err.value)
    with pytest.raises(UserError) as err:
        resolve_channels(["local"], publish_url=url, local_dir=tmp_path / "channel", for_check=True)
    assert err.value.field == "publish_url" and SECRET not in str(err.value)

    rc, out, err_text = cli_in_process(capsys, "publish", "--to", url, "--package", tmp_path / "none.conda")
    assert rc == 2 and out == "" and err_text.count("\n") == 1
    assert err_text.startswith("deepep-env: error: --to: ") and SECRET not in err_text
    # the words the spec uses (the publish CLI redacts its line once more: "/t/<token>/" reads "/t/***/")
    assert f"carries {redact(found.carries)}" in err_text


# --------------------------------------------------------------------------------------------- what reads a lock

LOCK_SECRET_FORMS = [
    ("userinfo", f"https://u:{SECRET}@conda.deepep-env.example/h200/"),
    ("token-as-user", f"https://{SECRET}@conda.deepep-env.example/h200/"),
    ("query-token", f"https://conda.deepep-env.example/h200/?token={SECRET}"),
    ("conda-token", f"https://conda.deepep-env.example/t/{SECRET}/h200/"),
]


@pytest.mark.parametrize("form", LOCK_SECRET_FORMS, ids=_ids(LOCK_SECRET_FORMS))
def test_reading_a_lock_with_a_credential_in_a_channel_never_prints_it(form, tmp_path, capsys, no_creds):
    _, url = form
    text = (REPO / "pixi.lock").read_text()
    old_line = "    - url: https://conda.deepep-env.example/h200/\n"
    assert old_line in text
    lock = tmp_path / "pixi.lock"
    lock.write_text(text.replace(old_line, f"    - url: {url}\n"))
    printed = []
    for argv in (["diff", REPO / "pixi.lock", lock], ["diff", REPO / "pixi.lock", lock, "--json"],
                 ["lock", "h200-nvlink", "--check", "--project", REPO, "--output", lock],
                 ["lock", "h200-nvlink", "--check", "--project", REPO, "--output", lock, "--json"],
                 ["pixi", "verdict", "--manifest", REPO / "pixi.toml", "--lock", lock]):
        rc, out, err = cli_in_process(capsys, *argv)
        assert "Traceback" not in err
        # refused on read: one line naming the lock, before any report could print the URL
        assert rc == 2 and str(lock) in err and len(err.strip().splitlines()) == 1, err
        printed.append(out + err)
    assert not [p for p in printed if SECRET in p], "\n".join(printed)


def test_publish_to_with_a_token_in_the_fragment_does_not_print_it(tmp_path, capsys, no_creds, pkgs):
    chan = tmp_path / "chan"
    url = f"{chan.as_uri()}#access_token={SECRET}"
    for extra in ((), ("--json",)):
        rc, out, err = cli_in_process(capsys, "publish", "--to", url, "--package", pkgs.linux, *extra)
        assert SECRET not in out + err, out + err


@pytest.mark.parametrize("url", [
    f"https://host.example/ch?pw={SECRET}",
    f"https://host.example/ch;token={SECRET}/linux-64",
    f"https://host.example/ch#access_token={SECRET}",
])
def test_url_secret_reads_short_names_path_params_and_the_fragment(url, no_creds):
    assert url_secret(url) is not None and url_secret(url).kind == "query"
    assert SECRET not in redact(url)


def test_the_refusal_wording_survives_redaction(no_creds):
    # the CLI passes every error line through redact again: the words must not turn into ***
    secret = url_secret(f"https://conda.example/t/{SECRET}/ch")
    assert redact(secret.carries) == secret.carries and "<token>" in secret.carries
