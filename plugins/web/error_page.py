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
the commit's event before the print's answer).
"""

from __future__ import annotations

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

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


def no_document(page_id: str) -> PluginError:
    """The answer to printing a page that shows the browser's error page:
    502, as the failed navigation itself answered."""
    return PluginError(
        502,
        f"Page {page_id} has no document to print: its last navigation failed and it shows the browser's error "
        "page. Open a URL that loads, then print.",
    )
