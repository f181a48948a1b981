"""Pages without a browser, for the broker's in-process tests: a registry
whose pages have no tab and whose pool pages open at the next turn of the
loop (the broker's contract with the real registry, browser/registry.py)."""

from __future__ import annotations

import asyncio

from django.conf import settings

from browser.broker import Broker
from browser.pages import ManagedPage
from core.runtime import Tasks


class Pages:
    def __init__(self, *names: str) -> None:
        self.tasks = Tasks()
        self.broker = Broker(self)
        self.pages = {name: ManagedPage(name, tab=None) for name in names}
        self.opened: list[str] = []

    def reserve(self, page_id: str) -> ManagedPage:
        page = ManagedPage(page_id)
        self.pages[page_id] = page
        self.broker.opening(page)
        return page

    async def open_tab_of(self, page: ManagedPage) -> None:
        await asyncio.sleep(0)
        self.opened.append(page.name)

    def drop(self, page: ManagedPage) -> None:
        if self.pages.get(page.name) is page:
            del self.pages[page.name]
        self.broker.closed(page)

    def room(self) -> int:
        return settings.MAX_PAGES - len(self.pages)

    def close(self, name: str) -> None:
        """Close a page, whoever holds it or waits for it (the broker answers its waiters)."""
        page = self.pages.pop(name)
        self.broker.closed(page)
