"""Malformed input, route by route: each answers its documented 4xx with the
envelope, and nothing starts (no job row, no page claimed, no file written)."""

from __future__ import annotations

import http.client
import json
import socket
from urllib.parse import quote

import httpx
import pytest

from harness.worker import WorkerProcess
from media_store.models import MediaFile
from tests.support.worker_store import WorkerStore
from tests.test_head_bound import parsed, read_whole
from tests.test_jobs import job_ids

LONG = "x" * 1000
BAD_PAGE_IDS = [
    quote("../x", safe=""), "..", LONG, quote("é", safe=""), quote("main page", safe=""), "MAIN", "-lead", "pages",
    "jobs", "media", "activity", "health", quote("main'--", safe=""), quote('main"', safe=""),
]
BAD_IDS = [
    quote("../../penelope.db", safe=""), quote("../key", safe=""), "..", quote("'", safe=""), quote('"', safe=""),
    quote("1' OR '1'='1", safe=""), quote("x; DROP TABLE jobs_job", safe=""), "%00", LONG, "0" * 15, "g" * 16,
]


def snapshot(worker: WorkerProcess, worker_db: WorkerStore, api: httpx.Client) -> dict:
    """What a bad request must not change."""
    jobs = job_ids(api)
    files = worker_db.count(MediaFile.objects.all())
    pages = [
        {key: page[key] for key in ("page_id", "busy", "job_id", "leased", "waiting")}
        for page in api.get("/pages").json()["pages"]
    ]
    on_disk = sorted(path.name for path in (worker.store / "media").iterdir()) if (worker.store / "media").exists() else []
    return {"jobs": jobs, "files": files, "pages": pages, "on_disk": on_disk}


@pytest.fixture(scope="module")
def worker_db(worker, django_db_blocker) -> WorkerStore:
    return WorkerStore(worker.store, django_db_blocker)


@pytest.fixture
def unchanged(worker, worker_db, api):
    """Fails the test if the worker's state moved."""
    before = snapshot(worker, worker_db, api)
    yield
    assert snapshot(worker, worker_db, api) == before


def exact(worker: WorkerProcess, method: str, target: str, body: dict | None = None, headers: dict | None = None):
    """Send `target` as it is: httpx, like any client that follows RFC 3986,
    would resolve a `..` segment before sending (`/api/v1/..` goes out as
    `/api/`, outside the API), and the bad id would never reach the worker."""
    content = json.dumps(body).encode() if body is not None else b""
    connection = http.client.HTTPConnection("127.0.0.1", worker.port, timeout=60)
    try:
        connection.putrequest(method, target, skip_accept_encoding=True)
        sent = {"Authorization": f"Bearer {worker.key}", "Content-Length": str(len(content)), **(headers or {})}
        if body is not None:
            sent["Content-Type"] = "application/json"
        for name, value in sent.items():
            connection.putheader(name, value)
        connection.endheaders(content)
        answer = connection.getresponse()
        return httpx.Response(answer.status, headers=answer.getheaders(), content=answer.read())
    finally:
        connection.close()


def assert_envelope(response: httpx.Response, *statuses: int) -> dict:
    assert response.status_code in statuses, (response.status_code, response.text[:300])
    body = response.json()
    assert set(body) == {"success", "error", "page_id"} and body["success"] is False
    assert body["error"] and "Traceback" not in body["error"] and "File \"" not in body["error"]
    return body


# --- job headers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ttl", ["0", "-1", "601", "abc", "1e309", "1e2", "nan", "inf", "-inf", "", "60,60", "1_0", "0x10", "６０".encode()]
)
def test_bad_result_ttls(api, unchanged, ttl):
    assert_envelope(api.post("/main/plugin/web/state", headers={"X-Result-Ttl": ttl}), 400)


def test_a_repeated_ttl_header(api, unchanged):
    response = api.post("/main/plugin/web/state", headers=[("X-Result-Ttl", "60"), ("X-Result-Ttl", "60")])
    assert_envelope(response, 400)


@pytest.mark.parametrize(
    "callback",
    ["/hook", "hook", "ftp://example.com/hook", "javascript:alert(1)", "file:///etc/passwd", "http://", "http:///x",
     "https://" + "a" * 10_000 + ".com/", "http://exa mple.com/", "http://example.com/a b", "http://[::1/",
     "http://example.com:70000/", "data:text/plain,hi", "http://xn--zz.com/", "http://" + "a" * 64 + ".com/",
     "http://😀.com/".encode(), ""],
)
def test_bad_callback_urls(api, unchanged, callback):
    assert_envelope(api.post("/main/plugin/web/state", headers={"X-Callback-Url": callback}), 400)


def test_both_job_headers(api, unchanged):
    headers = {"X-Result-Ttl": "60", "X-Callback-Url": "http://127.0.0.1:9/hook"}
    assert_envelope(api.post("/main/plugin/web/state", headers=headers), 400)


def test_job_headers_on_a_primitive(api, unchanged):
    assert_envelope(api.post("/main/primitive/content", headers={"X-Callback-Url": "http://127.0.0.1:9/"}), 400)


# --- bodies --------------------------------------------------------------------------------


BODIES = [
    (b"{", 422),
    (b"{'a': 1}", 422),
    (b"\xff\xfe", 422),
    (b"[1, 2]", 400),
    (b'"text"', 400),
    (b"null", 400),
    (b"[" * 10_000 + b"]" * 10_000, 422),
    (b'{"a":' * 10_000 + b"1" + b"}" * 10_000, 422),
]


