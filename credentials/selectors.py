"""Reads of the credentials: synchronous, one query each, no writes, and
never a secret: what they answer is a credential's shown fields
(`Credential.shown`, which says which secrets are set, never one) or what a
read key sees of it (`Credential.for_reader`). The worker calls them on its
database thread (`core.db_thread.on_db_thread`); the commands and the
in-process tests call them as they are. A secret comes out through
`credentials.services.reveal_credential` alone, which marks it used.
"""

from __future__ import annotations

from typing import Any

from core.errors import NoSuchCredential
from credentials import rules
from credentials.models import Credential


def no_such_credential(name: Any) -> NoSuchCredential:
    """The refusal of an unknown name; the name is said only when it is one a credential may have."""
    said = f" named {name}" if isinstance(name, str) and rules.NAME.fullmatch(name) else ""
    return NoSuchCredential(f"No credential{said}: PUT /api/v1/credentials/{{name}} stores one.")


def find_credential(name: Any) -> Credential:
    """The credential's row, or NoSuchCredential (a name no credential may have included)."""
    credential = (
        Credential.objects.named(name).first() if isinstance(name, str) and rules.NAME.fullmatch(name) else None
    )
    if credential is None:
        raise no_such_credential(name)
    return credential


def credential_shown(name: str) -> dict[str, Any]:
    """What a full key reads of the credential, or NoSuchCredential."""
    return find_credential(name).shown()


def credential_for_reader(name: str) -> dict[str, Any]:
    """What a read key reads of it: its name and origin."""
    return find_credential(name).for_reader()


def credentials_shown() -> list[dict[str, Any]]:
    """What a full key reads of every credential, by name."""
    return [credential.shown() for credential in Credential.objects.by_name()]


def credentials_for_reader() -> list[dict[str, Any]]:
    """What a read key reads of every credential, by name."""
    return [credential.for_reader() for credential in Credential.objects.by_name()]
