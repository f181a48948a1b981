"""`web/download` and `ctx.expect_download` on a real worker against loopback
pages: a link served as an attachment, a file behind a cookie, a file built in
the page, two from one click, a file the browser shows instead of saving
(text, JSON, an image, a PDF); the bound, the guard, a cancelled job, and
nothing left behind by any of them."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest

from harness.worker import WorkerProcess, wait_until
from plugins.downloads import shown_filename
from tests.conftest import worker_env
from tests.support.site import SHOWN, Site

PATTERN = bytes(range(256)) * 256  # what the site's /download sends, 64 KiB at a time


def pattern(kib: int) -> bytes:
    whole, part = divmod(kib * 1024, len(PATTERN))
    return PATTERN * whole + PATTERN[:part]


@pytest.fixture(scope="module")
def worker(tmp_path_factory) -> Iterator:
    running = WorkerProcess(tmp_path_factory.mktemp("store"), env=worker_env(DOWNLOAD_MAX_MB="2")).start()
    yield running
    running.stop()


def call(worker, action: str, page: str = "main", **params):
    with worker.client() as client:
        return client.post(f"/{page}/plugin/web/{action}", json=params)


def open_downloads(worker, site) -> None:
    opened = call(worker, "open", url=f"{site.url}/download.html")
    assert opened.status_code == 200, opened.text


def left_behind(worker) -> list[str]:
    """Downloads still in the browser's folder."""
    folder = worker.store / "downloads"
    return sorted(p.name for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def media_count(worker) -> int:
    return len([p for p in (worker.store / "media").glob("*") if p.is_file()])


def fetch(worker, link: str) -> bytes:
    with worker.client() as client:
        got = client.get(link.removeprefix("/api/v1"))
    assert got.status_code == 200
    return got.content


def test_a_link_served_as_an_attachment_comes_down_with_its_name_size_and_hash(worker, site):
    open_downloads(worker, site)
    answer = call(worker, "download", selector="#link")
    assert answer.status_code == 200, answer.text
    body, data = answer.json(), pattern(300)
    assert (body["filename"], body["size"], body["content_type"]) == ("statement.csv", len(data), "text/csv")
    assert body["sha256"] == hashlib.sha256(data).hexdigest()
    assert body["media"] == {key: body["files"][0][key] for key in ("url", "expires_at", "content_type", "size")}
    assert len(body["files"]) == 1
    assert fetch(worker, body["media"]["url"]) == data
    assert left_behind(worker) == []


def test_a_url_that_answers_a_file_comes_down_and_the_page_stays(worker, site):
    open_downloads(worker, site)
    answer = call(worker, "download", url=f"{site.url}/download?name=direct.pdf&kib=10")
    assert answer.status_code == 200, answer.text
    assert answer.json()["content_type"] == "application/pdf"
    assert fetch(worker, answer.json()["media"]["url"]) == pattern(10)
    with worker.client() as client:
        assert client.post("/main/plugin/web/state").json()["url"] == f"{site.url}/download.html"


def test_a_file_behind_a_cookie_comes_down_once_the_cookie_is_set(worker, site):
    open_downloads(worker, site)
    refused = call(worker, "download", selector="#behind", timeout_ms=500)
    assert refused.status_code == 408 and refused.json()["error"] == "No download started within 500 ms."
    cookie = {"name": "flavour", "value": "oat", "url": f"{site.url}/"}
    assert call(worker, "cookies", op="set", cookies=[cookie]).status_code == 200
    open_downloads(worker, site)
    answer = call(worker, "download", selector="#behind")
    assert answer.status_code == 200, answer.text
    assert answer.json()["filename"] == "private.csv" and fetch(worker, answer.json()["media"]["url"]) == pattern(4)
    call(worker, "cookies", op="clear", url=f"{site.url}/")


def test_a_file_built_in_the_page_and_two_from_one_click(worker, site):
    open_downloads(worker, site)
    built = call(worker, "download", selector="#blob").json()
    assert built["filename"] == "export.txt" and fetch(worker, built["media"]["url"]) == b"made in the page\n"
    both = call(worker, "download", selector="#two")
    assert both.status_code == 200, both.text
    files = both.json()["files"]
    assert [f["filename"] for f in files] == ["first.txt", "second.txt"]
    assert [fetch(worker, f["url"]) for f in files] == [b"one\n", b"two\n"]


def test_bad_input_and_no_download_answer_and_keep_nothing(worker, site):
    open_downloads(worker, site)
    before = media_count(worker)
    both = call(worker, "download", selector="#link", url=f"{site.url}/download")
    assert both.status_code == 400 and "give either url or selector" in both.json()["error"]
    page = call(worker, "download", url=f"{site.url}/index.html", timeout_ms=300)
    assert page.status_code == 408  # a page, not a file
    assert call(worker, "open", url=f"{site.url}/shown.html").status_code == 200
    opened = call(worker, "download", selector="#page", timeout_ms=300)
    assert opened.status_code == 408  # a click that opens a page: no file either
    assert media_count(worker) == before and left_behind(worker) == []


def test_a_download_past_the_bound_is_cancelled_as_it_grows_and_leaves_nothing(worker, site):
    open_downloads(worker, site)
    before = media_count(worker)
    answer = call(worker, "download", selector="#big")  # 4 MiB, past DOWNLOAD_MAX_MB=2
    assert answer.status_code == 507, answer.text
    error = answer.json()["error"]
    assert error.startswith("The download passed the worker's bound (DOWNLOAD_MAX_MB, 2 MB) at ")
    assert int(error.split(" at ")[1].split(" bytes")[0]) < 4 * 1024 * 1024  # stopped before its end
    assert media_count(worker) == before
    wait_until(lambda: left_behind(worker) == [], what="the cancelled download's file to go")


def test_a_job_holds_its_download_and_a_cancel_mid_download_leaves_nothing(worker, site):
    open_downloads(worker, site)
    with worker.client() as client:
        started = client.post("/main/plugin/web/download", json={"selector": "#link"}, headers={"X-Result-Ttl": "60"})
        ended = client.get(f"/jobs/{started.json()['job_id']}", params={"wait": 30}).json()
        assert ended["state"] == "done", ended
        link = ended["result"]["media"]["url"]
        assert fetch(worker, link) == fetch(worker, link) == pattern(300)  # held with the job: not one-shot

        before = media_count(worker)
        slow = client.post("/main/plugin/web/download", json={"selector": "#slow"}, headers={"X-Result-Ttl": "60"})
        job_id = slow.json()["job_id"]
        wait_until(lambda: any(name.endswith(".crdownload") for name in left_behind(worker)), what="the download")
        assert client.post(f"/jobs/{job_id}/cancel").status_code == 200
        assert client.get(f"/jobs/{job_id}", params={"wait": 30}).json()["state"] == "cancelled"
    wait_until(lambda: left_behind(worker) == [], what="the cancelled job's download to go")
    assert media_count(worker) == before
    with worker.client() as client:  # the cancelled plugin's tab is reopened: the next test finds it free
        wait_until(lambda: not client.get("/main").json()["busy"], what="page main to be free again")


def test_the_guard_refuses_a_download_from_a_private_address(make_worker):
    guarded = make_worker({"BROWSER_REFUSE_PRIVATE": "1"})
    with Site() as site:
        answer = call(guarded, "download", url=f"{site.url}/download?name=x.bin", timeout_ms=2000)
        assert answer.status_code >= 400 and answer.json()["success"] is False
        shown = call(guarded, "download", url=f"{site.url}/shown/notes.txt", timeout_ms=2000)
        assert shown.status_code == 403 and shown.json()["success"] is False  # not the guard's page, kept
        assert site.server.requests == []  # the browser never reached it
    assert left_behind(guarded) == [] and media_count(guarded) == 0


def test_downloads_kept_by_a_job_survive_a_restart_and_the_browsers_folder_is_emptied(make_worker, site):
    worker = make_worker()
    open_downloads(worker, site)
    with worker.client() as client:
        started = client.post("/main/plugin/web/download", json={"selector": "#blob"}, headers={"X-Result-Ttl": "300"})
        job_id = started.json()["job_id"]
        link = client.get(f"/jobs/{job_id}", params={"wait": 30}).json()["result"]["media"]["url"]
    stray = worker.store / "downloads" / "left-by-a-crash.crdownload"
    worker.kill()
    stray.parent.mkdir(exist_ok=True)
    stray.write_bytes(b"partial")
    worker.start()
    assert fetch(worker, link) == b"made in the page\n"
    assert not stray.exists()


def test_a_familys_action_takes_its_own_download(worker, site):
    open_downloads(worker, site)
    with worker.client() as client:
        answer = client.post("/main/plugin/testing/export", json={"selector": "#blob"})
    assert answer.status_code == 200, answer.text
    (stored,) = answer.json()["files"]
    assert stored["filename"] == "export.txt" and fetch(worker, stored["url"]) == b"made in the page\n"
    with worker.client() as client:
        nothing = client.post("/main/plugin/testing/export", json={"selector": "#none", "timeout_ms": 200})
    assert nothing.status_code == 408
    assert left_behind(worker) == []


# --- files the browser shows instead of saving --------------------------------------

# Each file /shown/ serves, by the link of shown.html that opens it: its path,
# and the name and type it is kept under (items.json is named inline by
# Content-Disposition; the others by the URL's last part).
SHOWN_FILES = {
    "text": ("/shown/notes.txt", "notes.txt", "text/plain"),
    "json": ("/shown/items.json?disposition=export.json", "export.json", "application/json"),
    "image": ("/shown/dot.png", "dot.png", "image/png"),
    "pdf": ("/shown/letter.pdf", "letter.pdf", "application/pdf"),
}


def assert_shown_file_kept(worker, answer, kind: str) -> None:
    """The answer has a real download's shape, and the file is the bytes served."""
    assert answer.status_code == 200, answer.text
    path, filename, content_type = SHOWN_FILES[kind]
    data = SHOWN[filename.rsplit(".", 1)[-1]][0]
    body = answer.json()
    assert (body["filename"], body["size"], body["content_type"]) == (filename, len(data), content_type)
    assert body["sha256"] == hashlib.sha256(data).hexdigest()
    assert body["media"] == {key: body["files"][0][key] for key in ("url", "expires_at", "content_type", "size")}
    assert len(body["files"]) == 1 and set(body["files"][0]) == {
        "url", "expires_at", "content_type", "size", "filename", "sha256"
    }  # fmt: skip
    assert fetch(worker, body["media"]["url"]) == data
    assert left_behind(worker) == []


@pytest.mark.parametrize("kind", SHOWN_FILES)
def test_a_url_the_browser_shows_instead_of_saving_comes_down_as_a_download_would(worker, site, kind):
    open_downloads(worker, site)
    answer = call(worker, "download", url=site.url + SHOWN_FILES[kind][0], timeout_ms=5000)
    assert_shown_file_kept(worker, answer, kind)
    with worker.client() as client:  # saved, not shown: the page stays
        assert client.post("/main/plugin/web/state").json()["url"] == f"{site.url}/download.html"


@pytest.mark.parametrize("kind", SHOWN_FILES)
def test_a_click_that_opens_a_file_the_browser_shows_takes_it(worker, site, kind):
    assert call(worker, "open", url=f"{site.url}/shown.html").status_code == 200
    answer = call(worker, "download", selector=f"#{kind}", timeout_ms=5000)
    assert_shown_file_kept(worker, answer, kind)


def test_a_shown_file_with_no_name_is_named_by_its_type_and_one_that_failed_answers_502(worker, site):
    open_downloads(worker, site)
    unnamed = call(worker, "download", url=f"{site.url}/shown/?as=json", timeout_ms=5000)
    assert unnamed.status_code == 200, unnamed.text
    assert (unnamed.json()["filename"], unnamed.json()["content_type"]) == ("download.json", "application/json")
    # With the page's own routes (`block`) and DevTools session (`user_agent`) beside the watch's.
    controls = {"block": ["image"], "user_agent": "Shown/1.0"}
    bare = call(worker, "download", url=f"{site.url}/shown/export?as=txt", timeout_ms=5000, **controls)
    assert (bare.json()["filename"], bare.json()["content_type"]) == ("export.txt", "text/plain")
    hidden = call(worker, "download", url=f"{site.url}/shown/x.png?disposition=../../.profile", timeout_ms=5000)
    assert hidden.json()["filename"] == "profile.png"  # made safe (no folders, not hidden), and typed
    before = media_count(worker)
    failed = call(worker, "download", url=f"{site.url}/shown/gone.txt?status=404", timeout_ms=5000)
    assert failed.status_code == 502, failed.text
    assert (
        failed.json()["error"] == f"The download of {site.url}/shown/gone.txt?status=404 failed: the site answered 404."
    )
    untyped = call(worker, "download", url=f"{site.url}/shown/gone.txt?status=500&untyped=1", timeout_ms=5000)
    assert untyped.status_code == 502, untyped.text  # a failure without a type is one too, at once
    assert media_count(worker) == before and left_behind(worker) == []


def test_a_shown_file_s_name_is_read_as_chromium_reads_it():
    encoded = "inline; filename=\"euro.txt\"; filename*=UTF-8''%E2%82%AC-rates.txt"
    assert shown_filename("http://site/x", encoded, "text/plain") == "€-rates.txt"  # filename* first (RFC 6266)
    assert shown_filename("http://site/x", 'inline; filename="rates.txt"', "text/plain") == "rates.txt"
    assert shown_filename("http://site/a/report", "", "application/json") == "report.json"
    assert shown_filename("http://site/a/", "", "text/plain") == "download.txt"


def test_a_shown_file_past_the_bound_is_refused_and_nothing_is_kept(worker, site):
    before = media_count(worker)
    # 4 MiB of text, past DOWNLOAD_MAX_MB=2: its length announced, by url; its length unknown (chunked), by a click.
    announced = call(worker, "download", url=f"{site.url}/shown/big.txt?kib=4096")
    assert call(worker, "open", url=f"{site.url}/shown.html").status_code == 200
    chunked = call(worker, "download", selector="#big")
    for answer in (announced, chunked):
        assert answer.status_code == 507, answer.text
        error = answer.json()["error"]
        assert error.startswith("The download passed the worker's bound (DOWNLOAD_MAX_MB, 2 MB) at ")
        assert int(error.split(" at ")[1].split(" bytes")[0]) > 2 * 1024 * 1024
    assert media_count(worker) == before
    wait_until(lambda: left_behind(worker) == [], what="the cancelled downloads' files to go")
