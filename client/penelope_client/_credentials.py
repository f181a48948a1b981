"""A persona's credentials, the calls of both twins: `Penelope` and
`AsyncPenelope` take them from these. Secrets go to the worker and never
come back: a read answers which are set."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from penelope_client import _shared as shared
from penelope_client._shared import Answer


class CredentialCalls:
    request: Callable[..., Answer]

    def put_credential(
        self, name: str, *, url: str, username: str | None = None, password: str | None = None,
        totp_secret: str | None = None, notes: str | None = None,
    ) -> Answer:
        """Store the credential `name` for the site at `url` (its origin), or
        replace it whole: a secret not given is no longer set. Answers it as
        a read does: its `url`, `username` and which `secrets` are set."""
        body = shared.credential_body(url, username, password, totp_secret, notes)
        return self.request("PUT", shared.credential_path(name), json=body)

    def credentials(self) -> list[Answer]:
        """Every credential, by name, without its secrets (a read key: names and origins only)."""
        return self.request("GET", "/credentials")["credentials"]

    def credential(self, name: str) -> Answer:
        return self.request("GET", shared.credential_path(name))

    def delete_credential(self, name: str) -> None:
        self.request("DELETE", shared.credential_path(name))


class AsyncCredentialCalls:
    request: Callable[..., Awaitable[Answer]]

    async def put_credential(
        self, name: str, *, url: str, username: str | None = None, password: str | None = None,
        totp_secret: str | None = None, notes: str | None = None,
    ) -> Answer:
        body = shared.credential_body(url, username, password, totp_secret, notes)
        return await self.request("PUT", shared.credential_path(name), json=body)

    async def credentials(self) -> list[Answer]:
        return (await self.request("GET", "/credentials"))["credentials"]

    async def credential(self, name: str) -> Answer:
        return await self.request("GET", shared.credential_path(name))

    async def delete_credential(self, name: str) -> None:
        await self.request("DELETE", shared.credential_path(name))