@pytest.mark.parametrize("body, status", BODIES, ids=[f"body{n}" for n in range(len(BODIES))])
@pytest.mark.parametrize(
    "path", ["/main/plugin/web/open", "/main/primitive/goto", "/main/lease", "/pages"]
)
def test_malformed_bodies(api, unchanged, path, body, status):
    response = api.post(path, content=body, headers={"Content-Type": "application/json", "X-Result-Ttl": "60"}
                        if "plugin" in path else {"Content-Type": "application/json"})
    assert_envelope(response, status)


def test_a_body_over_the_size_limit(api, unchanged):
    big = json.dumps({"url": "http://example.com/", "pad": "x" * (2 * 1024 * 1024)}).encode()
    assert_envelope(api.post("/main/plugin/web/open", content=big, headers={"X-Result-Ttl": "60"}), 413)


@pytest.mark.parametrize(
    "params",
    [{"url": "not a url"}, {"url": "javascript:alert(1)"}, {"url": ["http://example.com"]}, {"url": None},
     {"url": "http://example.com", "timeout_ms": -1}, {"url": "http://example.com", "wait_until": "never"},
     {"url": "http://example.com", "timeout_ms": "1e309"}],
)
def test_invalid_plugin_parameters(api, unchanged, params):
    body = assert_envelope(api.post("/main/plugin/web/open", json=params, headers={"X-Result-Ttl": "60"}), 400)
    assert body["error"].startswith("Invalid parameter")


@pytest.mark.parametrize("ttl", [0, -1, 601, "abc", None, [], {}, "1e309", True])
def test_invalid_lease_ttls(api, unchanged, ttl):
    assert_envelope(api.post("/main/lease", json={"ttl": ttl}), 400)


def test_an_overlong_lease_header(api, unchanged):
    assert_envelope(api.post("/main/plugin/web/state", headers={"X-Lease": "L" * 10_000}), 423)


def test_an_oversized_header_is_refused_with_414_and_changes_nothing(worker, unchanged):
    # A header line past the 16 KiB bound is refused before the worker's code
    # (core/seams/, bound_request_heads): 414 with the envelope, then the
    # connection closes. tests/test_head_bound.py checks the bound itself.
    request = (
        f"POST /api/v1/main/plugin/web/state HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {worker.key}\r\n"
        f"Content-Length: 0\r\nX-Pad: {'p' * 100_000}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", worker.port), timeout=30) as sock:
        sock.sendall(request)
        answer = read_whole(sock)
    status, _, body = parsed(answer)
    assert status == 414
    assert body["success"] is False and body["page_id"] == "main" and "POST body" in body["error"]


# --- path parameters -------------------------------------------------------------------------


def status_for_a_bad_page_id(page_id: str, route: str) -> int:
    if page_id == quote("../x", safe=""):
        return 404  # the server decodes %2F first: /api/v1/../x is a path no route has
    if page_id in ("jobs", "media") and route == "lease":
        return 405  # /api/v1/jobs/lease is the poll of a job "lease", /api/v1/media/lease a download: both GET
    return 400


@pytest.mark.parametrize("page_id", BAD_PAGE_IDS)
def test_bad_page_ids_on_every_page_route(worker, unchanged, page_id):
    page_routes = [("GET", "", None, {}), ("DELETE", "", None, {})]
    if page_id in ("pages", "activity", "health", "jobs", "media"):
        page_routes = []  # /api/v1/<word> is that word's own route (media's: uploads)
    for method, route, body, headers in [
        *page_routes,
        ("POST", "lease", {"ttl": 10}, {}),
        ("POST", "plugin/web/state", None, {"X-Result-Ttl": "60"}),
        ("POST", "primitive/content", None, {}),
    ]:
        target = f"/api/v1/{page_id}/{route}".removesuffix("/")
        response = exact(worker, method, target, body, headers)
        assert_envelope(response, status_for_a_bad_page_id(page_id, route))


@pytest.mark.parametrize("body", [None, {}, {"ttl": 0}, {"ttl": 10, "extra": 1}])
def test_a_lease_on_a_reserved_word_names_the_word_before_the_body(api, unchanged, body):
    answer = api.post("/any/lease", json=body) if body is not None else api.post("/any/lease")
    assert_envelope(answer, 400)
    assert answer.json()["error"] == "'any' is a word the API uses and cannot name a page."


@pytest.mark.parametrize("page_id", ["../x", LONG, "é", "pages", "jobs", "A", "", None, 7, ["main"]])
def test_bad_page_ids_when_opening_a_page(api, unchanged, page_id):
    assert_envelope(api.post("/pages", json={"page_id": page_id}), 400)


@pytest.mark.parametrize("job_id", BAD_IDS)
def test_bad_job_ids(worker, unchanged, job_id):
    assert_envelope(exact(worker, "GET", f"/api/v1/jobs/{job_id}"), 404)


@pytest.mark.parametrize("token", BAD_IDS)
def test_bad_media_tokens_read_nothing(worker, unchanged, token):
    response = exact(worker, "GET", f"/api/v1/media/{token}")
    assert_envelope(response, 404)
    assert b"SQLite" not in response.content and b"PENELOPE" not in response.content


@pytest.mark.parametrize("path", ["/main/plugin/" + LONG + "/x", "/main/plugin/web/" + LONG, "/main/primitive/" + LONG])
def test_unknown_plugins_and_primitives(api, unchanged, path):
    assert_envelope(api.post(path), 404)
