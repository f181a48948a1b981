"""`web/screenshot` and `web/pdf` options against a real worker and the
loopback site: tall pages captured in parts and joined (or answered as JPEG
files in order), checked pixel by pixel against the colours the page computed;
PDF paper, orientation, ranges and scale read back from the PDF; refused
values answered 400 with nothing stored; and both actions run as jobs."""

from __future__ import annotations

import io
import re
import time
import zlib

import httpx
import pytest
from PIL import Image

from tests.test_web_media import call, evaluate

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
JPEG_SOI = b"\xff\xd8\xff"
# Bands of the tall page to check: the first, those around where one
# full-page capture used to turn white (about 104,000 to 130,000 px), the last.
CHECKED_BANDS = [0, 50, 100, 104, 105, 110, 120, 130, 131, 150, 170, 189]
# A band's pixel away from its text (the text holds the left 70%).
SAMPLE_X_FROM_RIGHT = 40

# What the tests read from the tall page: the size Playwright gives a full page,
# each band's box in the document, and the colour the page computed for it.
PAGE_JS = """() => {
  const body = document.body, root = document.documentElement;
  const bands = [...document.querySelectorAll('.band')].map((band, i) => {
    const box = band.getBoundingClientRect();
    return {top: box.top + scrollY, left: box.left + scrollX, right: box.right + scrollX, colour: bandColour(i)};
  });
  return {
    width: Math.max(body.scrollWidth, root.scrollWidth, body.offsetWidth, root.offsetWidth, body.clientWidth, root.clientWidth),
    height: Math.max(body.scrollHeight, root.scrollHeight, body.offsetHeight, root.offsetHeight, body.clientHeight, root.clientHeight),
    scrollWidth: root.scrollWidth, scrollHeight: root.scrollHeight, bands,
  };
}"""


def download(api: httpx.Client, worker, media: dict) -> bytes:
    response = api.get(worker.base_url + media["url"])
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == media["content_type"]
    assert len(response.content) == media["size"]
    return response.content


def stored_media(worker) -> list[str]:
    return sorted(entry.name for entry in (worker.store / "media").iterdir())


def open_tall(api: httpx.Client, site, bands: int = 190) -> dict:
    call(api, "open", url=f"{site.url}/tall.html?bands={bands}")
    return evaluate(api, f"({PAGE_JS})()")


def decode(data: bytes) -> Image.Image:
    """A PNG or JPEG decoded whole, however tall (Pillow refuses past its
    decompression-bomb limit unless told)."""
    limit, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, None
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    finally:
        Image.MAX_IMAGE_PIXELS = limit
    return image.convert("RGB")


def band_checks(image: Image.Image, page: dict, bands: list[int], left: int = 0, top: int = 0) -> list[tuple]:
    """For each band, (index, its colour in the image, the page's colour, how
    many colours the band's middle shows: its text's too, so more than a few)."""
    checks = []
    for index in bands:
        band = page["bands"][index]
        y = int(band["top"]) + 500 - top
        x = int(band["right"]) - SAMPLE_X_FROM_RIGHT - left
        stripe = image.crop((int(band["left"]) - left, y - 200, int(band["right"]) - left, y + 200))
        checks.append((index, image.getpixel((x, y)), tuple(band["colour"]), len(stripe.getcolors(1 << 16) or [])))
    return checks


def assert_bands_match(checks: list[tuple], tolerance: int = 0) -> None:
    for index, seen, expected, colours in checks:
        assert all(abs(a - b) <= tolerance for a, b in zip(seen, expected, strict=True)), f"band {index}: {seen} != {expected}"
        assert colours > 10, f"band {index} shows {colours} colours: its text is missing"


# --- screenshots: a tall page ---------------------------------------------------------


@pytest.fixture(scope="module")
def tall_png(worker, site):
    """The 190-band page's full-page PNG, taken once (about 15 s): the answer,
    the page as measured, and the checks of its bands."""
    with worker.client(timeout=120) as api:
        page = open_tall(api, site)
        answer = call(api, "screenshot", full_page=True)
        image = decode(download(api, worker, answer["media"]))
    return {"answer": answer, "page": page, "size": image.size, "checks": band_checks(image, page, CHECKED_BANDS)}


