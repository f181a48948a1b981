"""Live links: one-time credentials to watch (or drive) one page.

A link is a random token (32 bytes, URL-safe) that names one page, an expiry
and whether its holder may send input. Only the token's SHA-256 is kept, in
memory: the worker can check a token it is shown but cannot print one, and
a restart revokes every link (the pages they showed are gone with it).

A link is usable while it has not expired, was not revoked, and its page is
still the one it was made for: a page closed and opened again under the same
name is another page, and its old links answer as unknown ones do (a page
leaves the registry only closed: browser/registry.py).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from browser.pages import Lease, ManagedPage
    from browser.registry import PageRegistry

TOKEN_BYTES = 32
# Links a page may have at once; an expired one no longer counts.
MAX_LINKS_PER_PAGE = 64
OPERATOR_LINK_TTL_S = 900.0


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(eq=False)
class Link:
    page: ManagedPage
    expires_at: float  # epoch seconds
    control: bool
    # A question's own link (live/human.py): it ends with its question, not
    # with a DELETE of the page's links, and does not count against their cap.
    question: bool = False
    # The lease a control link was made under (None: its page was not
    # leased): its input drives the page under it (live/sockets.py).
    lease: Lease | None = None
    revoked: bool = False
    # Called once when the link is revoked (its open sockets close).
    on_revoke: list[Callable[[], None]] = field(default_factory=list)

    @property
    def page_id(self) -> str:
        return self.page.name

    def usable(self, now: float | None = None) -> bool:
        return not self.revoked and (now or time.time()) < self.expires_at and not self.page.closed


class Links:
    """The live links of the pages of `pages`, by their token's digest."""

    def __init__(self, pages: PageRegistry) -> None:
        self.pages = pages
        self.by_digest: dict[str, Link] = {}

    def create(
        self, page: ManagedPage, *, ttl: float, control: bool, question: bool = False, lease: Lease | None = None
    ) -> tuple[str, Link] | None:
        """A new link's token and the link; None when the page already holds
        MAX_LINKS_PER_PAGE usable links (a question's link is always made)."""
        self.prune()
        held = sum(1 for link in self.by_digest.values() if link.page is page and not link.question)
        if held >= MAX_LINKS_PER_PAGE and not question:
            return None
        token = secrets.token_urlsafe(TOKEN_BYTES)
        link = Link(page=page, expires_at=time.time() + ttl, control=control, question=question, lease=lease)
        self.by_digest[digest(token)] = link
        return token, link

    def find(self, token: str) -> Link | None:
        """The usable link a token names, or None: unknown, expired, revoked
        and a closed page are not told apart."""
        link = self.by_digest.get(digest(token))
        return link if link is not None and link.usable() else None

    def revoke(self, link: Link) -> None:
        link.revoked = True
        for key in [key for key, held in self.by_digest.items() if held is link]:
            del self.by_digest[key]
        callbacks, link.on_revoke = link.on_revoke, []
        for callback in callbacks:
            callback()

    def revoke_page(self, page_id: str) -> int:
        """Revoke every link of the page now open under `page_id` but a
        waiting question's (a cancel of its job ends that one); how many."""
        revoked = [
            link for link in self.by_digest.values() if link.page_id == page_id and not link.revoked and not link.question
        ]
        for link in revoked:
            self.revoke(link)
        return len(revoked)

    def prune(self) -> None:
        for link in [link for link in self.by_digest.values() if not link.usable()]:
            self.revoke(link)

    async def operator_link(self, page_id: str) -> str | None:
        """A control link for an operator in the admin (on the event loop, where
        the links live): its URL, or None when the page is not open."""
        page = self.pages.pages.get(page_id)
        made = self.create(page, ttl=OPERATOR_LINK_TTL_S, control=True) if page is not None and not page.closed else None
        return f"/live/{made[0]}" if made is not None else None
