"""Signed notes (the C2SP signed-note format, as Go's ``golang.org/x/mod/sumdb/note`` writes them).

A note is UTF-8 text ending in a newline, then a blank line, then one signature line per signer::

    <text>\\n
    \\n
    \\u2014 <key name> <base64(key hash (4 bytes, big-endian) || Ed25519 signature (64 bytes))>\\n

The key hash is the first 4 bytes of SHA-256(key name || "\\n" || 0x01 || public key): 0x01 names
Ed25519. Keys are written as text:

- verifier key (safe to publish): ``<name>+<key hash, 8 hex>+<base64(0x01 || public key)>``;
- signer key (keep outside the home): ``PRIVATE+KEY+<name>+<key hash>+<base64(0x01 || seed)>``.

Ed25519 comes from the ``cryptography`` package.
"""

from __future__ import annotations

import base64
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

ED25519 = b"\x01"
DASH = "\u2014"


class NoteError(ValueError):
    """A key or a note that cannot be read, or a signature that does not verify."""


def _key_hash(name: str, public: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + ED25519 + public).digest()[:4]


def _check_name(name: str) -> None:
    if not name or any(c.isspace() or c == "+" for c in name):
        raise NoteError(f"a key name is non-empty with no spaces or '+', not {name!r}")


@dataclass(frozen=True)
class Verifier:
    """A public key that checks signatures: its name, key hash and Ed25519 key."""

    name: str
    key_hash: bytes
    public: bytes

    def text(self) -> str:
        """The verifier key as text, to publish."""
        return f"{self.name}+{self.key_hash.hex()}+{base64.b64encode(ED25519 + self.public).decode()}"


@dataclass(frozen=True)
class Signer:
    """A private key that signs notes."""

    name: str
    seed: bytes

    @property
    def verifier(self) -> Verifier:
        """The matching public key."""
        public = Ed25519PrivateKey.from_private_bytes(self.seed).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return Verifier(self.name, _key_hash(self.name, public), public)

    def text(self) -> str:
        """The signer key as text (a secret)."""
        return (f"PRIVATE+KEY+{self.name}+{self.verifier.key_hash.hex()}+"
                f"{base64.b64encode(ED25519 + self.seed).decode()}")


def generate(name: str) -> Signer:
    """A new Ed25519 signer named ``name``."""
    _check_name(name)
    return Signer(name, os.urandom(32))


def _decode_key(b64: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(b64, validate=True)
    except ValueError:
        raise NoteError(f"the {what} key is not base64") from None
    if len(raw) != 33 or raw[:1] != ED25519:
        raise NoteError(f"the {what} key is not an Ed25519 key (algorithm byte 0x01 and 32 bytes)")
    return raw[1:]


def read_signer(text: str) -> Signer:
    """Parse a signer key written by ``Signer.text``."""
    parts = text.strip().split("+", 4)  # base64 may hold '+': split off the fixed fields only
    if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
        raise NoteError("not a signer key (expected PRIVATE+KEY+<name>+<hash>+<key>)")
    signer = Signer(parts[2], _decode_key(parts[4], "signer"))
    _check_name(signer.name)
    if signer.verifier.key_hash.hex() != parts[3]:
        raise NoteError("the signer key's hash does not match its key")
    return signer


def read_verifier(text: str) -> Verifier:
    """Parse a verifier key written by ``Verifier.text``."""
    parts = text.strip().split("+", 2)
    if len(parts) != 3:
        raise NoteError("not a verifier key (expected <name>+<hash>+<key>)")
    name, hash_hex, b64 = parts
    _check_name(name)
    public = _decode_key(b64, "verifier")
    if _key_hash(name, public).hex() != hash_hex:
        raise NoteError("the verifier key's hash does not match its name and key")
    return Verifier(name, bytes.fromhex(hash_hex), public)


def load_key(path: str | os.PathLike[str]) -> Signer | Verifier:
    """A signer or verifier key from a file (the file holds the key's text)."""
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except UnicodeDecodeError as exc:
        raise NoteError(f"not a key file: not UTF-8 text (byte {exc.start})") from None
    return read_signer(text) if text.startswith("PRIVATE+KEY+") else read_verifier(text)


def _check_text(text: str) -> None:
    if not text.endswith("\n") or "\n\n" in text:
        raise NoteError("a note's text ends with one newline and has no blank line")
    if any(not c.isprintable() and c != "\n" for c in text):
        raise NoteError("a note's text has no control characters")


def sign(text: str, signer: Signer) -> str:
    """The note: ``text``, a blank line, and ``signer``'s signature line."""
    _check_text(text)
    signature = Ed25519PrivateKey.from_private_bytes(signer.seed).sign(text.encode())
    line = base64.b64encode(signer.verifier.key_hash + signature).decode()
    return f"{text}\n{DASH} {signer.name} {line}\n"


def open_note(note: str, verifier: Verifier) -> str:
    """The text of ``note`` once ``verifier``'s signature on it checks; NoteError says why not."""
    text, sep, signatures = note.rpartition("\n\n")
    if not sep:
        raise NoteError("not a signed note (no blank line before the signatures)")
    text += "\n"
    _check_text(text)
    for line in signatures.splitlines():
        prefix = f"{DASH} {verifier.name} "
        if not line.startswith(prefix):
            continue
        encoded = line[len(prefix):]
        try:
            raw = base64.b64decode(encoded, validate=True)
        except ValueError:
            raise NoteError("a signature line is not base64") from None
        if base64.b64encode(raw).decode() != encoded:  # unused bits set: another text, same bytes
            raise NoteError("a signature line is not canonical base64")
        if raw[:4] != verifier.key_hash:
            continue
        try:
            Ed25519PublicKey.from_public_bytes(verifier.public).verify(raw[4:], text.encode())
        except InvalidSignature:
            raise NoteError(f"the signature of {verifier.name} does not verify: the note was changed") from None
        return text
    raise NoteError(f"the note carries no signature by {verifier.name} ({verifier.key_hash.hex()})")
