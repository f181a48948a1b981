"""Envelopes and headers on every path (issue 56, item 9), each checked on a
real worker over a real socket or a real client:

- a request line with a raw 0xFF or NUL byte, or a header daphne refuses,
  answers 400 with the envelope, where Twisted answered a bare `400` with
  no body and daphne an HTML page (core/seams/server.py, core/bounded_http.py);
- a JSON body in UTF-16 or UTF-32, or with a byte order mark, answers 400
  with a sentence and starts nothing, where Python's `json.loads` guessed
  the encoding and ran it (core/api.py);
- an upload's name loses Unicode's bidirectional controls, which can show
  `invoice\u202efdp.exe` as `invoiceexe.pdf` (media_store/store.py);
- a media answer, the file's and a refusal's, carries
  `X-Content-Type-Options: nosniff` (media_store/views.py);
- the `503` for MAX_JOBS carries `Retry-After`, as the `429` for QUEUE_MAX
  does (jobs/services.py);
- a refusal of the egress guard writes an IPv6 address in brackets,
  `http://[::1]:PORT` (browser/egress.py);
- `web/open` and `primitive/goto` take any host a browser takes
  (`localhost.`, `127.1`) and leave the address to the egress guard, where
  the URL field refused them as "Enter a valid URL" (core/shapes.py);
- a refresh that is a redirect (within 1 s of the load) is followed by
  `web/open`, so one the guard refuses answers 403 naming the address,
  where the call answered 200 for the first page (plugins/web/refresh.py).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, urlsplit

import httpx
import pytest
from rest_framework import serializers

from core.shapes import NavigationUrl
from harness.waker import WakerProcess
from harness.worker import WorkerProcess, free_port
from plugins.web.refresh import refresh_target
from tests.conftest import worker_env
from tests.test_egress import Listener
from tests.test_head_bound import parsed, read_whole
from tests.test_jobs import JOB_ENV, ended, job_ids, start, started

MALFORMED = (
    "The request is not well-formed HTTP/1.1 (its request line, a header, or its body's framing), so the worker "
    "read no further; send the target in printable ASCII (percent-encode other bytes) and well-formed headers."
)


def raw_exchange(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        return read_whole(sock)


def assert_malformed(answer: bytes, page_id: str | None) -> None:
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:300]
    status, headers, body = parsed(answer)
    assert status == 400 and headers["content-type"] == "application/json"
    assert body == {"success": False, "error": MALFORMED, "page_id": page_id}


# --- a malformed request line or header ------------------------------------------------------


@pytest.mark.parametrize(
    ("request_line", "page_id"),
    [
        (b"GET /api/v1/health\xff HTTP/1.1", None),
        (b"GET /api/v1/main/plugin/web/state\x00 HTTP/1.1", "main"),
        (b"GET /api/v1/\xffmain HTTP/1.1", None),
        (b"GET /api/v1/pages HTTP/1.1\x00", None),
        (b"G\xffT /api/v1/pages HTTP/1.1", None),
    ],
)
def test_a_raw_byte_in_the_request_line_answers_400_with_the_envelope(worker, request_line, page_id):
    head = request_line + b"\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + worker.key.encode() + b"\r\n\r\n"
    assert_malformed(raw_exchange(worker.port, head), page_id)


def test_a_header_twisted_or_daphne_refuses_answers_400_with_the_envelope(worker):
    key = b"Authorization: Bearer " + worker.key.encode() + b"\r\n"
    for bad_header in (
        b"X-Bad: a\x00b",  # Twisted: NUL in a value
        b"No colon here",  # Twisted: no header at all
        b"Content-Length: ten",  # Twisted: a length that is no number
        b"X-Bad: a\x0bb",  # daphne: a vertical tab in a value (its HTML page)
    ):
        head = b"GET /api/v1/main HTTP/1.1\r\nHost: 127.0.0.1\r\n" + key + bad_header + b"\r\n\r\n"
        assert_malformed(raw_exchange(worker.port, head), "main")


def test_a_malformed_request_after_a_served_one_on_the_same_connection(worker):
    with socket.create_connection(("127.0.0.1", worker.port), timeout=30) as sock:
        sock.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        status, _, body = parsed(read_whole(sock))
        assert status == 200 and body["success"] is True
        sock.sendall(b"GET /api/v1/health\xff HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert_malformed(read_whole(sock), None)  # not the served request's path


def test_a_malformed_chunked_body_answers_400_with_the_envelope(worker):
    head = (
        b"POST /api/v1/pages HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + worker.key.encode() + b"\r\n"
        b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
    )
    assert_malformed(raw_exchange(worker.port, head), None)


def test_the_waker_answers_a_malformed_request_with_its_envelope_and_wakes_nothing(tmp_path):
    waker = WakerProcess(tmp_path, [{"name": "p1", "mode": "sleepy", "port": free_port()}])
    try:
        waker.start()
        answer = raw_exchange(waker.port, b"GET /w/p1/api/v1/health\xff HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        status, headers, body = parsed(answer)
        assert status == 400 and headers["content-type"] == "application/json"
        assert body == {"success": False, "error": MALFORMED.replace("the worker", "the waker"), "page_id": None}
        assert waker.persona("p1")["state"] == "stopped"  # nothing woke the sleepy worker
    finally:
        waker.stop()


# --- JSON bodies are UTF-8 -----------------------------------------------------------------------


def body_of(text: str, encoding: str) -> bytes:
    return text.encode(encoding)


@pytest.mark.parametrize(
    ("encoding", "sentence"),
    [
        (
            "utf-8-sig",
            "The request body starts with a UTF-8 byte order mark; send JSON as UTF-8 without one (RFC 8259).",
        ),
        ("utf-16", "The request body starts with a UTF-16 byte order mark; send JSON as UTF-8 without one (RFC 8259)."),
        ("utf-16-le", "The request body is UTF-16 or UTF-32; send JSON as UTF-8 (RFC 8259)."),
        ("utf-16-be", "The request body is UTF-16 or UTF-32; send JSON as UTF-8 (RFC 8259)."),
        ("utf-32", "The request body starts with a UTF-32 byte order mark; send JSON as UTF-8 without one (RFC 8259)."),
        ("utf-32-be", "The request body is UTF-16 or UTF-32; send JSON as UTF-8 (RFC 8259)."),
    ],
)
def test_a_json_body_that_is_not_utf8_answers_400_and_starts_nothing(worker, api, encoding, sentence):
    jobs = job_ids(api)
    pages = {page["page_id"] for page in api.get("/pages").json()["pages"]}
    opened = api.post("/pages", content=json.dumps({"page_id": "utf16"}).encode(encoding))
    assert opened.status_code == 400, opened.text
    assert opened.json() == {"success": False, "error": sentence, "page_id": None}
    start = api.post("/main/plugin/web/state", content=json.dumps({}).encode(encoding), headers={"X-Result-Ttl": "60"})
    assert start.status_code == 400 and start.json()["error"] == sentence, start.text
    assert {page["page_id"] for page in api.get("/pages").json()["pages"]} == pages
    assert job_ids(api) == jobs


def test_the_same_body_in_utf8_is_taken(api):
    opened = api.post("/pages", content=json.dumps({"page_id": "utf8"}).encode())
    assert opened.status_code == 201, opened.text
    assert api.delete("/utf8").status_code in (200, 204)
    # Bytes that are not UTF-8 at all are no JSON, as before: 422; and so is a
    # body that is no JSON in its own encoding either (a lone BOM, a brace).
    for body in (b'{"page_id": "caf\xe9"}', b"\xff\xfe", "{".encode("utf-16"), "{".encode("utf-16-le")):
        assert api.post("/pages", content=body).status_code == 422, body


# --- upload names --------------------------------------------------------------------------------

BIDI_CONTROLS = ["\u061c", "\u200e", "\u200f", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e",
                 "\u2066", "\u2067", "\u2068", "\u2069"]  # fmt: skip


def upload(worker, filename: str):
    with worker.client() as client:
        return client.post(
            "/media", content=b"%PDF-1.4 x", headers={"Content-Type": "application/pdf", "X-Filename": quote(filename)}
        )


def test_an_upload_named_with_a_right_to_left_override_is_stored_without_it(worker):
    answer = upload(worker, "invoice\u202efdp.exe")
    assert answer.status_code == 201, answer.text
    assert answer.json()["filename"] == "invoicefdp.exe"  # what it is, in the order it is written
    with worker.client() as client:
        fetched = client.get(answer.json()["media"]["url"].removeprefix("/api/v1"))
    assert fetched.status_code == 200
    assert fetched.headers["content-disposition"] == 'attachment; filename="invoicefdp.exe"'


@pytest.mark.parametrize("control", BIDI_CONTROLS)
def test_every_bidirectional_control_is_taken_out_of_an_upload_name(worker, control):
    answer = upload(worker, f"{control}report{control}.pdf{control}")
    assert answer.status_code == 201, answer.text
    assert answer.json()["filename"] == "report.pdf"


def test_a_name_of_bidirectional_controls_alone_is_the_fallback(worker):
    assert upload(worker, "".join(BIDI_CONTROLS)).json()["filename"] == "upload"


# --- media answers are never sniffed ---------------------------------------------------------------


def test_media_answers_carry_nosniff(worker):
    with worker.client() as client:
        stored = client.post("/media", content=b"<script>alert(1)</script>", headers={"Content-Type": "text/plain"})
        assert stored.status_code == 201, stored.text
        assert stored.headers["x-content-type-options"] == "nosniff"
        fetched = client.get(stored.json()["media"]["url"].removeprefix("/api/v1"))
        assert fetched.status_code == 200 and fetched.headers["content-type"].startswith("text/plain")
        assert fetched.headers["x-content-type-options"] == "nosniff"
        missing = client.get("/media/" + "0" * 32)
        assert missing.status_code == 404 and missing.headers["x-content-type-options"] == "nosniff"
        bad_type = client.post("/media", content=b"x", headers={"Content-Type": "not a type"})
        assert bad_type.status_code == 400 and bad_type.headers["x-content-type-options"] == "nosniff"
    with httpx.Client(base_url=f"http://127.0.0.1:{worker.port}/api/v1") as keyless:
        refused = keyless.post("/media", content=b"x")  # refused by the server before the body
        assert refused.status_code == 401 and refused.headers["x-content-type-options"] == "nosniff"


# --- MAX_JOBS' 503 says when to come back --------------------------------------------------------


def test_the_503_for_max_jobs_carries_retry_after_when_the_first_result_lapses(make_worker):
    worker = make_worker(env={**JOB_ENV, "MAX_JOBS": "2"})
    with worker.client() as api:
        ended(api, started(api, "web/state", ttl=40))
        second_started = time.time()
        ended(api, started(api, "web/state", ttl=20))
        refused = start(api, "web/state", ttl=60)
        assert refused.status_code == 503 and "MAX_JOBS" in refused.json()["error"], refused.text
        # The job with ttl 20 leaves first, 20 s after it ended: no later, and no sooner.
        retry_after = int(refused.headers["Retry-After"])
        assert second_started + 20 - time.time() <= retry_after <= 20
        assert len(job_ids(api)) == 2  # nothing stored


def test_the_503_for_max_jobs_while_every_held_job_runs_says_five_seconds(make_worker):
    worker = make_worker(env={**JOB_ENV, "MAX_JOBS": "1"})
    with worker.client() as api:
        assert api.post("/pages", json={"page_id": "other"}).status_code == 201
        running = started(api, "testing/sleep", {"seconds": 30}, ttl=60, page="other")
        refused = start(api, "web/state", ttl=60)
        assert refused.status_code == 503 and refused.headers["Retry-After"] == "5", refused.text
        assert api.post(f"/jobs/{running}/cancel").status_code == 200


# --- the egress guard judges navigations (BROWSER_REFUSE_PRIVATE) -------------------------------


class RefreshingSite(BaseHTTPRequestHandler):
    """`/refresh?to=URL&delay=S` asks for a refresh in a meta element,
    `/header-refresh?to=URL` in a Refresh header; anything else is a plain page."""

    def do_GET(self):
        url = urlsplit(self.path)
        query = {name: values[0] for name, values in parse_qs(url.query).items()}
        headers = {"Content-Type": "text/html", "Cache-Control": "no-store"}
        if url.path == "/refresh":
            body = f'<title>Refreshing</title><meta http-equiv="refresh" content="{query.get("delay", "0")};url={query["to"]}">'
        elif url.path == "/header-refresh":
            body, headers["Refresh"] = "<title>Refreshing</title>", f"0; url={query['to']}"
        else:
            body = f"<title>Landing</title><p>{url.path}</p>"
        data = body.encode()
        self.send_response(200)
        for name, value in {**headers, "Content-Length": str(len(data))}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def guarded(tmp_path_factory) -> Iterator[dict]:
    """A worker under BROWSER_REFUSE_PRIVATE that allows one loopback site,
    and a loopback service it must never reach."""
    site = ThreadingHTTPServer(("127.0.0.1", 0), RefreshingSite)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    forbidden = Listener()
    site_port = site.server_address[1]
    worker = WorkerProcess(
        tmp_path_factory.mktemp("store"),
        env=worker_env(BROWSER_REFUSE_PRIVATE="1", BROWSER_ALLOW=f"127.0.0.1:{site_port}"),
    ).start()
    try:
        with worker.client() as api:
            yield {"api": api, "site": f"http://127.0.0.1:{site_port}", "site_port": site_port, "forbidden": forbidden}
    finally:
        worker.stop()
        site.shutdown()
        forbidden.close()


def loopback_refusal(url: str, host: str) -> str:
    return f"The browser refused {url}: {host} is a loopback, private, link-local or metadata address (BROWSER_REFUSE_PRIVATE)."


def test_a_refusal_writes_an_ipv6_address_in_brackets(guarded):
    api, port = guarded["api"], guarded["forbidden"].port
    opened = api.post("/main/plugin/web/open", json={"url": f"http://[::1]:{port}/"})
    assert opened.status_code == 403, opened.text
    assert opened.json()["error"] == loopback_refusal(f"http://[::1]:{port}", "::1")
    assert api.post("/main/plugin/web/open", json={"url": guarded["site"] + "/page"}).status_code == 200
    fetched = api.post(
        "/main/primitive/evaluate",
        json={"expression": f"fetch('http://[::1]:{port}/x').then(async r => [r.status, await r.text()])"},
    )
    assert fetched.json()["value"] == [403, loopback_refusal(f"http://[::1]:{port}", "::1")]
    assert guarded["forbidden"].connections == 0


def test_web_open_and_goto_take_any_host_a_browser_takes_and_the_guard_judges_it(guarded):
    api, port, site_port = guarded["api"], guarded["forbidden"].port, guarded["site_port"]
    for route, field in (("/main/plugin/web/open", "url"), ("/main/primitive/goto", "url")):
        # Refused by the guard, not by the field: the address is loopback.
        for url in (f"http://localhost.:{port}/", f"http://127.1:{port}/", f"http://0x7f.0.0.1:{port}/"):
            answer = api.post(route, json={field: url})
            assert answer.status_code == 403, (route, url, answer.text)
            assert answer.json()["error"].endswith("(BROWSER_REFUSE_PRIVATE)."), answer.text
        # Allowed by the guard's rules: 127.1 is 127.0.0.1, which BROWSER_ALLOW names with this port.
        allowed = api.post(route, json={field: f"http://127.1:{site_port}/landing"})
        assert allowed.status_code == 200, allowed.text
        # What no browser reads as an address is still no URL.
        for url in ("http://256.1.1.1/", "http://1.2.3.4.5/", "http://1.2.3.0x100/", "http://-a.com/"):
            refused = api.post(route, json={field: url})
            assert refused.status_code == 400 and "Enter a valid URL." in refused.json()["error"], (url, refused.text)
    assert api.post("/main/plugin/web/state").json()["url"] == f"http://127.0.0.1:{site_port}/landing"
    assert guarded["forbidden"].connections == 0


@pytest.mark.parametrize("path", ["/refresh?delay=0&to=", "/refresh?delay=1&to=", "/header-refresh?to="])
def test_a_refresh_to_a_refused_address_after_the_load_answers_403(guarded, path):
    api, port = guarded["api"], guarded["forbidden"].port
    target = f"http://127.0.0.1:{port}/after-load"
    opened = api.post("/main/plugin/web/open", json={"url": guarded["site"] + path + quote(target, safe="")})
    assert opened.status_code == 403, opened.text
    assert opened.json() == {
        "success": False, "error": loopback_refusal(f"http://127.0.0.1:{port}", "127.0.0.1"), "page_id": "main",
    }  # fmt: skip
    assert guarded["forbidden"].connections == 0


def test_a_refresh_to_an_allowed_page_is_followed_and_a_later_one_is_not_waited_for(guarded):
    api = guarded["api"]
    landing = guarded["site"] + "/landing"
    opened = api.post("/main/plugin/web/open", json={"url": guarded["site"] + "/refresh?delay=0&to=" + quote(landing)})
    assert opened.status_code == 200, opened.text
    assert {key: opened.json()[key] for key in ("url", "status", "title")} == {
        "url": landing,
        "status": 200,
        "title": "Landing",
    }
    later = guarded["site"] + "/refresh?delay=30&to=" + quote(landing)
    opened = api.post("/main/plugin/web/open", json={"url": later})
    assert opened.status_code == 200 and opened.json()["title"] == "Refreshing", opened.text


NAVIGATION_URLS = [
    ("http://localhost.:9/", True), ("http://127.1:9/", True), ("http://0x7f.0.0.1/", True), ("http://2130706433/", True),
    ("http://intranet/", True), ("http://a.b/", True), ("http://example.com./x", True), ("http://[::1]:9/", True),
    ("https://xn--bcher-kva.example/", True), ("http://1.1.1.1./", True),
    ("http://256.1.1.1/", False), ("http://1.2.3.4.5/", False), ("http://1.2.3.0x100/", False), ("http://09.1/", False),
    ("http://-a.com/", False), ("http://a_b.com/", False), ("http://a..b/", False), ("gopher://example.com/", False),
    (" http://example.com/", False), ("http://" + "a" * 60 + ("." + "a" * 60) * 4 + "/", False),
]  # fmt: skip


@pytest.mark.parametrize(("url", "good"), NAVIGATION_URLS)
def test_the_document_s_navigation_url_pattern_takes_whatever_the_worker_takes(worker, url, good):
    """Every URL web/open and primitive/goto take matches the pattern the
    OpenAPI document gives them (a URL past the host rules the pattern
    cannot state, a host that ends in a number and is no IPv4 address or
    one past 253 characters, matches it, and the description says so)."""
    with worker.client() as client:
        document = client.get("/schema").json()
    schemas = document["components"]["schemas"]
    for name in ("web.open.params", "primitive.goto.params"):
        schema = schemas[name]["properties"]["url"]
        assert "a host that ends in a number must be a valid IPv4 address" in schema["description"]
        if good:
            assert re.fullmatch(schema["pattern"].removeprefix("^").removesuffix("$"), url), (name, url)
    taken = True
    try:
        NavigationUrl().run_validation(url)
    except serializers.ValidationError as refused:
        taken = False
        assert refused.detail == ["Enter a valid URL."]
    assert taken is good


@pytest.mark.parametrize(
    ("declared", "read"),
    [
        ("0;url=http://b/x", (0.0, "http://b/x")), ("0; URL = 'http://b/x' ", (0.0, "http://b/x")),
        ("1, /next", (1.0, "http://a/next")), ("1.5;url=\"n\"", (1.0, "http://a/n")), ("5", (5.0, "http://a/p")),
        ("0", (0.0, "http://a/p")), ("", None), ("soon", None), (None, None),
    ],
)  # fmt: skip
def test_a_refresh_is_read_as_browsers_read_it(declared, read):
    assert refresh_target(declared, "http://a/p") == read
