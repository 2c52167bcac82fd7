"""Signed test records (issue 54): an in-toto Test Result attestation beside each record, offline.

``verified/ENV/<record>.json`` gets ``verified/ENV/<record>.intoto.jsonl``: one line, a DSSE envelope
(``payloadType`` ``application/vnd.in-toto+json``, signed over DSSE's PAE with an ed25519 key,
``keyid`` = sha256 of the raw public key) whose payload is an in-toto Statement v1 with the Test
Result v0.1 predicate:

- ``subject``: every package of the env's lock section by sha256 (name: the package file name), the
  lock section's digest (name ``pixi.lock:<lock env>/<lock platform>``) and the record file itself
  (its sha256: one changed byte of the record, a figure included, breaks verification);
- ``predicate``: ``result`` (``PASSED``: the record counts as a pass; ``WARNED``: it says passed but
  its output's evidence does not count; ``FAILED``), ``configuration`` (resource descriptors: the lock,
  the test and its arguments, the host fingerprint, the activation when the record has one),
  ``passedTests``/``failedTests``.

:func:`check_signature` answers, for one record and a trust policy, whether a trusted key signed a
statement over exactly this record and its digest; anything else is a one-line why. The envelope is
read bounded (:data:`MAX_ENVELOPE_BYTES`) and checked field by field. The key never enters a record,
an envelope (only its keyid), a log or a channel.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from deepep_env.base.atomic import write_text
from deepep_env.base.errors import UserError
from deepep_env.base.readfile import decode, parse_json, read_bounded
from deepep_env.formats.lockfile import LockedPackage, read_lock
from deepep_env.lock.digest import section_digest
from deepep_env.verify.keys import Signer, TrustPolicy
from deepep_env.verify.records import MAX_RECORD_BYTES, Record
from deepep_env.verify.verdict import counts_as_pass

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://in-toto.io/attestation/test-result/v0.1"
SUFFIX = ".intoto.jsonl"
MAX_ENVELOPE_BYTES = 4 << 20       # a statement names every package of one lock section: tens of KiB
MAX_SIGNATURES = 16
_ACCEPT = "a DSSE envelope (JSON, one a line) that `deepep-env record/task --sign` wrote"


def envelope_path(record: Path) -> Path:
    """``<record>.intoto.jsonl`` beside the record (``x.json`` → ``x.intoto.jsonl``)."""
    stem = record.name[:-len(".json")] if record.name.endswith(".json") else record.name
    return record.with_name(stem + SUFFIX)


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: what is signed."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def lock_subject_name(rec: dict[str, Any]) -> str:
    return f"pixi.lock:{rec.get('lock_env')}/{rec.get('lock_platform')}"


def package_file(p: LockedPackage) -> str:
    return p.file_name or (p.url.rsplit("/", 1)[-1] if p.url else f"{p.name}-{p.version}-{p.build}")


def result_of(rec: dict[str, Any]) -> str:
    if counts_as_pass(rec):
        return "PASSED"
    return "WARNED" if rec.get("passed") is True else "FAILED"


def _configuration(rec: dict[str, Any]) -> list[dict[str, Any]]:
    digest = rec.get("digest")
    lock: dict[str, Any] = {"name": "pixi.lock", "annotations": {
        "env": rec.get("env"), "lock_env": rec.get("lock_env"), "lock_platform": rec.get("lock_platform"), "digest": digest}}
    if isinstance(digest, str) and digest.startswith("sha256:"):
        lock["digest"] = {"sha256": digest[len("sha256:"):]}
    out = [lock,
           {"name": f"test:{rec.get('test')}", "annotations": {"test": rec.get("test"), "args": rec.get("args"),
                                                               "ranks": rec.get("ranks"), "gpus": rec.get("gpus")}},
           {"name": "host", "annotations": rec.get("host") or {}}]
    if rec.get("activation") is not None:     # record v2 (issue "a record proves what ran")
        out.append({"name": "activation", "annotations": rec.get("activation")})
    return out


def statement(record_name: str, record_bytes: bytes, rec: dict[str, Any],
              packages: Sequence[LockedPackage]) -> dict[str, Any]:
    """The in-toto Statement v1 (Test Result v0.1) over one record and its lock section's packages."""
    subjects = [{"name": package_file(p), "digest": {"sha256": p.sha256.lower()}} for p in packages if p.sha256]
    digest = rec.get("digest")
    if isinstance(digest, str) and digest.startswith("sha256:"):
        subjects.append({"name": lock_subject_name(rec), "digest": {"sha256": digest[len("sha256:"):]}})
    subjects.append({"name": record_name, "digest": {"sha256": hashlib.sha256(record_bytes).hexdigest()}})
    result = result_of(rec)
    test = str(rec.get("test"))
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "result": result,
            "configuration": _configuration(rec),
            "passedTests": [test] if result == "PASSED" else [],
            "warnedTests": [test] if result == "WARNED" else [],
            "failedTests": [test] if result == "FAILED" else [],
        },
    }


