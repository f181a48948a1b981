"""The credentials' secrets sealed with AES-256-GCM (`cryptography`'s AEAD).

A seal is text: the urlsafe base64 of

    b"\\x01"  |  key id (8 bytes)  |  nonce (12 random bytes)  |  ciphertext and tag

where the key id is the first 8 bytes of the key's SHA-256, so a seal names
the key that opens it. Its associated data is its header, the credential's
name and its url: a seal copied onto another row does not open. What is
sealed is the JSON of `{"password", "totp_secret", "notes"}` (each a string
or null).

The key (`Keyring.load`): CREDENTIALS_KEY when it is set, else the file
store/credentials_key, made at first use, readable by its owner only. While
a rotation runs (`manage.py credentials rotate-key`, credentials/rotation.py)
the store also holds credentials_key.new: new seals are made with it, and
either key opens a seal. Keys are read from the files at each use, never
kept, so a rotation made by the command while a worker runs is the worker's
at its next seal or reveal. No key is ever logged or said.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from secrets import token_bytes, token_hex
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from core.errors import CredentialUnreadable

log = logging.getLogger("penelope.credentials")

VERSION = b"\x01"
KEY_BYTES = 32
KEY_ID_BYTES = 8
NONCE_BYTES = 12
HEADER_BYTES = len(VERSION) + KEY_ID_BYTES
KEY_FILE_NAME = "credentials_key"
PENDING_SUFFIX = ".new"
SECRET_FIELDS = ("password", "totp_secret", "notes")


# --- keys ------------------------------------------------------------------------------------


def decode_key(text: str) -> bytes | None:
    """The key `text` writes (urlsafe base64 of 32 bytes), or None."""
    try:
        key = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except ValueError:
        return None
    return key if len(key) == KEY_BYTES else None


def encode_key(key: bytes) -> str:
    return base64.urlsafe_b64encode(key).decode("ascii")


def make_key() -> bytes:
    return token_bytes(KEY_BYTES)


def key_id(key: bytes) -> bytes:
    return hashlib.sha256(key).digest()[:KEY_ID_BYTES]


def key_file() -> Path:
    return Path(settings.STORE_DIR) / KEY_FILE_NAME


def pending_key_file() -> Path:
    """Where a rotation keeps the new key until every seal is made with it."""
    return Path(settings.STORE_DIR) / (KEY_FILE_NAME + PENDING_SUFFIX)


def read_key_file(path: Path) -> bytes | None:
    """The key kept in `path`, None when there is no such file."""
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    key = decode_key(text)
    if key is None:
        raise ImproperlyConfigured(f"{path} does not hold a credentials key (the urlsafe base64 of 32 bytes).")
    return key


def write_key_file(path: Path, key: bytes, *, replace: bool = False) -> bool:
    """Keep `key` in `path`, readable by its owner only, whole or not at all
    (written aside, then linked or renamed into place). Without `replace`, a
    file already there stays and the answer is False."""
    aside = path.with_name(f".{path.name}.{os.getpid()}.{token_hex(4)}")
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(encode_key(key) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        if replace:
            os.replace(aside, path)
        else:
            try:
                os.link(aside, path)
            except FileExistsError:
                return False
    finally:
        aside.unlink(missing_ok=True)
    sync_directory(path.parent)
    return True


def sync_directory(directory: Path) -> None:
    """Make a rename or a link in `directory` survive a power loss."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def first_key_file() -> bytes:
    """The store's key, made now when there is none yet (another process may
    make it at the same moment: whichever is linked first is the key)."""
    path = key_file()
    key = make_key()
    if write_key_file(path, key):
        log.info("made a new credentials key at %s", path)
        return key
    found = read_key_file(path)
    if found is None:  # it was there a moment ago: someone removed it meanwhile
        raise ImproperlyConfigured(f"{path} went while it was being read; look at what removes it.")
    return found


