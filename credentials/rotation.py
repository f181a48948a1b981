"""A new key for the credentials' seals (`manage.py credentials rotate-key`).

With the store's key file, in three steps, each safe to stop after:

1. `begin`: a new key in store/credentials_key.new (a rotation that
   stopped left one there: it is taken again). From then on new seals are
   made with it, and either key opens a seal (the seal names its key).
2. `reseal_all`: every credential sealed again with it, in one transaction.
3. `finish`: credentials_key.new renamed over credentials_key.

A worker beside it reads the key files at each seal and reveal (the pending
one first), and seals inside its write transaction: a credential it stores
is either re-sealed by step 2 or sealed with the new key. Two rotations at
once are kept apart by a lock of their own (store/credentials_key.lock).

With CREDENTIALS_KEY, the new key is CREDENTIALS_NEW_KEY and there is only
step 2: the worker must not run meanwhile (it seals with the key its
environment gave it), so the command holds the store's lock (core/store_lock.py).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import transaction

from core.errors import CredentialUnreadable
from credentials import sealing
from credentials.models import Credential


class RotationCannotRun(Exception):
    """A rotation that cannot run now, or would leave a credential unreadable: one sentence."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def lock_file() -> Path:
    return Path(settings.STORE_DIR) / (sealing.KEY_FILE_NAME + ".lock")


@contextmanager
def rotation_lock() -> Iterator[None]:
    """One rotation of the key file at a time, across processes."""
    fd = os.open(lock_file(), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RotationCannotRun("Another rotation of the credentials key is running; let it end first.") from None
        yield
    finally:
        os.close(fd)


def begin() -> tuple[bytes, bool]:
    """Step 1: the new key, kept in credentials_key.new, and whether it was
    there already (a rotation that stopped, taken up again)."""
    path = sealing.pending_key_file()
    pending = sealing.read_key_file(path)
    if pending is not None:
        return pending, True
    key = sealing.make_key()
    sealing.write_key_file(path, key, replace=True)  # under the rotation lock: nobody else writes it
    return key, False


def reseal_all(keyring: sealing.Keyring) -> int:
    """Step 2: every credential sealed again with `keyring.sealing`, in one
    transaction; how many. A credential that none of the ring's keys opens
    stops it before anything changes (RotationCannotRun names them)."""
    resealed = 0
    unreadable: list[str] = []
    with transaction.atomic():
        for credential in Credential.objects.by_name().only("name", "url", "sealed"):
            try:
                secrets = sealing.unseal(credential.name, credential.url, credential.sealed, keyring)
            except CredentialUnreadable:
                unreadable.append(credential.name)
                continue
            credential.sealed = sealing.seal(credential.name, credential.url, secrets, keyring)
            credential.save(update_fields=["sealed"])
            resealed += 1
        if unreadable:
            listed = ", ".join(unreadable[:20]) + (f" and {len(unreadable) - 20} more" if len(unreadable) > 20 else "")
            raise RotationCannotRun(
                f"{len(unreadable)} credentials do not open with the keys this worker has ({listed}); nothing was "
                "re-sealed. Restore their key, or delete them (DELETE /api/v1/credentials/NAME), and rotate again."
            )
    return resealed


def finish() -> None:
    """Step 3: the new key is the store's key."""
    os.replace(sealing.pending_key_file(), sealing.key_file())
    sealing.sync_directory(sealing.key_file().parent)


def rotate_key_file() -> tuple[int, bool]:
    """The three steps under the rotation's lock: how many credentials were
    re-sealed, and whether a rotation that had stopped was taken up."""
    with rotation_lock():
        current = sealing.read_key_file(sealing.key_file())
        new_key, resumed = begin()
        keyring = sealing.Keyring.of(new_key, *([current] if current else []), source=str(sealing.key_file()))
        resealed = reseal_all(keyring)
        finish()
    return resealed, resumed


def rotate_environment_key() -> int:
    """CREDENTIALS_KEY's credentials sealed again with CREDENTIALS_NEW_KEY; how many."""
    old = sealing.decode_key(settings.CREDENTIALS_KEY)
    new = sealing.decode_key(settings.CREDENTIALS_NEW_KEY) if settings.CREDENTIALS_NEW_KEY else None
    if new is None:
        raise RotationCannotRun(
            "CREDENTIALS_KEY is set, so the new key comes from CREDENTIALS_NEW_KEY: set it to a new key (the urlsafe "
            "base64 of 32 random bytes: python3 -c 'import base64, os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())')."
        )
    if old == new:
        raise RotationCannotRun("CREDENTIALS_NEW_KEY is the same key as CREDENTIALS_KEY: make a new one.")
    return reseal_all(sealing.Keyring.of(new, *([old] if old else []), source="CREDENTIALS_KEY or CREDENTIALS_NEW_KEY"))