def envelope(payload: bytes, signer: Signer) -> dict[str, Any]:
    sig = signer.sign(pae(PAYLOAD_TYPE, payload))
    return {"payloadType": PAYLOAD_TYPE, "payload": base64.b64encode(payload).decode("ascii"),
            "signatures": [{"keyid": signer.public.keyid, "sig": base64.b64encode(sig).decode("ascii")}]}


def locked_packages(lock_path: Path, rec: dict[str, Any]) -> list[LockedPackage]:
    """The packages of the record's lock section, when that section's digest is the record's; else none."""
    if not rec.get("digest"):
        return []
    try:
        e = read_lock(lock_path).env(str(rec.get("lock_env")))
    except UserError:
        return []
    pkgs = list(e.packages.get(str(rec.get("lock_platform")), [])) if e is not None else []
    return pkgs if pkgs and section_digest(pkgs) == rec["digest"] else []


def sign_record(path: Path, signer: Signer, lock_path: Path) -> Path:
    """Write ``<record>.intoto.jsonl`` beside the record at ``path``: the signed statement over it."""
    raw = read_bounded(path, MAX_RECORD_BYTES, accepted="a JSON test record")
    rec = parse_json(decode(raw, path, what="test record"), path, accepted="a test record (JSON)")
    if not isinstance(rec, dict):
        raise UserError("not a test record", file=path, accepted="a JSON object")
    st = statement(path.name, raw, rec, locked_packages(lock_path, rec))
    payload = json.dumps(st, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return write_text(envelope_path(path), json.dumps(envelope(payload, signer), separators=(",", ":")) + "\n")


# -- verification ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Signature:
    keyid: str
    sig: bytes


@dataclass(frozen=True)
class Envelope:
    payload_type: str
    payload: bytes
    signatures: tuple[Signature, ...]


def _b64(value: Any, path: Path, what: str) -> bytes:
    if not isinstance(value, str):
        raise UserError(f"the envelope's {what} is not a string", file=path, accepted=_ACCEPT)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise UserError(f"the envelope's {what} is not base64", file=path, accepted=_ACCEPT) from None


def parse_envelope(line: str, path: Path) -> Envelope:
    env = parse_json(line, path, accepted=_ACCEPT)
    if not isinstance(env, dict):
        raise UserError("not a DSSE envelope (not a JSON object)", file=path, accepted=_ACCEPT)
    if env.get("payloadType") != PAYLOAD_TYPE:
        raise UserError(f"the envelope's payloadType is not {PAYLOAD_TYPE}", file=path, accepted=_ACCEPT)
    sigs = env.get("signatures")
    if not isinstance(sigs, list) or not sigs or len(sigs) > MAX_SIGNATURES:
        raise UserError(f"the envelope has no signatures list (1 to {MAX_SIGNATURES})", file=path, accepted=_ACCEPT)
    out = []
    for s in sigs:
        if not isinstance(s, dict) or not isinstance(s.get("keyid", ""), str):
            raise UserError("a signature of the envelope is not {keyid, sig}", file=path, accepted=_ACCEPT)
        out.append(Signature(str(s.get("keyid", "")), _b64(s.get("sig"), path, "sig")))
    return Envelope(PAYLOAD_TYPE, _b64(env.get("payload"), path, "payload"), tuple(out))


def read_envelopes(path: Path) -> list[Envelope]:
    """Every envelope of a ``.intoto.jsonl`` bundle (one a line), read bounded; one-line refusals."""
    text = decode(read_bounded(path, MAX_ENVELOPE_BYTES, accepted=_ACCEPT), path, what="attestation")
    envs = [parse_envelope(line, path) for line in text.splitlines() if line.strip()]
    if not envs:
        raise UserError("the attestation is empty", file=path, accepted=_ACCEPT)
    return envs


@dataclass(frozen=True)
class SignatureCheck:
    """``trusted`` (a trusted key signed exactly this record), ``signed`` (no trust policy: not checked),
    ``unsigned``, ``untrusted`` (no key of the policy), ``invalid`` (bad signature, envelope or statement)."""
    state: str
    signer: Optional[str]
    why: str

    @property
    def ok(self) -> bool:
        return self.state == "trusted"

    def label(self) -> str:
        if self.state in ("trusted", "signed"):
            return f"signed by {self.signer}"
        return "unsigned" if self.state == "unsigned" else f"not verified: {self.why}"

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "signer": self.signer, "why": self.why, "label": self.label()}


