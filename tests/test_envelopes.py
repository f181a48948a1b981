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
  `http://[::1]:PORT` (browser/egress.py).
"""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import quote

import pytest

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


# --- JSON bodies are UTF-8 -----------------------------------------------------------------------


def body_of(text: str, encoding: str) -> bytes:
    return text.encode(encoding)


@pytest.mark.parametrize(
    ("encoding", "sentence"),
    [
        ("utf-8-sig", "The request body starts with a UTF-8 byte order mark; send JSON as UTF-8 without one (RFC 8259)."),
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
    start = api.post(
        "/main/plugin/web/state", content=json.dumps({}).encode(encoding), headers={"X-Result-Ttl": "60"}
    )
    assert start.status_code == 400 and start.json()["error"] == sentence, start.text
    assert {page["page_id"] for page in api.get("/pages").json()["pages"]} == pages
    assert job_ids(api) == jobs


def test_the_same_body_in_utf8_is_taken(api):
    opened = api.post("/pages", content=json.dumps({"page_id": "utf8"}).encode())
    assert opened.status_code == 201, opened.text
    assert api.delete("/utf8").status_code in (200, 204)
    # Bytes that are not UTF-8 at all are no JSON, as before: 422.
    assert api.post("/pages", content=b'{"page_id": "caf\xe9"}').status_code == 422


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