def test_a_tall_full_page_png_is_one_file_of_the_whole_page(tall_png):
    answer, page = tall_png["answer"], tall_png["page"]
    assert page["height"] > 130_000  # taller than one capture of Chromium holds
    assert tall_png["size"] == (page["scrollWidth"], page["scrollHeight"]) == (answer["width"], answer["height"])
    assert answer["parts"] == -(-page["height"] // 16384) > 1
    assert answer["files"] == [answer["media"]]
    assert answer["media"]["content_type"] == "image/png"


def test_a_tall_full_page_png_shows_every_band_down_to_the_last(tall_png):
    assert_bands_match(tall_png["checks"])


def test_a_page_that_fits_one_part_is_one_capture_as_before(api, worker, site):
    call(api, "open", url=site.url + "/box.html")
    evaluate(api, "document.body.style.minHeight = '2345px'")
    width, height = evaluate(api, "[document.documentElement.clientWidth, document.scrollingElement.scrollHeight]")
    answer = call(api, "screenshot", full_page=True)
    assert (answer["width"], answer["height"], answer["parts"]) == (width, height, 1)
    assert answer["files"] == [answer["media"]]
    data = download(api, worker, answer["media"])
    assert data.startswith(PNG_SIGNATURE)
    assert decode(data).size == (width, height)


def test_a_viewport_and_an_element_answer_their_size_in_one_part(api, worker, site):
    call(api, "open", url=site.url + "/box.html")
    viewport = evaluate(api, "[window.innerWidth, window.innerHeight]")
    answer = call(api, "screenshot")
    assert [answer["width"], answer["height"], answer["parts"]] == [*viewport, 1]
    answer = call(api, "screenshot", selector="#box")
    assert (answer["width"], answer["height"], answer["parts"]) == (240, 130, 1)
    assert decode(download(api, worker, answer["media"])).size == (240, 130)


def test_an_element_taller_than_a_part_is_joined_from_parts(api, worker, site):
    page = open_tall(api, site, bands=20)
    answer = call(api, "screenshot", selector="#bands")
    width, height = page["width"] - 32, page["height"] - 60  # #bands: 16 px margins, under a 60 px heading
    assert (answer["width"], answer["height"], answer["parts"]) == (width, height, 2)
    image = decode(download(api, worker, answer["media"]))
    assert image.size == (width, height)
    assert_bands_match(band_checks(image, page, [0, 15, 16, 17, 19], left=16, top=60))


def test_a_jpeg_with_quality_is_a_jpeg_of_the_page(api, worker, site):
    call(api, "open", url=site.url + "/box.html")
    viewport = evaluate(api, "[window.innerWidth, window.innerHeight]")
    # As a GET: `format` in the query is the action's, not a response format.
    response = api.get("/main/plugin/web/screenshot", params={"format": "jpeg", "quality": 40})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["media"]["content_type"] == "image/jpeg"
    assert [answer["width"], answer["height"], answer["parts"]] == [*viewport, 1]
    low = download(api, worker, answer["media"])
    assert low.startswith(JPEG_SOI)
    assert list(Image.open(io.BytesIO(low)).size) == viewport
    high = download(api, worker, call(api, "screenshot", format="jpeg", quality=100)["media"])
    assert high.startswith(JPEG_SOI) and len(high) > len(low)


def test_a_tall_jpeg_is_several_files_in_order(api, worker, site):
    page = open_tall(api, site, bands=40)
    answer = call(api, "screenshot", full_page=True, format="jpeg", quality=90)
    assert answer["parts"] == len(answer["files"]) == 3
    assert answer["media"] == answer["files"][0]
    assert (answer["width"], answer["height"]) == (page["width"], page["height"])
    images = []
    for media in answer["files"]:
        assert media["content_type"] == "image/jpeg"
        data = download(api, worker, media)
        assert data.startswith(JPEG_SOI)
        images.append(decode(data))
    assert [image.width for image in images] == [page["width"]] * 3
    assert sum(image.height for image in images) == page["height"]
    # The last band, in the last file, is the page's colour (JPEG is lossy).
    last = images[-1]
    assert_bands_match(band_checks(last, page, [39], top=page["height"] - last.height), tolerance=12)


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"format": "png", "quality": 80}, "Invalid parameters: quality goes with format jpeg (a PNG is lossless)."),
        ({"quality": 80}, "Invalid parameters: quality goes with format jpeg (a PNG is lossless)."),
        ({"selector": "#box", "full_page": True}, "Invalid parameters: give selector or full_page, not both."),
        ({"format": "jpeg", "quality": 101}, "Invalid parameter 'quality': Ensure this value is less than or equal to 100."),
        ({"format": "webp"}, "Invalid parameter 'format': \"webp\" is not a valid choice."),
    ],
)
def test_refused_screenshot_options_answer_400_and_store_nothing(api, worker, site, params, error):
    call(api, "open", url=site.url + "/box.html")
    before = stored_media(worker)
    response = api.post("/main/plugin/web/screenshot", json=params)
    assert response.status_code == 400, response.text
    assert response.json()["success"] is False
    assert response.json()["error"] == error
    assert stored_media(worker) == before


