"""Opening and closing a page's tabs in a browser that may be dying: a new tab
must answer before a call gets it, an old one is closed without waiting on a
browser that is gone."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from playwright.async_api import Error as PlaywrightError

from browser.runner import BrowserUnavailable
from core.api import error_line
from core.errors import TabLost

if TYPE_CHECKING:
    from playwright.async_api import Page

    from browser.runner import Browser

log = logging.getLogger("penelope.pages")

# Opening a tab and its first evaluation take milliseconds; a tab that takes
# longer than this was handed to a renderer that is dying.
TAB_OPEN_TIMEOUT_S = 5
TAB_OPEN_ATTEMPTS = 3


async def new_tab(browser: Browser, page_id: str) -> Page:
    """A new tab for the page that answers, or 502 when the browser fails it
    (it may have stopped just now: the next call waits for its relaunch).

    Right after renderers are killed, Chromium can hand a new tab to one that
    is dying: the tab's opening then fails ("Target crashed") or never ends,
    or the tab never answers, and no crash event comes. So a tab must answer
    a first evaluation; one that does not is given up (closed in the
    background) and another opened, TAB_OPEN_ATTEMPTS times in all."""
    failure: BaseException | None = None
    for _ in range(TAB_OPEN_ATTEMPTS):
        try:
            tab = await browser.new_tab(timeout_s=TAB_OPEN_TIMEOUT_S)
        except (PlaywrightError, BrowserUnavailable, TimeoutError) as error:
            failure = error
            if isinstance(error, BrowserUnavailable):
                break
            continue
        try:
            await asyncio.wait_for(tab.evaluate("1"), TAB_OPEN_TIMEOUT_S)
            return tab
        except (PlaywrightError, TimeoutError) as error:
            failure = error
            browser.tasks.spawn(close_quietly(tab, page_id), about=f"closing a tab of page {page_id} that did not answer")
        except BaseException:  # cancelled (a client went away): the tab is nobody's
            browser.tasks.spawn(close_quietly(tab, page_id), about=f"closing a tab of page {page_id} nobody waits for")
            raise
    reason = error_line(failure) if failure is not None and str(failure) else "it did not answer"
    raise TabLost(f"The browser could not open a tab for page {page_id}: {reason}", page_id)


def url_of(tab: Page | None) -> str:
    """The tab's last URL as Playwright knows it (no call to the browser)."""
    if tab is None:
        return ""
    url = tab.url
    return "" if url == "about:blank" else url


async def close_quietly(tab: Page | None, name: str) -> None:
    """Close a tab that may be crashed, or gone with its browser."""
    if tab is None or tab.is_closed():
        return
    try:
        await asyncio.wait_for(tab.close(), TAB_OPEN_TIMEOUT_S)
    except Exception as error:  # the browser itself may be gone
        log.warning("closing page %s's old tab failed: %s", name, error)
