"""The request line and headers bounded with the envelope: past MAX_HEAD_BYTES
(16384 bytes together, as Twisted counts them) the worker and the waker
answer 414 with the envelope, naming the bound and saying to send the
parameters as a POST body, where daphne under Twisted answered a bare 400
or closed the connection without a word. Checked on raw sockets, a byte
either side of the bound, and with a real HTTP client."""

from __future__ import annotations

import json
import socket

import httpx
import pytest

from harness.waker import WakerProcess
from harness.worker import free_port

LIMIT = 16384
# What Twisted counts for the request line and a Host header: the lines without their CRLFs.
REQUEST_LINE = "GET {target} HTTP/1.1"
HOST = "Host: 127.0.0.1"
TOO_LONG = (
    "The request line and headers are longer than the {server} accepts (16384 bytes together); send the "
    "parameters as a POST body."
)


def exchange(port: int, head: bytes) -> bytes:
    """Send a request's head and read until the server closes or an answer is
    whole (it closes after a 414, keeps the connection after a 200)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head)
        return read_whole(sock)


def read_whole(sock: socket.socket) -> bytes:
    data = b""
    while True:
        head, found, body = data.partition(b"\r\n\r\n")
        if found:
            lengths = [line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
            if lengths and len(body) >= int(lengths[0].split(b":")[1]):
                return data
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def parsed(answer: bytes) -> tuple[int, dict[str, str], dict]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, json.loads(body)


def assert_refused(answer: bytes, *, server: str, page_id: str | None) -> None:
    status, headers, body = parsed(answer)
    assert status == 414, answer[:300]
    assert headers["content-type"] == "application/json"
    assert int(headers["content-length"]) == len(answer.partition(b"\r\n\r\n")[2])
    assert body == {"success": False, "error": TOO_LONG.format(server=server), "page_id": page_id}


def query_of(path: str, total: int, extra_headers: tuple[str, ...] = (), name: str = "x", start: str = "") -> str:
    """A target `path?x=...` (`name`=`start` and as many `a`s as it takes)
    whose request line, Host and `extra_headers` take `total` bytes."""
    fixed = len(REQUEST_LINE.format(target=f"{path}?{name}={start}")) + len(HOST) + sum(map(len, extra_headers))
    return f"{path}?{name}={start}{'a' * (total - fixed)}"


def head(target: str, *headers: str) -> bytes:
    return ("\r\n".join([REQUEST_LINE.format(target=target), HOST, *headers]) + "\r\n\r\n").encode()


@pytest.mark.parametrize(
    "total",
    [
        LIMIT + 1,  # Twisted's count of the whole head passed: it answered a bare 400
        LIMIT + 300,  # the request line alone past Twisted's line length: it closed without a word
        100_000,
        1_000_000,
    ],
)
def test_a_query_string_past_the_bound_answers_414_with_the_envelope_before_the_key(worker, total):
    answer = exchange(worker.port, head(query_of("/api/v1/main/plugin/web/evaluate", total)))
    assert_refused(answer, server="worker", page_id="main")


def test_the_bound_is_the_whole_head_a_byte_within_it_is_served(worker):
    auth = f"Authorization: Bearer {worker.key}"
    # A parameter web/evaluate declares (an undeclared one answers 400): `1//aaa…` is 1.
    target = query_of("/api/v1/main/plugin/web/evaluate", LIMIT, (auth,), name="expression", start="1//")
    within = exchange(worker.port, head(target, auth))
    status, _, body = parsed(within)
    assert status == 200 and body["value"] == 1, body
    past = exchange(worker.port, head(query_of("/api/v1/main/plugin/web/state", LIMIT + 1, (auth,)), auth))
    assert_refused(past, server="worker", page_id="main")


def test_one_header_past_the_bound_or_many_that_pass_it_together_answer_414(worker):
    # One header line longer than the bound: Twisted closed the connection without an answer.
    one = exchange(worker.port, head("/api/v1/pages", "X-Long: " + "b" * LIMIT))
    assert_refused(one, server="worker", page_id=None)
    # Many headers, each short, past the bound together: Twisted answered a bare 400.
    many = exchange(worker.port, head("/api/v1/pages", *(f"X-H{n}: {'c' * 100}" for n in range(200))))
    assert_refused(many, server="worker", page_id=None)


def test_a_long_request_on_a_kept_connection_answers_414_after_a_served_one(worker):
    with socket.create_connection(("127.0.0.1", worker.port), timeout=30) as sock:
        sock.sendall(head("/api/v1/health"))
        status, _, body = parsed(read_whole(sock))
        assert status == 200 and body["success"] is True
        sock.sendall(head(query_of("/api/v1/jobs", 20_000)))
        assert_refused(read_whole(sock), server="worker", page_id=None)


def test_a_client_reads_the_414_and_the_same_parameters_as_a_post_body_work(worker):
    expression = "'" + "x" * 17_000 + "'.length"
    with worker.client() as api:
        refused = api.get("/main/plugin/web/evaluate", params={"expression": expression})
        assert refused.status_code == 414
        assert refused.json() == {"success": False, "error": TOO_LONG.format(server="worker"), "page_id": "main"}
        served = api.post("/main/plugin/web/evaluate", json={"expression": expression})
        assert served.status_code == 200 and served.json()["value"] == 17_000
    # A long header from a client, too.
    answer = httpx.get(worker.base_url + "/api/v1/health", headers={"X-Long": "d" * LIMIT})
    assert answer.status_code == 414 and answer.json()["error"] == TOO_LONG.format(server="worker")


def test_the_waker_answers_the_same(tmp_path):
    waker = WakerProcess(tmp_path, [{"name": "p1", "mode": "sleepy", "port": free_port()}])
    try:
        waker.start()
        assert_refused(exchange(waker.port, head(query_of("/w/p1/api/v1/main/plugin/web/state", 20_000))),
                       server="waker", page_id=None)
        assert_refused(exchange(waker.port, head("/api/v1/personas", "X-Long: " + "e" * LIMIT)),
                       server="waker", page_id=None)
        assert waker.persona("p1")["state"] == "stopped"  # nothing woke the sleepy worker
    finally:
        waker.stop()