@dataclass(frozen=True)
class Keyring:
    """The keys that open seals (by key id), and the one new seals are made with."""

    sealing: bytes | None
    keys: dict[bytes, bytes]
    # Where the keys come from, for an error's sentence.
    source: str

    @classmethod
    def of(cls, sealing: bytes, *others: bytes, source: str = "the keys given") -> Keyring:
        return cls(sealing, {key_id(key): key for key in (sealing, *others)}, source)

    @classmethod
    def load(cls, *, make: bool = False) -> Keyring:
        """The keys as they are now; with `make`, the store's key is made if
        there is none (a first seal)."""
        if settings.CREDENTIALS_KEY:
            key = decode_key(settings.CREDENTIALS_KEY)
            if key is None:
                raise ImproperlyConfigured("CREDENTIALS_KEY is not the urlsafe base64 of 32 bytes.")
            return cls.of(key, source="CREDENTIALS_KEY")
        # The pending key first: a rotation renames it over the current one, so
        # read in this order the newer key is never missed between the reads.
        pending = read_key_file(pending_key_file())
        current = read_key_file(key_file())
        if current is None and pending is None and make:
            current = first_key_file()
        keys = {key_id(key): key for key in (current, pending) if key is not None}
        return cls(pending or current, keys, str(key_file()))


# --- seals -----------------------------------------------------------------------------------


def associated_data(header: bytes, name: str, url: str) -> bytes:
    return header + json.dumps([name, url]).encode()


def seal(name: str, url: str, secrets: dict[str, Any], keyring: Keyring | None = None) -> str:
    """The secrets (`password`, `totp_secret`, `notes`: each a string or None)
    sealed for the credential `name` at `url`."""
    ring = keyring or Keyring.load(make=True)
    key = ring.sealing
    if key is None:
        raise ImproperlyConfigured("No credentials key to seal with.")
    header = VERSION + key_id(key)
    nonce = token_bytes(NONCE_BYTES)
    plain = json.dumps({field: secrets.get(field) for field in SECRET_FIELDS}).encode()
    sealed = AESGCM(key).encrypt(nonce, plain, associated_data(header, name, url))
    return base64.urlsafe_b64encode(header + nonce + sealed).decode("ascii")


def parts(sealed: str) -> tuple[bytes, bytes, bytes] | None:
    """A seal's header, nonce and ciphertext, None when it is no seal of this version."""
    try:
        raw = base64.b64decode(sealed.encode("ascii"), altchars=b"-_", validate=True)
    except ValueError:
        return None
    if len(raw) < HEADER_BYTES + NONCE_BYTES + 16 or raw[:1] != VERSION:  # 16: GCM's tag
        return None
    return raw[:HEADER_BYTES], raw[HEADER_BYTES:HEADER_BYTES + NONCE_BYTES], raw[HEADER_BYTES + NONCE_BYTES:]


def sealed_with(sealed: str) -> bytes | None:
    """The key id a seal names, None when it is no seal of this version."""
    found = parts(sealed)
    return found[0][len(VERSION):] if found else None


def unseal(name: str, url: str, sealed: str, keyring: Keyring | None = None) -> dict[str, str | None]:
    """The secrets of the credential `name` at `url`, or CredentialUnreadable
    (no key of this worker made the seal, or it was made for another row)."""
    found = parts(sealed)
    if found is None:
        raise CredentialUnreadable(f"Credential {name}'s sealed secrets are damaged; store them again (PUT).")
    header, nonce, body = found
    ring = keyring or Keyring.load()
    key = ring.keys.get(header[len(VERSION):])
    if key is None:
        raise CredentialUnreadable(
            f"Credential {name}'s secrets were sealed with a key this worker does not have ({ring.source}); "
            "restore that key, or store the credential again (PUT)."
        )
    try:
        plain = AESGCM(key).decrypt(nonce, body, associated_data(header, name, url))
    except InvalidTag:
        raise CredentialUnreadable(
            f"Credential {name}'s sealed secrets do not open: they were not sealed for this name and url, or were changed."
        ) from None
    opened = json.loads(plain)
    return {field: opened.get(field) for field in SECRET_FIELDS}
