"""CDP tokens: one connection's credential to drive one leased page.

As a live link's (live/links.py), a token is 32 random bytes, URL-safe, and
only its SHA-256 is kept, in memory: the worker can check a token it is
shown but cannot print one, and a restart ends them all. A grant belongs to
its lease: it ends at its own expiry (never later than the lease's end when
it was made), when the lease is released or broken, when the page closes,
and at a `DELETE /api/v1/{page_id}/cdp`. Its open connection, if any, is
closed then. It carries one connection in its life.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from live.links import TOKEN_BYTES, digest

if TYPE_CHECKING:
    from browser.pages import Lease, ManagedPage

# Grants a page may hold at once; an ended one no longer counts.
MAX_GRANTS_PER_PAGE = 16


@dataclass(eq=False)
class Grant:
    page: ManagedPage
    lease: Lease
    expires_at: float  # epoch seconds
    used: bool = False  # a connection was opened with it
    ended: bool = False
    # Called once when it ends (its open connection closes), with why.
    on_end: list[Callable[[str], None]] = field(default_factory=list)

    @property
    def page_id(self) -> str:
        return self.page.name

    def usable(self, now: float | None = None) -> bool:
        return (
            not self.ended
            and (now or time.time()) < self.expires_at
            and not self.page.closed
            and self.page.lease is self.lease
        )


class Grants:
    """The CDP grants of the worker's pages, by their token's digest."""

    def __init__(self) -> None:
        self.by_digest: dict[str, Grant] = {}

    def create(self, page: ManagedPage, lease: Lease, ttl: float) -> tuple[str, Grant] | None:
        """A new token and its grant; None when the page holds MAX_GRANTS_PER_PAGE."""
        self.prune()
        if sum(1 for grant in self.by_digest.values() if grant.page is page) >= MAX_GRANTS_PER_PAGE:
            return None
        token = secrets.token_urlsafe(TOKEN_BYTES)
        grant = Grant(page=page, lease=lease, expires_at=time.time() + ttl)
        self.by_digest[digest(token)] = grant
        return token, grant

    def take(self, token: str) -> Grant | None:
        """The usable grant a token names, marked used; None for a token that is
        unknown, ended, expired, or used already (not told apart)."""
        grant = self.by_digest.get(digest(token))
        if grant is None or grant.used or not grant.usable():
            return None
        grant.used = True
        return grant

    def end(self, grant: Grant, why: str) -> None:
        grant.ended = True
        for key in [key for key, held in self.by_digest.items() if held is grant]:
            del self.by_digest[key]
        callbacks, grant.on_end = grant.on_end, []
        for callback in callbacks:
            callback(why)

    def end_page(self, page_id: str, why: str) -> int:
        """End every grant of the page open under `page_id`; how many."""
        ended = [grant for grant in self.by_digest.values() if grant.page_id == page_id]
        for grant in ended:
            self.end(grant, why)
        return len(ended)

    def lease_changed(self, page_id: str) -> None:
        """The page's lease was released or broken: its grants end."""
        for grant in [grant for grant in self.by_digest.values() if grant.page_id == page_id and not grant.usable()]:
            self.end(grant, "The lease ended.")

    def prune(self) -> None:
        for grant in [grant for grant in self.by_digest.values() if not grant.usable()]:
            self.end(grant, "The token expired.")