# --- PDFs ------------------------------------------------------------------------------


def media_boxes(pdf: bytes) -> list[tuple[float, float]]:
    """Each page's MediaBox width and height, in points."""
    boxes = re.findall(rb"/MediaBox\s*\[\s*([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s*\]", pdf)
    return [(float(x1) - float(x0), float(y1) - float(y0)) for x0, y0, x1, y1 in boxes]


def page_count(pdf: bytes) -> int:
    """The page objects (`/Type /Page`), not the page tree (`/Type /Pages`)."""
    return len(re.findall(rb"/Type\s*/Page(?![A-Za-z])", pdf))


def content_streams(pdf: bytes) -> list[bytes]:
    streams = []
    for start in re.finditer(rb"stream\r?\n", pdf):
        try:
            streams.append(zlib.decompress(pdf[start.end() : pdf.find(b"endstream", start.end())]))
        except zlib.error:
            pass
    return streams


def pdf_of(api, worker, **params) -> bytes:
    media = call(api, "pdf", **params)["media"]
    assert media["content_type"] == "application/pdf"
    data = download(api, worker, media)
    assert data.startswith(b"%PDF-")
    return data


def assert_size(boxes: list[tuple[float, float]], width: float, height: float) -> None:
    assert boxes, "the PDF has no MediaBox"
    for box in boxes:
        assert box == pytest.approx((width, height), abs=1), boxes


def test_pdf_paper_formats_and_landscape_set_the_media_box(api, worker, site):
    call(api, "open", url=site.url + "/index.html")
    assert_size(media_boxes(pdf_of(api, worker)), 612, 792)  # Letter, as before
    assert_size(media_boxes(pdf_of(api, worker, format="Letter")), 612, 792)
    assert_size(media_boxes(pdf_of(api, worker, format="A4")), 595, 842)
    assert_size(media_boxes(pdf_of(api, worker, format="A4", landscape=True)), 842, 595)
    (width, height), *_ = media_boxes(pdf_of(api, worker, landscape=True))
    assert width > height
    assert_size(media_boxes(pdf_of(api, worker, width="100mm", height="50mm", margin={"top": "5mm"})), 283.5, 141.7)


def test_pdf_page_ranges_and_scale_choose_the_pages(api, worker, site):
    open_tall(api, site, bands=6)
    whole = page_count(pdf_of(api, worker))
    assert whole > 3
    assert page_count(pdf_of(api, worker, page_ranges="1")) == 1
    assert page_count(pdf_of(api, worker, page_ranges="1-2, 4")) == 3
    assert page_count(pdf_of(api, worker, page_ranges="2-")) == whole - 1
    assert page_count(pdf_of(api, worker, scale=0.1)) < whole


def test_pdf_prints_backgrounds_unless_told_not_to(api, worker, site):
    call(api, "open", url=site.url + "/box.html")
    box_fill = b".8 .4 .2 rg"  # #box's #c63
    assert any(box_fill in stream for stream in content_streams(pdf_of(api, worker)))
    assert not any(box_fill in stream for stream in content_streams(pdf_of(api, worker, print_background=False)))


