"""The permission overrides CDP clients set, undone when each client goes.

Chromium keeps a permission override (`Browser.grantPermissions`,
`Browser.setPermission`) per browser context and origin, not per page: one
a client sets holds for every page of the persona on that origin (on every
origin when it names none), the worker's own pages too. Chromium drops
them when the session that set them detaches (checked with Chromium 156).
The mux's browser-level session, which carries the clients' calls, lives as
long as the browser: an override sent there would stay until the browser is
launched again.

So the ledger here carries every client's permission calls on the mux's
session and keeps them in order. When a client goes (or sends
`Browser.resetPermissions`), its calls are dropped, the context's overrides
are reset, and the calls of the clients still connected are made again, in
their order. The worker itself sets no override (Playwright's
`grant_permissions` is not used by it), so a reset takes nothing of its own.
One ledger per mux: a relaunched browser starts with none.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

log = logging.getLogger("penelope.cdp")

RESET = "Browser.resetPermissions"
# The calls that change the persona's permission overrides; each is answered
# here, from a client's connection or any of its sessions.
PERMISSION_CALLS = frozenset({"Browser.grantPermissions", "Browser.setPermission", RESET})


class Carrier(Protocol):
    """The mux (cdp/mux.py), as the ledger uses it: it owns the ledger, so
    the ledger names only what it calls."""

    closed: bool
    default_context_id: str

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]: ...


class Client(Protocol):
    """A client's bridge (cdp/bridge.py), as the ledger knows it."""

    ended: bool


class Permissions:
    """The permission calls of the clients connected now, in the order they were made."""

    def __init__(self, mux: Carrier) -> None:
        self.mux = mux
        self.calls: list[tuple[Client, str, dict[str, Any]]] = []  # (the client's bridge, method, params)
        # One change at a time: what is set in Chromium is always what `calls` says.
        self.lock = asyncio.Lock()

    async def call(self, owner: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A client's permission call: made and kept, or, for a reset, its own undone.
        ChromiumError when Chromium refuses it (nothing is kept then)."""
        async with self.lock:
            if owner.ended:
                return {}  # it went while the call waited its turn: it sets nothing now
            if method == RESET:
                await self._undo(owner)
                return {}
            entry = (owner, method, params)
            self.calls.append(entry)  # before it is sent: a call cut short may still have been made
            try:
                return await self.mux.call(method, params)
            except asyncio.CancelledError:
                raise  # sent, perhaps made: kept, so the client's end undoes it
            except Exception:
                self.calls.remove(entry)  # Chromium refused it: nothing was set
                raise

    async def release(self, owner: Client) -> None:
        """The client went: what it set is undone, what the others set stays."""
        async with self.lock:
            await self._undo(owner)

    async def _undo(self, owner: Client) -> None:
        if not any(held is owner for held, _, _ in self.calls):
            return  # it set nothing: the others' overrides are left as they are
        self.calls = [call for call in self.calls if call[0] is not owner]
        if self.mux.closed:
            return  # the browser went, and its overrides with it
        await self.mux.call(
            RESET, {"browserContextId": self.mux.default_context_id} if self.mux.default_context_id else {}
        )
        # Made again in their order, each sent before the next is awaited (the
        # session keeps their order); one Chromium refuses now is only logged.
        again = await asyncio.gather(
            *(self.mux.call(method, params) for _, method, params in self.calls), return_exceptions=True
        )
        for (_, method, _), answer in zip(self.calls, again, strict=True):
            if isinstance(answer, BaseException):
                log.warning("a CDP client's %s could not be made again after another client's went: %s", method, answer)