def _statement_fits(payload: bytes, record_bytes: bytes, rec: dict[str, Any], path: Path) -> Optional[str]:
    """Why the signed statement is not about exactly this record and its digest (None: it is)."""
    try:
        st = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return "the signed payload is not JSON"
    if not isinstance(st, dict) or st.get("_type") != STATEMENT_TYPE or st.get("predicateType") != PREDICATE_TYPE:
        return "the signed payload is not an in-toto Statement v1 with the Test Result predicate"
    subjects: list[Any] = st["subject"] if isinstance(st.get("subject"), list) else []
    digests = {(s.get("name"), (s.get("digest") or {}).get("sha256")) for s in subjects
               if isinstance(s, dict) and isinstance(s.get("digest"), dict)}
    if not any(d == hashlib.sha256(record_bytes).hexdigest() for _, d in digests):
        return "the statement is about another record (this record was changed after signing, or the envelope is another's)"
    digest = rec.get("digest")
    if isinstance(digest, str) and (lock_subject_name(rec), digest[len("sha256:"):]) not in digests:
        return f"the statement is for another lock digest than the record's {digest[:19]}…"
    return None


def check_signature(record: Record, policy: Optional[TrustPolicy]) -> SignatureCheck:
    """Whether ``record`` carries a signature from a key of ``policy`` over exactly its bytes and digest.
    No policy: whether it is signed at all (by which keyid), nothing verified."""
    ep = envelope_path(record.path)
    if not os.path.lexists(ep):
        return SignatureCheck("unsigned", None, f"no signature ({ep.name})")
    try:
        envs = read_envelopes(ep)
    except UserError as err:
        return SignatureCheck("invalid", None, str(err))
    first = envs[0].signatures[0].keyid
    if policy is None:
        return SignatureCheck("signed", f"key {first[:16]}", "not checked: no trust policy")
    signed = [(k, e) for e in envs for s in e.signatures if (k := policy.by_id(s.keyid)) is not None
              and k.verifies(s.sig, pae(e.payload_type, e.payload))]
    if not signed:
        known = any(policy.by_id(s.keyid) for e in envs for s in e.signatures)
        why = "the signature does not verify (the envelope was changed)" if known else \
            f"signed by a key the trust file does not hold (keyid {first[:16]})"
        return SignatureCheck("untrusted" if not known else "invalid", None if known else f"key {first[:16]}", why)
    try:
        raw = read_bounded(record.path, MAX_RECORD_BYTES, accepted="a JSON test record")
    except UserError as err:
        return SignatureCheck("invalid", None, str(err))
    try:
        same = parse_json(raw.decode("utf-8", "replace"), record.path) == record.data
    except UserError as err:
        return SignatureCheck("invalid", None, str(err))
    if not same:
        return SignatureCheck("invalid", None, "the record changed while it was read")
    whys: list[str] = []
    for key, e in signed:
        unfit = _statement_fits(e.payload, raw, record.data, record.path)
        if unfit is None:
            return SignatureCheck("trusted", key.name, f"signed by {key.name} (keyid {key.keyid[:16]})")
        whys.append(unfit)
    return SignatureCheck("invalid", signed[0][0].name, whys[0])
