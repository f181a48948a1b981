"""A page whose last navigation failed: it shows Chromium's own error page
(`chrome-error://chromewebdata/`, "This site can't be reached"), which is
no document of any site.

Playwright's `goto` fails as soon as the navigation does, and Chromium
commits its error page just after, as a navigation of its own: for a few
tens of milliseconds the page is between documents, and Chromium refuses to
print it ("Printing failed"). So `web/pdf` right after a failed `web/open`
failed every time, and the next call printed Chromium's error page as if it
were the site's. Both now answer the same sentence (`no_document`): the
page is checked before printing, after a failed print (the error page
committing), and after a print (committed while it printed; Playwright has
the commit's event before the print's answer). And `web/open` answers its
failure only once the error page is committed (`settle_after`), and leaves
the error page even when Chromium restarts the navigation (`navigate`).
"""

from __future__ import annotations

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page, Response

from plugins.framework import PluginError

ERROR_PAGE = "chrome-error://"
# How long a failed print waits for the error page to commit: it follows the
# failed navigation within milliseconds; a print that failed for another
# reason waits this long before it answers its own 502.
COMMIT_WAIT_MS = 5000


def shows_error_page(page: Page) -> bool:
    return page.url.startswith(ERROR_PAGE)


async def error_page_committing(page: Page) -> bool:
    """Whether the page shows the browser's error page, or commits it within
    COMMIT_WAIT_MS: asked after a step failed on the page."""
    try:
        await page.wait_for_url(lambda url: url.startswith(ERROR_PAGE), wait_until="commit", timeout=COMMIT_WAIT_MS)
    except PlaywrightError:  # a timeout: no error page came
        return False
    return True


# How long a failed navigation waits for its error page, so that the page's
# next call finds it committed (Chromium commits it within milliseconds).
SETTLE_MS = 2000


async def settle_after(page: Page, error: PlaywrightError) -> None:
    """After a navigation that failed on the network (`net::ERR_…`), wait for
    Chromium to commit its error page before answering, so the page's next
    call (a print, another open) meets the page as it stays, not between two
    documents. An aborted navigation commits no error page: nothing to wait for."""
    message = error.message or ""
    if "net::ERR_" not in message or "net::ERR_ABORTED" in message or shows_error_page(page):
        return
    try:
        await page.wait_for_url(lambda url: url.startswith(ERROR_PAGE), wait_until="commit", timeout=SETTLE_MS)
    except PlaywrightError:
        pass  # no error page came: the page stays as it was


async def navigate(page: Page, url: str, *, wait_until: str, timeout: float) -> Response | None:
    """`page.goto`, from the browser's error page too. Leaving it, Chromium
    may restart the navigation (another renderer takes it), which Playwright
    reports as the navigation "interrupted by another navigation" to the same
    URL: that restarted navigation is then waited for, as `goto` would have
    (its response is not known: None). Or the error page of a navigation
    that failed before commits once more and cuts this one short
    ("interrupted by another navigation to chrome-error://"): it is then
    sent again, once."""
    for last_try in (False, True):
        try:
            return await page.goto(url, wait_until=wait_until, timeout=timeout)
        except PlaywrightError as error:
            message = error.message or ""
            if f'interrupted by another navigation to "{url}"' in message:
                break
            if last_try or f'interrupted by another navigation to "{ERROR_PAGE}' not in message:
                raise
    # The restarted navigation is the same one: the page leaves the error page for it.
    await page.wait_for_url(lambda current: not current.startswith(ERROR_PAGE), wait_until=wait_until, timeout=timeout)
    return None


def no_document(page_id: str) -> PluginError:
    """The answer to printing a page that shows the browser's error page:
    502, as the failed navigation itself answered."""
    return PluginError(
        502,
        f"Page {page_id} has no document to print: its last navigation failed and it shows the browser's error "
        "page. Open a URL that loads, then print.",
    )
