"""`any`'s own pages: the pool pages (`pool-1`, `pool-2`, ...) the broker
opens for callers on `any` (browser/broker.py), and their closing once
they idle for POOL_PAGE_IDLE_S. Leased pages are never picked, nor closed
here."""

from __future__ import annotations

import itertools
import logging
import time
from typing import Protocol

from django.conf import settings

from browser.pages import ManagedPage
from core.errors import DomainError

log = logging.getLogger("penelope.pages")

POOL_PREFIX = "pool-"


class Driven(Protocol):
    def driven(self, page: ManagedPage) -> bool: ...  # a CDP client or live control on it (browser/broker.py)


class Pages(Protocol):
    """What the pool needs of the page registry (browser/registry.py)."""

    pages: dict[str, ManagedPage]
    broker: Driven

    async def close(self, page_id: str, lease_id: str | None) -> None: ...


def next_pool_name(pages: dict[str, ManagedPage]) -> str:
    """The first pool page name not taken."""
    return next(f"{POOL_PREFIX}{n}" for n in itertools.count(1) if f"{POOL_PREFIX}{n}" not in pages)


def is_free(page: ManagedPage) -> bool:
    """Open, and nobody holds it, waits for it or leases it."""
    return not (page.opening or page.closed or page.held or len(page.line)) and page.lease is None


async def close_idle(registry: Pages) -> int:
    """Close the pool pages idle for POOL_PAGE_IDLE_S; answers how many."""
    cutoff = time.monotonic() - settings.POOL_PAGE_IDLE_S
    closed = 0
    for name, page in list(registry.pages.items()):
        if name.startswith(POOL_PREFIX) and is_free(page) and not registry.broker.driven(page) and page.last_used <= cutoff:
            try:
                await registry.close(name, None)
            except DomainError as refused:  # taken or leased meanwhile
                log.debug("pool page %s stays open: %s", name, refused.message)
                continue
            closed += 1
    return closed
