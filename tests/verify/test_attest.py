"""Signed test records (issue 54): keys, the in-toto Test Result statement in a DSSE envelope, trust
policies in `verified`, `plan`, `install --require-verified`, and the envelope shipped to a file channel."""
from __future__ import annotations

import base64
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from cli_runner import cli_in_process
from verify_fixtures import NOW, DEEPEP_OUTPUT, rebuild_package, proj  # noqa: F401 (proj: the fixture)

from deepep_env.base.errors import UserError
from deepep_env.formats.lockfile import read_lock
from deepep_env.verify.attest import (PAYLOAD_TYPE, PREDICATE_TYPE, STATEMENT_TYPE, check_signature, envelope,
                                      envelope_path, pae, sign_record, statement)
from deepep_env.verify.keys import load_signer, load_trust, new_key
from deepep_env.verify.records import load_records, read_record, record_test

ENV = "h200-nvlink"
TWO_RANKS = ["--num-processes", "2"]


def _key(tmp_path: Path, name: str = "ci") -> tuple[Path, Path]:
    return new_key(tmp_path / "keys" / name if (tmp_path / "keys").is_dir() else _mkdir(tmp_path / "keys") / name)


def _mkdir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def _signed(proj, host_tree, tmp_path, key=None, **kw):
    """A passing two-rank record of ENV, signed by ``key`` (a new key ``ci`` by default): (record, key, pub)."""
    priv, pub = key or _key(tmp_path)
    path = record_test(proj, ENV, "intranode", TWO_RANKS, 0, DEEPEP_OUTPUT, root=str(host_tree("gcp-b200")), now=NOW, **kw)
    sign_record(path, load_signer(priv), proj.pixi_lock)
    return path, priv, pub


def _payload(path: Path) -> dict:
    env = json.loads(envelope_path(path).read_text())
    return json.loads(base64.b64decode(env["payload"]))


# -- keys ------------------------------------------------------------------------------------------
def test_key_new_writes_a_private_file_0600_and_a_trust_file(tmp_path, capsys):
    rc, out, err = cli_in_process(capsys, "key", "new", str(tmp_path / "ci.key"), "--json")
    assert rc == 0, err
    info = json.loads(out)
    priv, pub = Path(info["key"]), Path(info["public"])
    assert stat.S_IMODE(priv.stat().st_mode) == 0o600 and pub == tmp_path / "ci.key.pub"
    (line,) = pub.read_text().splitlines()
    assert line.startswith("ed25519 ") and line.endswith(" ci.key") and len(info["keyid"]) == 64
    assert load_trust(pub).keys[0].keyid == info["keyid"] == load_signer(priv).public.keyid
    rc, _, err = cli_in_process(capsys, "key", "new", str(priv))              # never overwritten
    assert rc != 0 and "already exists" in err and len(err.strip().splitlines()) == 1


def test_a_private_key_readable_by_others_is_refused(tmp_path):
    priv, _ = _key(tmp_path)
    os.chmod(priv, 0o640)
    with pytest.raises(UserError, match="readable by group or other .mode 0640") as exc:
        load_signer(priv)
    assert "\n" not in str(exc.value)
    os.chmod(priv, 0o600)
    (tmp_path / "not-a-key").write_text("hello\n")
    os.chmod(tmp_path / "not-a-key", 0o600)
    with pytest.raises(UserError, match="not an unencrypted PEM private key"):
        load_signer(tmp_path / "not-a-key")


def test_trust_file_lines(tmp_path):
    _, pub_a = _key(tmp_path, "a")
    _, pub_b = _key(tmp_path, "b")
    trust = tmp_path / "trust"
    trust.write_text("# the team's keys\n\n" + pub_a.read_text() + pub_b.read_text().replace(" b\n", "\n"))
    keys = load_trust(trust).keys
    assert keys[0].name == "a" and keys[1].name == keys[1].keyid[:16]          # no name: the keyid's start
    trust.write_text("ed25519 AAAA x\n")
    with pytest.raises(UserError, match="not 32 bytes"):
        load_trust(trust)
    trust.write_text("# nothing\n")
    with pytest.raises(UserError, match="holds no key"):
        load_trust(trust)


