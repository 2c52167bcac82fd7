"""Signing keys and trust files for test-record attestations (issue 54), offline: ed25519.

- A **private key file** is PKCS#8 PEM (``openssl pkey -in KEY`` reads it), created with
  ``O_CREAT|O_EXCL`` and mode 0600 and never widened after; one readable by group or other is refused
  in one line before it is read.
- A **public key line** is ``ed25519 <base64 of the 32-byte raw key> [NAME]``; ``PATH.pub`` holds one.
- A **trust file** is such lines, one key a line, ``#`` comments and blank lines ignored: a ``.pub``
  file is a trust file. Several keys trust several signers (key rotation: add the new key, later
  remove the old one; a removed key's records stop verifying).

A key's id is the sha256 (hex) of its raw public key: the DSSE ``keyid``. ``cryptography`` is imported
where a key is made, loaded or checked: ``verified`` and ``plan`` without a trust policy never load it.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from deepep_env.base.errors import UserError
from deepep_env.base.readfile import MAX_CONFIG_BYTES, decode, open_regular, read_bounded, read_fd

if TYPE_CHECKING:  # annotations only: cryptography loads where a key is used
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

KEY_TYPE = "ed25519"
MAX_KEY_BYTES = 64 << 10
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9@._+-]{0,127}$")
_ACCEPT_KEY = "an ed25519 private key (PKCS#8 PEM) of mode 0600, as `deepep-env key new PATH` writes it"
_ACCEPT_LINE = "lines `ed25519 <base64 raw public key> [NAME]` (a .pub file `deepep-env key new` wrote), # comments"


def require_crypto(what: str) -> None:
    """One line, not a traceback, where this Python has no ``cryptography`` (a carried site without it)."""
    import importlib.util

    if importlib.util.find_spec("cryptography") is None:
        raise UserError(f"{what} needs the cryptography package, which this Python does not have",
                        accepted="pip install 'cryptography>=42' (a carry holds it: deepep_env/data/carry-requirements.txt)")


def key_id(raw_public: bytes) -> str:
    """The DSSE keyid of a public key: sha256 (hex) of its 32 raw bytes."""
    return hashlib.sha256(raw_public).hexdigest()


def raw_public(pub: Ed25519PublicKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


@dataclass(frozen=True)
class TrustedKey:
    name: str
    public: bytes          # 32 raw bytes

    @property
    def keyid(self) -> str:
        return key_id(self.public)

    def verifies(self, sig: bytes, message: bytes) -> bool:
        require_crypto("checking a signature")
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        try:
            Ed25519PublicKey.from_public_bytes(self.public).verify(sig, message)
        except InvalidSignature:
            return False
        return True

    def line(self) -> str:
        return f"{KEY_TYPE} {base64.b64encode(self.public).decode()} {self.name}"


@dataclass(frozen=True)
class Signer:
    """A loaded private key: signs, and knows its public half. Never serialised anywhere."""
    key: Ed25519PrivateKey
    name: str

    @property
    def public(self) -> TrustedKey:
        return TrustedKey(self.name, raw_public(self.key.public_key()))

    def sign(self, message: bytes) -> bytes:
        return self.key.sign(message)


@dataclass(frozen=True)
class TrustPolicy:
    """The keys a team trusts (one trust file), by keyid."""
    source: str
    keys: tuple[TrustedKey, ...]

    def by_id(self, keyid: str) -> Optional[TrustedKey]:
        return next((k for k in self.keys if k.keyid == keyid), None)


def _key_name(path: Path) -> str:
    name = re.sub(r"[^A-Za-z0-9@._+-]+", "-", path.name).strip("-.") or "key"
    return name[:128]


def new_key(path: Path, name: Optional[str] = None) -> tuple[Path, Path]:
    """A new ed25519 key pair: ``path`` (mode 0600, created exclusively) and ``path.pub`` (a trust file of
    one line). Refuses, writing nothing, when either exists."""
    require_crypto("`key new`")
    pub_path = path.with_name(path.name + ".pub")
    name = name or _key_name(path)
    if not NAME_RE.match(name):
        raise UserError(f"not a key name: {name!r}", field="--name", accepted="a letter or digit, then up to 127 of [A-Za-z0-9@._+-]")
    for p in (path, pub_path):
        if os.path.lexists(p):
            raise UserError("already exists; a key is never overwritten", file=p, accepted="a new path")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError as err:
        raise UserError(f"cannot create the key file: {err.strerror}", file=path, accepted="a new path in a writable folder") from None
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    pub = TrustedKey(name, raw_public(key.public_key()))
    with open(pub_path, "x", encoding="utf-8") as f:
        f.write(pub.line() + "\n")
    return path, pub_path


def load_signer(path: Path) -> Signer:
    """The private key at ``path``: a regular file not readable by group or other, ed25519, unencrypted."""
    require_crypto("signing a record")
    try:
        fd = open_regular(path)
    except OSError as err:
        raise UserError(f"cannot read the signing key: {err.strerror or err}", file=path, accepted=_ACCEPT_KEY) from None
    mode = os.fstat(fd).st_mode
    if stat.S_IMODE(mode) & 0o077:
        os.close(fd)
        raise UserError(f"the signing key is readable by group or other (mode {stat.S_IMODE(mode):04o})", file=path,
                        accepted=f"mode 0600 (chmod 600 {path})")
    try:
        data = read_fd(fd, MAX_KEY_BYTES, str(path))
    except OSError:
        raise UserError("not a signing key (too large)", file=path, accepted=_ACCEPT_KEY) from None
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise UserError("not an unencrypted PEM private key", file=path, accepted=_ACCEPT_KEY) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UserError("not an ed25519 key", file=path, accepted=_ACCEPT_KEY)
    return Signer(key, _key_name(path))


def parse_key_line(line: str, path: Path, n: int) -> TrustedKey:
    parts = line.split()
    if len(parts) not in (2, 3) or parts[0] != KEY_TYPE:
        raise UserError("not a public key line", file=path, line=n, accepted=_ACCEPT_LINE)
    try:
        raw = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        raise UserError("the key is not 32 bytes of base64", file=path, line=n, accepted=_ACCEPT_LINE)
    name = parts[2] if len(parts) == 3 else key_id(raw)[:16]
    if not NAME_RE.match(name):
        raise UserError(f"not a key name: {name!r}", file=path, line=n, accepted="a letter or digit, then up to 127 of [A-Za-z0-9@._+-]")
    return TrustedKey(name, raw)


def load_trust(path: Path) -> TrustPolicy:
    """A trust file: one public key a line (see the module's doc); at least one key."""
    text = decode(read_bounded(path, MAX_CONFIG_BYTES, accepted="a trust file: " + _ACCEPT_LINE), path, what="trust file")
    keys = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if line and not line.startswith("#"):
            keys.append(parse_key_line(line, path, n))
    if not keys:
        raise UserError("the trust file holds no key", file=path, accepted=_ACCEPT_LINE)
    return TrustPolicy(str(path), tuple(keys))