def test_a_page_range_past_the_document_answers_400_and_stores_nothing(api, worker, site):
    call(api, "open", url=site.url + "/index.html")
    before = stored_media(worker)
    response = api.post("/main/plugin/web/pdf", json={"page_ranges": "7-9"})
    assert response.status_code == 400, response.text
    assert response.json()["error"] == (
        "page_ranges '7-9' names no page of this document: every range starts past its last page."
    )
    assert stored_media(worker) == before


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"scale": 0.05}, "Invalid parameter 'scale': Ensure this value is greater than or equal to 0.1."),
        ({"scale": 2.5}, "Invalid parameter 'scale': Ensure this value is less than or equal to 2."),
        ({"format": "B5"}, "Invalid parameter 'format': \"B5\" is not a valid choice."),
        ({"page_ranges": "1-x"}, "Invalid parameter 'page_ranges': must be page numbers and ranges separated by commas, e.g. \"1-3, 5\"."),
        ({"page_ranges": "3-2"}, "Invalid parameter 'page_ranges': the range 3-2 ends before it starts."),
        ({"page_ranges": "0"}, "Invalid parameter 'page_ranges': pages are numbered from 1."),
        ({"width": "100mm"}, "Invalid parameters: give width and height together."),
        ({"width": "8in", "height": "1ft"}, "Invalid parameter 'height': must be a number and a unit: px, in, cm or mm (e.g. 210mm)."),
        ({"width": "8in", "height": "11in", "format": "A4"}, "Invalid parameters: give format or width and height, not both."),
        ({"width": "8in", "height": "0.5in"}, "Invalid parameters: height must be at least 1 in."),
        ({"margin": {"left": "300in"}}, "Invalid parameter 'margin.left': must be at most 200 in."),
        ({"margin": {"top": "6in", "bottom": "6in"}}, "The margins leave no room on the paper for the page's content."),
    ],
)
def test_refused_pdf_options_answer_400_and_store_nothing(api, worker, site, params, error):
    call(api, "open", url=site.url + "/index.html")
    before = stored_media(worker)
    response = api.post("/main/plugin/web/pdf", json=params)
    assert response.status_code == 400, response.text
    assert response.json()["success"] is False
    assert response.json()["error"] == error
    assert stored_media(worker) == before


# --- as jobs ----------------------------------------------------------------------------


def run_job(worker, action: str, **params) -> dict:
    """Start the action as a polling job and long-poll it to its end: its result."""
    with worker.client(timeout=90) as api:
        started = api.post(f"/main/plugin/web/{action}", json=params, headers={"X-Result-Ttl": "60"})
        assert started.status_code == 202, started.text
        job_id = started.json()["job_id"]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            job = api.get(f"/jobs/{job_id}", params={"wait": 60}).json()
            if job["state"] != "running":
                break
        assert job["state"] == "done", job
        assert job["status"] == 200, job
        return job["result"]


def test_a_tall_screenshot_runs_as_a_job(api, worker, site):
    page = open_tall(api, site, bands=40)
    result = run_job(worker, "screenshot", full_page=True)
    assert {"media", "files", "width", "height", "parts"} <= result.keys()
    assert (result["width"], result["height"], result["parts"]) == (page["width"], page["height"], 3)
    assert result["files"] == [result["media"]]
    image = decode(download(api, worker, result["media"]))
    assert image.size == (page["width"], page["height"])
    assert_bands_match(band_checks(image, page, [0, 16, 17, 32, 33, 39]))


def test_a_pdf_with_options_runs_as_a_job(api, worker, site):
    open_tall(api, site, bands=6)
    result = run_job(worker, "pdf", format="A4", landscape=True, page_ranges="2")
    data = download(api, worker, result["media"])
    assert page_count(data) == 1
    assert_size(media_boxes(data), 842, 595)


def test_a_wide_page_that_fits_one_part_tall_still_obeys_the_pixel_bound(make_worker, site):
    # 2000 x 1500 px is 3 Mpx: past a 1 Mpx bound it is captured in parts of
    # 500 rows and joined (before, one capture held any width whole).
    worker = make_worker({"SCREENSHOT_PART_PIXELS": "1000000"})
    with worker.client() as api:
        call(api, "open", url=site.url + "/")
        evaluate(api, "document.body.style.margin = '0'; document.body.innerHTML = "
                      "'<div style=\"width:2000px;height:1500px;background:rgb(40,120,200)\"></div>'; 0")
        answer = call(api, "screenshot", full_page=True)
        assert (answer["width"], answer["height"], answer["parts"]) == (2000, 1500, 3)
        image = decode(download(api, worker, answer["media"]))
        assert image.size == (2000, 1500) and image.getpixel((1999, 1499))[:3] == (40, 120, 200)
        jpeg = call(api, "screenshot", full_page=True, format="jpeg")
        assert jpeg["parts"] == len(jpeg["files"]) == 3 and jpeg["height"] == 1500