# -- the statement and its envelope ----------------------------------------------------------------
def test_round_trip_statement_fields(proj, host_tree, tmp_path):
    path, priv, pub = _signed(proj, host_tree, tmp_path)
    assert envelope_path(path).name == path.name[:-len(".json")] + ".intoto.jsonl"
    env = json.loads(envelope_path(path).read_text())
    assert env["payloadType"] == PAYLOAD_TYPE and env["signatures"][0]["keyid"] == load_trust(pub).keys[0].keyid
    st = _payload(path)
    assert st["_type"] == STATEMENT_TYPE and st["predicateType"] == PREDICATE_TYPE
    rec = json.loads(path.read_text())
    pkgs = read_lock(proj.pixi_lock).env(ENV).packages[rec["lock_platform"]]
    names = {s["name"]: s["digest"]["sha256"] for s in st["subject"]}
    assert len(st["subject"]) == len(pkgs) + 2
    assert names[f"pixi.lock:{ENV}/{rec['lock_platform']}"] == rec["digest"][len("sha256:"):]
    assert all(p.url.rsplit("/", 1)[-1] in names or p.file_name in names for p in pkgs)
    pred = st["predicate"]
    assert pred["result"] == "PASSED" and pred["passedTests"] == ["intranode"] and pred["failedTests"] == []
    conf = {c["name"]: c for c in pred["configuration"]}
    assert conf["pixi.lock"]["annotations"]["digest"] == rec["digest"]
    assert conf["test:intranode"]["annotations"]["args"] == TWO_RANKS and conf["host"]["annotations"]["platform"] == "gcp-b200"
    assert "activation" not in conf
    key_bytes = priv.read_bytes()
    for f in (path, envelope_path(path)):                     # the key never enters the record or its envelope
        assert b"PRIVATE" not in f.read_bytes() and key_bytes not in f.read_bytes()
    check = check_signature(read_record(path), load_trust(pub))
    assert check.ok and check.signer == "ci" and check.label() == "signed by ci"
    # any DSSE verifier: PAE over the payload, ed25519 over the raw public key of the trust line
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    raw = base64.b64decode(pub.read_text().split()[1])
    Ed25519PublicKey.from_public_bytes(raw).verify(base64.b64decode(env["signatures"][0]["sig"]),
                                                   pae(env["payloadType"], base64.b64decode(env["payload"])))


def test_the_activation_of_a_v2_record_is_in_the_configuration(proj, host_tree, tmp_path):
    path = record_test(proj, ENV, "intranode", TWO_RANKS, 0, DEEPEP_OUTPUT, root=str(host_tree("gcp-b200")), now=NOW)
    rec = json.loads(path.read_text())
    rec["activation"] = {"overlay": "sha256:abc"}
    st = statement(path.name, b"x", rec, [])
    assert {"name": "activation", "annotations": {"overlay": "sha256:abc"}} in st["predicate"]["configuration"]


def test_a_failed_run_is_a_failed_statement(proj, host_tree, tmp_path):
    priv, pub = _key(tmp_path)
    path = record_test(proj, ENV, "intranode", [], 1, DEEPEP_OUTPUT, root=str(host_tree("gcp-b200")), now=NOW)
    sign_record(path, load_signer(priv), proj.pixi_lock)
    assert _payload(path)["predicate"]["result"] == "FAILED" and _payload(path)["predicate"]["failedTests"] == ["intranode"]


def test_tampered_other_key_unsigned_other_record_are_not_verified(proj, host_tree, tmp_path):
    path, priv, pub = _signed(proj, host_tree, tmp_path)
    trust = load_trust(pub)
    # one changed figure
    text = path.read_text()
    assert '"dispatch_fp8_gbps": 324.72' in text
    path.write_text(text.replace('"dispatch_fp8_gbps": 324.72', '"dispatch_fp8_gbps": 424.72'))
    check = check_signature(read_record(path), trust)
    assert not check.ok and "another record" in check.why
    path.write_text(text)
    assert check_signature(read_record(path), trust).ok
    # another key
    _, other_pub = _key(tmp_path, "other")
    check = check_signature(read_record(path), load_trust(other_pub))
    assert check.state == "untrusted" and "does not hold" in check.why
    # a signature over another record, copied beside this one
    other = record_test(proj, ENV, "low-latency", TWO_RANKS, 0, "[rank 0] Dispatch + combine bandwidth: 1 GB/s, avg_t=2 us\n",
                        root=str(host_tree("gcp-b200")), now=NOW)
    shutil.copy(envelope_path(path), envelope_path(other))
    check = check_signature(read_record(other), trust)
    assert not check.ok and "another record" in check.why
    # no signature
    envelope_path(path).unlink()
    check = check_signature(read_record(path), trust)
    assert check.state == "unsigned" and check.label() == "unsigned"
    # the envelope's payload changed: the signature no longer verifies
    sign_record(path, load_signer(priv), proj.pixi_lock)
    env = json.loads(envelope_path(path).read_text())
    env["payload"] = base64.b64encode(base64.b64decode(env["payload"]).replace(b"PASSED", b"PASSEX")).decode()
    envelope_path(path).write_text(json.dumps(env) + "\n")
    check = check_signature(read_record(path), trust)
    assert check.state == "invalid" and "does not verify" in check.why


