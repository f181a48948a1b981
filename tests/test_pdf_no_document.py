"""`web/pdf` on a page whose last navigation failed (issue 31 item 5): the
page shows Chromium's error page, no document, and the print answers 502
with a sentence saying so, at once and on every call after, where it
answered "Printing failed" right after the failure and printed Chromium's
error page on the next call. A page that loads again prints again."""

from __future__ import annotations

from tests.test_web_media import call

# Chromium refuses port 9 before it connects (net::ERR_UNSAFE_PORT), and
# nothing listens there: the navigation fails at once, on loopback.
REFUSED = "http://127.0.0.1:9/"
NO_DOCUMENT = (
    "Page main has no document to print: its last navigation failed and it shows the browser's error page. "
    "Open a URL that loads, then print."
)


def test_pdf_after_a_failed_navigation_says_there_is_no_document_every_time(api, site):
    for _ in range(3):  # right after each failure, the error page is still being committed
        failed = api.post("/main/plugin/web/open", json={"url": REFUSED})
        assert failed.status_code == 502 and "net::ERR_UNSAFE_PORT" in failed.json()["error"]
        refused = api.post("/main/plugin/web/pdf", json={})
        assert refused.status_code == 502, refused.text
        assert refused.json() == {"success": False, "error": NO_DOCUMENT, "page_id": "main"}
        # Once the error page is in, the same: it is not the site's document.
        again = api.post("/main/plugin/web/pdf", json={"format": "A4"})
        assert (again.status_code, again.json()["error"]) == (502, NO_DOCUMENT)

    # web/open answers its 502 once Chromium has committed its error page, and
    # leaves it again even when Chromium restarts that navigation elsewhere.
    opened = api.post("/main/plugin/web/open", json={"url": site.url + "/"})
    assert opened.status_code == 200 and opened.json()["url"] == site.url + "/", opened.text
    printed = call(api, "pdf")["media"]
    assert printed["content_type"] == "application/pdf" and printed["size"] > 0
