"""Changes of the credentials: synchronous, each one transaction at most,
run on the database thread by their async callers (`areveal_credential`,
and the API's views through `core.db_thread.on_db_thread`).

Secrets go in through `put_credential` and come out through
`reveal_credential` alone, to a flow that uses them (`ctx.credential`),
which marks the credential used: a change too, so it is here. Every other
answer is the credential's shown fields (`Credential.shown`), which say
which secrets are set, never one; the reads are `credentials.selectors`'.
A refusal is a domain error (core/errors.py) whose sentence holds no secret.
"""

from __future__ import annotations

import time
from typing import Any

from django.db import transaction

from core.db_thread import on_db_thread
from core.errors import CredentialIncomplete
from credentials import rules, sealing
from credentials.models import Credential
from credentials.selectors import find_credential


def put_credential(name: str, body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Store the credential `name` as `body` describes it, whole (a field not
    sent is no longer set), creating it or replacing it: its shown fields,
    and whether it was created. InvalidCredential before anything is stored.

    The seal is made inside the write transaction, so a key rotation that
    runs beside (credentials/rotation.py) either re-seals it or was done
    before and its key is the one used."""
    fields = rules.clean(name, body)
    now = time.time()
    with transaction.atomic():
        existing = Credential.objects.named(name).first()
        credential = Credential(
            name=name,
            url=fields.url,
            username=fields.username,
            sealed=sealing.seal(name, fields.url, fields.secrets),
            has_password=fields.secrets["password"] is not None,
            has_totp=fields.secrets["totp_secret"] is not None,
            has_notes=fields.secrets["notes"] is not None,
            changed_at=now,
            used_at=existing.used_at if existing else None,
        )
        credential.save(force_insert=existing is None, force_update=existing is not None)
    return credential.shown(), existing is None


def delete_credential(name: str) -> bool:
    """Forget the credential; whether there was one."""
    if not (isinstance(name, str) and rules.NAME.fullmatch(name)):
        return False
    deleted, _ = Credential.objects.named(name).delete()
    return deleted > 0


class Revealed:
    """A credential's secrets, opened for a flow that uses them: `name`, `url`
    (its origin), `username` ("" when none), `password` (None when none),
    `notes` (None when none), and `totp()`, the current code. Neither its
    repr nor its str shows a secret, so a log line or a traceback that
    prints it gives none away."""

    __slots__ = ("name", "url", "username", "password", "notes", "_totp_secret")

    def __init__(
        self, *, name: str, url: str, username: str, password: str | None, totp_secret: str | None, notes: str | None
    ):
        self.name = name
        self.url = url
        self.username = username
        self.password = password
        self.notes = notes
        self._totp_secret = totp_secret

    @property
    def has_totp(self) -> bool:
        return self._totp_secret is not None

    def secrets(self) -> list[str]:
        """Its secret values, for what must take them out of a record (X-Debug's artifacts)."""
        return [value for value in (self.password, self._totp_secret, self.notes) if value]

    def totp(self) -> str:
        """The RFC 6238 code of this moment (30-second steps, 6 digits, SHA-1),
        or CredentialIncomplete when the credential has no TOTP secret."""
        if self._totp_secret is None:
            raise CredentialIncomplete(
                f"Credential {self.name} has no TOTP secret: store it again with totp_secret (PUT /api/v1/credentials/{self.name})."
            )
        return rules.SiteTotp(self._totp_secret).now()

    def __repr__(self) -> str:
        held = [
            what
            for what, value in (("password", self.password), ("totp", self._totp_secret), ("notes", self.notes))
            if value
        ]
        return f"<Revealed {self.name} {self.url} user={self.username!r} secrets={','.join(held) or 'none'}>"

    __str__ = __repr__


def reveal_credential(name: str) -> Revealed:
    """The credential's secrets, opened, for a flow on its site; its `used_at`
    is now. NoSuchCredential, or CredentialUnreadable when its seal does not
    open with this worker's keys. One transaction: a key rotation beside it
    (credentials/rotation.py) waits, or was done before."""
    now = time.time()
    with transaction.atomic():
        credential = find_credential(name)
        secrets = sealing.unseal(credential.name, credential.url, credential.sealed)
        Credential.objects.named(credential.name).update(used_at=now)
    return Revealed(
        name=credential.name,
        url=credential.url,
        username=credential.username,
        password=secrets["password"],
        totp_secret=secrets["totp_secret"],
        notes=secrets["notes"],
    )


async def areveal_credential(name: str) -> Revealed:
    """`reveal_credential`, from the event loop: on the database thread."""
    return await on_db_thread(reveal_credential)(name)
