"""Envelopes and headers on every path (issue 56, item 9), each checked on a
real worker over a real socket or a real client:

- a request line with a raw 0xFF or NUL byte, or a header daphne refuses,
  answers 400 with the envelope, where Twisted answered a bare `400` with
  no body and daphne an HTML page (core/seams/server.py, core/bounded_http.py);
- a JSON body in UTF-16 or UTF-32, or with a byte order mark, answers 400
  with a sentence and starts nothing, where Python's `json.loads` guessed
  the encoding and ran it (core/api.py);
"""

from __future__ import annotations

import json
import socket

import pytest

from tests.test_head_bound import parsed, read_whole
from tests.test_jobs import job_ids

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
