"""The web family's files and scrolling, against a real worker and a loopback site:
screenshots and PDFs downloaded through their media links, and `collect`
stopping for each of its reasons."""

from __future__ import annotations

import struct

import httpx
import pytest

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def call(api: httpx.Client, action: str, **params) -> dict:
    response = api.post(f"/main/plugin/web/{action}", json=params)
    assert response.status_code == 200, response.text
    return response.json()


def evaluate(api: httpx.Client, expression: str):
    response = api.post("/main/primitive/evaluate", json={"expression": expression})
    assert response.status_code == 200, response.text
    return response.json()["value"]


def download(api: httpx.Client, worker, media: dict) -> httpx.Response:
    response = api.get(worker.base_url + media["url"])
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == media["content_type"]
    assert len(response.content) == media["size"]
    return response


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk, which the format puts first."""
    assert data[:8] == PNG_SIGNATURE, data[:16]
    length, chunk = struct.unpack(">I4s", data[8:16])
    assert chunk == b"IHDR" and length == 13
    return struct.unpack(">II", data[16:24])


# --- screenshots and PDFs ---------------------------------------------------------


def test_a_screenshot_is_a_png_of_the_viewport(api, worker, site):
    call(api, "open", url=site.url + "/box.html")
    viewport = evaluate(api, "[window.innerWidth, window.innerHeight]")
    media = call(api, "screenshot")["media"]
    assert media["content_type"] == "image/png"
    response = download(api, worker, media)
    assert response.headers["content-disposition"] == 'attachment; filename="screenshot.png"'
    assert list(png_size(response.content)) == viewport


def test_a_selector_screenshot_is_the_elements_size(api, worker, site):
    call(api, "open", url=site.url + "/box.html")
    media = call(api, "screenshot", selector="#box")["media"]
    assert png_size(download(api, worker, media).content) == (240, 130)


def test_a_full_page_screenshot_covers_the_whole_document(api, worker, site):
    call(api, "open", url=site.url + "/box.html")
    evaluate(api, "document.body.style.minHeight = '2345px'")
    width, height = evaluate(api, "[document.documentElement.clientWidth, document.scrollingElement.scrollHeight]")
    viewport_height = evaluate(api, "window.innerHeight")
    assert height > viewport_height  # the test means something only if the page is taller
    media = call(api, "screenshot", full_page=True)["media"]
    assert png_size(download(api, worker, media).content) == (width, height)


def test_a_selector_that_matches_nothing_answers_404_and_stores_nothing(api, worker, site):
    call(api, "open", url=site.url + "/box.html")
    before = sorted(p.name for p in (worker.store / "media").iterdir())
    response = api.post("/main/plugin/web/screenshot", json={"selector": "#nothing"})
    assert response.status_code == 404
    assert response.json()["error"] == "Nothing on the page matches '#nothing'."
    assert sorted(p.name for p in (worker.store / "media").iterdir()) == before


def test_pdf_is_a_pdf_file(api, worker, site):
    call(api, "open", url=site.url + "/index.html")
    media = call(api, "pdf")["media"]
    assert media["content_type"] == "application/pdf"
    response = download(api, worker, media)
    assert response.content.startswith(b"%PDF-")
    assert response.content.rstrip().endswith(b"%%EOF")
    assert response.headers["content-disposition"] == 'attachment; filename="page.pdf"'


# --- collect -------------------------------------------------------------------------


def collect(api: httpx.Client, **params) -> dict:
    return call(api, "collect", item_selector=".item", attribute="data-id", scroll_pause_ms=250, **params)


def test_collect_stops_at_its_limit(api, site):
    call(api, "open", url=site.url + "/scroll.html?total=200&delay_ms=20")
    answer = collect(api, limit=35, max_seconds=60)
    assert answer["stopped_because"] == "limit"
    assert answer["count"] == 35
    assert answer["items"] == [f"id-{n}" for n in range(35)]


def test_collect_stops_at_the_end_of_the_list(api, site):
    call(api, "open", url=site.url + "/scroll.html?total=45&delay_ms=20")
    answer = collect(api, limit=1000, max_seconds=60)
    assert answer["stopped_because"] == "end"
    assert answer["count"] == 45
    assert answer["items"] == [f"id-{n}" for n in range(45)]


def test_collect_stops_when_its_time_is_up(api, site):
    call(api, "open", url=site.url + "/scroll.html?forever=1&delay_ms=20")
    answer = collect(api, limit=100_000, max_seconds=1)
    assert answer["stopped_because"] == "time"
    assert 10 <= answer["count"] < 100_000
    assert len(set(answer["items"])) == answer["count"]
    assert answer["items"][:10] == [f"id-{n}" for n in range(10)]


def test_collect_reads_text_without_an_attribute(api, site):
    call(api, "open", url=site.url + "/index.html")
    answer = call(api, "collect", item_selector=".item", limit=10, max_seconds=10, scroll_pause_ms=50)
    assert answer["items"] == ["one", "two", "three"]
    assert answer["stopped_because"] == "end"


@pytest.mark.parametrize(
    "params", [{}, {"item_selector": ".item", "limit": 0}, {"item_selector": ".item", "max_seconds": 0}]
)
def test_collect_parameters_are_checked(api, params):
    response = api.post("/main/plugin/web/collect", json=params)
    assert response.status_code == 400, response.text