def test_a_statement_for_another_digest_is_not_verified(proj, host_tree, tmp_path):
    path, priv, pub = _signed(proj, host_tree, tmp_path)
    raw = path.read_bytes()
    rec = json.loads(raw)
    st = statement(path.name, raw, {**rec, "digest": "sha256:" + "0" * 64}, [])   # this record's bytes, another digest
    payload = json.dumps(st).encode()
    envelope_path(path).write_text(json.dumps(envelope(payload, load_signer(priv))) + "\n")
    check = check_signature(read_record(path), load_trust(pub))
    assert not check.ok and "another lock digest" in check.why


@pytest.mark.parametrize("content, why", [
    (lambda good: good[: len(good) // 2], "not valid JSON"),
    (lambda good: "", "the attestation is empty"),
    (lambda good: '{"payloadType": "text/plain", "payload": "", "signatures": []}\n', "payloadType"),
    (lambda good: good.replace('"payload":"', '"payload":"!'), "not base64"),
])
def test_a_broken_envelope_is_a_one_line_why(proj, host_tree, tmp_path, content, why):
    path, _, pub = _signed(proj, host_tree, tmp_path)
    ep = envelope_path(path)
    ep.write_text(content(ep.read_text()))
    check = check_signature(read_record(path), load_trust(pub))
    assert check.state == "invalid" and why in check.why and "\n" not in check.why


def test_a_signed_payload_that_is_not_json(proj, host_tree, tmp_path):
    path, priv, pub = _signed(proj, host_tree, tmp_path)
    envelope_path(path).write_text(json.dumps(envelope(b"\x00not json{", load_signer(priv))) + "\n")
    check = check_signature(read_record(path), load_trust(pub))
    assert check.state == "invalid" and check.why == "the signed payload is not JSON"


def test_a_100_mb_envelope_is_refused_without_reading_it(proj, host_tree, tmp_path):
    path, _, pub = _signed(proj, host_tree, tmp_path)
    with open(envelope_path(path), "wb") as f:
        f.truncate(100 << 20)                                  # sparse: 100 MB of size, no disk
    check = check_signature(read_record(path), load_trust(pub))
    assert check.state == "invalid" and "larger than" in check.why


# -- trust policies in verified, plan, install ---------------------------------------------------
def _cell(out: str) -> dict:
    return {c["test"]: c for c in json.loads(out)["cells"]}["intranode"]


def test_verified_and_plan_under_a_trust_file(proj, host_tree, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "500")                       # the table's cells on one line each
    path, priv, pub = _signed(proj, host_tree, tmp_path)
    root = str(host_tree("gcp-b200"))
    rc, out, err = cli_in_process(capsys, "verified", "--json", "--trust", str(pub))
    assert rc == 0, err
    cell = _cell(out)
    assert cell["verified"] and cell["signature"]["label"] == "signed by ci" and cell["trust"] == str(pub)
    rc, out, _ = cli_in_process(capsys, "verified")                             # no policy: signed by its keyid
    assert "signed by key " in out
    rc, out, _ = cli_in_process(capsys, "plan", ENV, "--root", root, "--trust", str(pub))
    assert "verified: yes: a passing record for digest" in out and "signed by ci" in out
    # another key's trust file: not verified, and why
    _, other_pub = _key(tmp_path, "other")
    rc, out, _ = cli_in_process(capsys, "verified", "--json", "--trust", str(other_pub))
    cell = _cell(out)
    assert not cell["verified"] and "does not hold" in cell["untrusted_why"]
    rc, out, _ = cli_in_process(capsys, "verified", "--trust", str(other_pub))
    assert "pass, not trusted" in out and "not verified: signed by a key the trust file" in out
    rc, out, _ = cli_in_process(capsys, "plan", ENV, "--root", root, "--trust", str(other_pub), "--json")
    v = json.loads(out)["verified"]
    assert v["status"] == "untrusted" and "does not hold" in v["untrusted_why"]
    # unsigned: no policy keeps the old verdict, and says unsigned
    envelope_path(path).unlink()
    rc, out, _ = cli_in_process(capsys, "verified", "--json")
    cell = _cell(out)
    assert cell["verified"] and cell["signature"]["label"] == "unsigned"
    rc, out, _ = cli_in_process(capsys, "verified", "--json", "--trust", str(pub))
    assert not _cell(out)["verified"] and "no signature" in _cell(out)["untrusted_why"]


def test_the_spec_names_the_trust_file(proj, host_tree, tmp_path, capsys):
    from deepep_env.verify.matrix import plan_verification

    path, priv, pub = _signed(proj, host_tree, tmp_path)
    _, other_pub = _key(tmp_path, "other")
    shutil.copy(other_pub, proj.root / "trusted-keys")
    spec = proj.spec_path(ENV)
    spec.write_text(spec.read_text().replace("ranks = 2\n", 'ranks = 2\ntrust = "trusted-keys"\n'))
    assert plan_verification(proj, ENV)["status"] == "untrusted"
    with open(proj.root / "trusted-keys", "a") as f:         # key rotation: add the CI key
        f.write(pub.read_text())
    assert plan_verification(proj, ENV)["status"] == "verified"
    shutil.copy(other_pub, proj.root / "trusted-keys")        # ... and remove it: its records stop verifying
    assert plan_verification(proj, ENV)["status"] == "untrusted"
    (proj.root / "trusted-keys").unlink()                    # a named file that is gone: refused, never no policy
    rc, _, err = cli_in_process(capsys, "verified", "--json")
    assert rc != 0 and "trusted-keys" in err


def test_install_require_verified_refuses_before_the_prefix(proj, host_tree, tmp_path, capsys):
    prefix = tmp_path / "prefix"
    rc, _, err = cli_in_process(capsys, "install", ENV, "--prefix", str(prefix), "--require-verified")
    assert rc != 0 and "not verified for the lock's digest" in err and "no passing record" in err
    assert len(err.strip().splitlines()) == 1 and not prefix.exists()
    path, priv, pub = _signed(proj, host_tree, tmp_path)
    _, other_pub = _key(tmp_path, "other")
    rc, _, err = cli_in_process(capsys, "install", ENV, "--prefix", str(prefix), "--require-verified",
                                "--trust", str(other_pub))
    assert rc != 0 and "no passing record signed by a key of" in err and not prefix.exists()
    rc, _, err = cli_in_process(capsys, "install", ENV, "--prefix", str(prefix), "--trust", str(pub))
    assert rc != 0 and "--require-verified" in err and not prefix.exists()
    from deepep_env.verify.matrix import require_verified

    assert require_verified(proj, ENV, load_trust(pub))["status"] == "verified"
    other_lock = tmp_path / "other.lock"
    shutil.copy(proj.pixi_lock, other_lock)
    rebuild_package(other_lock, ENV, "deep-ep")
    with pytest.raises(UserError, match="another digest than the verified one"):
        require_verified(proj, ENV, load_trust(pub), other_lock)


# -- signing from the commands ---------------------------------------------------------------------
def test_record_sign_and_the_environment_variable(proj, host_tree, tmp_path, capsys, monkeypatch):
    priv, pub = _key(tmp_path)
    log = tmp_path / "test.log"
    log.write_text(DEEPEP_OUTPUT)
    args = ["record", ENV, "--test", "intranode", "--exit-code", "0", "--log", str(log),
            "--root", str(host_tree("gcp-b200")), "--json"]
    rc, out, err = cli_in_process(capsys, *args, "--sign", str(priv), "--", *TWO_RANKS)
    assert rc == 0, err
    rec = json.loads(out)
    assert Path(rec["attestation"]).is_file() and check_signature(read_record(Path(rec["path"])), load_trust(pub)).ok
    monkeypatch.setenv("DEEPEP_ENV_SIGNING_KEY", str(priv))
    rc, out, err = cli_in_process(capsys, *args)
    assert rc == 0, err and json.loads(out)["attestation"]
    os.chmod(priv, 0o644)                                      # refused before anything is written
    before = len(load_records(proj)[0])
    rc, _, err = cli_in_process(capsys, *args)
    assert rc != 0 and "readable by group or other" in err and len(load_records(proj)[0]) == before


def test_task_run_signs_its_record(proj, host_tree, tmp_path, capsys):
    from deepep_env.views.tasks import TaskPlan, TaskStep, run_task

    priv, pub = _key(tmp_path)
    prog = tmp_path / "t.sh"
    prog.write_text("cat <<'EOF'\n" + DEEPEP_OUTPUT + "EOF\necho \"key=${DEEPEP_ENV_SIGNING_KEY:-none}\"\n")
    plan = TaskPlan(task="deepep-test-intranode", environment=ENV, spec=ENV, prefix=str(tmp_path / "nope"),
                    args=TWO_RANKS, steps=[TaskStep("deepep-test-intranode", f"bash {prog}", str(tmp_path), {})])
    env = dict(os.environ, DEEPEP_ENV_HOST_ROOT=str(host_tree("gcp-b200")), DEEPEP_ENV_NO_OVERLAY="1",
               DEEPEP_ENV_SIGNING_KEY=str(priv))
    assert run_task(proj, plan, base_env=env, install=False, signer=load_signer(priv)) == 0
    out = capsys.readouterr()
    assert "key=none" in out.out and "signed by ci" in out.err          # the test never sees the key's path
    (rec,), _ = load_records(proj)
    assert check_signature(rec, load_trust(pub)).ok


# -- the channel -----------------------------------------------------------------------------------
def test_publish_ships_the_envelope_and_verified_checks_it_there(proj, host_tree, tmp_path, capsys):
    from deepep_env.publish.model import PublishReport
    from deepep_env.verify.shipping import ship_records

    path, priv, pub = _signed(proj, host_tree, tmp_path)
    chan = tmp_path / "chan"
    report = PublishReport(ENV, str(chan), "file", chan.as_uri())
    rep = ship_records("file", chan, ENV, proj.root, report)
    shipped = chan / "verified" / ENV / envelope_path(path).name
    assert {r["file"] for r in rep.records} == {f"verified/{ENV}/{path.name}", f"verified/{ENV}/{shipped.name}"}
    assert shipped.read_bytes() == envelope_path(path).read_bytes()
    rep = ship_records("file", chan, ENV, proj.root, PublishReport(ENV, str(chan), "file", chan.as_uri()))
    assert {r["status"] for r in rep.records} == {"already-present"}
    rc, out, err = cli_in_process(capsys, "verified", "--channel", chan.as_uri(), "--trust", str(pub), "--json")
    assert rc == 0, err and _cell(out)["verified"]
    assert _cell(out)["verified"] and _cell(out)["signature"]["label"] == "signed by ci"
    # a record changed in the channel no longer verifies there
    (chan / "verified" / ENV / path.name).write_text(path.read_text().replace("324.72", "424.72"))
    rc, out, _ = cli_in_process(capsys, "verified", "--channel", str(chan), "--trust", str(pub), "--json")
    assert not _cell(out)["verified"] and "another record" in _cell(out)["untrusted_why"]


def test_task_refuses_a_bad_key_before_the_test_runs(proj, tmp_path, capsys):
    priv, _ = _key(tmp_path)
    os.chmod(priv, 0o604)
    rc, _, err = cli_in_process(capsys, "task", "deepep-test-intranode", "-e", "gcp-b200", "--sign", str(priv))
    assert rc != 0 and "readable by group or other" in err and len(err.strip().splitlines()) == 1
    assert not (proj.root / "verified").exists() and not (proj.root / ".pixi").exists()


def test_no_cryptography_is_one_line_not_a_traceback(monkeypatch, tmp_path):
    """Round nineteen: a GPU machine's carried site had no cryptography and `prove --sign` died in a traceback;
    it is one line naming the package and how to get it."""
    import importlib.util

    from deepep_env.base.errors import UserError
    from deepep_env.verify.keys import load_signer

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cryptography" else real(name, *a))
    with pytest.raises(UserError, match="needs the cryptography package") as err:
        load_signer(tmp_path / "k")
    assert "\n" not in str(err.value) and "carry-requirements.txt" in str(err.value)
