"""Bodies bounded before they are buffered: a request without the key, or with
it, costs the worker and the waker at most MAX_BODY_BYTES, however large a
body it declares or sends."""

from __future__ import annotations

import importlib.util
import json
import socket
import threading
from importlib.metadata import version
from pathlib import Path

import pytest

from harness.waker import WakerProcess
from harness.worker import free_port

# Peak resident memory of each process, under bodies sent at once: alone (pytest.ini, `serial`).
pytestmark = pytest.mark.serial

BODY_MB = 200
CHUNK = b"x" * 65536


def peak_rss_mb(pid: int) -> float:
    """The process's resident high-water mark (VmHWM), in MB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def read_answer(sock: socket.socket) -> bytes:
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    return data


def declared(port: int, path: str) -> bytes:
    """A POST declaring a 200 MB body: the answer comes at its headers."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {BODY_MB * 1024 * 1024}\r\n\r\n".encode()
        )
        return read_answer(sock)


def streamed(port: int, path: str) -> int:
    """A chunked POST that goes on for 200 MB unless the server closes first: the bytes it got to send."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
        piece = b"%x\r\n" % len(CHUNK) + CHUNK + b"\r\n"
        try:
            while sent < BODY_MB * 1024 * 1024:
                sock.sendall(piece)
                sent += len(CHUNK)
        except (BrokenPipeError, ConnectionResetError):
            pass
    return sent


def all_at_once(fn, *args, count: int = 10) -> list:
    results: list = [None] * count

    def run(index: int) -> None:
        results[index] = fn(*args)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return results


def envelope(answer: bytes) -> tuple[int, dict]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def test_daphne_still_builds_its_requests_from_the_class_the_bound_replaces():
    # core/bounded_http.py puts BoundedRequest where daphne 4.2.3 looks for its request class,
    # and reads the request line where Twisted's channel keeps it.
    # Read as text, not imported: importing Twisted's web here could install a reactor in the test process.
    assert version("daphne") == "4.2.3"
    assert "protocol.requestFactory = WebRequest" in source_of("daphne.http_protocol")
    twisted_http = source_of("twisted.web.http")
    assert "self._command = command" in twisted_http and "self._path = request" in twisted_http


def source_of(module: str) -> str:
    return Path(importlib.util.find_spec(module).origin).read_text()


def flood(pid: int, port: int, *, declared_path: str, streamed_path: str, server: str) -> None:
    """Ten 200 MB bodies declared at once, then ten streamed: each declared one
    answered 413 with the envelope at its headers, each streamed one cut off
    soon after the bound, and the process's peak memory grown by less than 20 MB."""
    before = peak_rss_mb(pid)
    answers = all_at_once(declared, port, declared_path)
    sent = all_at_once(streamed, port, streamed_path)
    growth = peak_rss_mb(pid) - before
    for answer in answers:
        status, body = envelope(answer)
        assert status == 413
        assert body == {
            "success": False,
            "error": f"The request body is larger than the {server} accepts (MAX_BODY_BYTES, 1048576 bytes).",
            "page_id": None,
        }
    assert all(each < BODY_MB * 1024 * 1024 for each in sent)
    assert growth < 20, f"the {server}'s peak memory grew {growth:.0f} MB"


def test_ten_200_mb_bodies_without_the_key_are_refused_with_413_and_cost_the_worker_nothing(make_worker):
    worker = make_worker()
    flood(worker.process.pid, worker.port, declared_path="/api/v1/health",
          streamed_path="/api/v1/main/plugin/web/evaluate", server="worker")
    with worker.client() as api:  # and it goes on serving
        assert api.post("/main/plugin/web/evaluate", json={"expression": "1 + 1"}).json()["value"] == 2


@pytest.mark.parametrize("limit", ["2000"])
def test_a_body_just_past_a_lower_bound_is_refused_and_one_within_it_served(make_worker, limit):
    worker = make_worker({"MAX_BODY_BYTES": limit})
    with worker.client() as api:
        within = api.post("/main/plugin/web/evaluate", json={"expression": "'" + "a" * 1000 + "'"})
        assert within.status_code == 200
        past = api.post("/main/plugin/web/evaluate", json={"expression": "'" + "a" * 3000 + "'"})
        assert past.status_code == 413
        assert past.json()["error"] == f"The request body is larger than the worker accepts (MAX_BODY_BYTES, {limit} bytes)."


def test_the_waker_refuses_large_bodies_before_its_proxy_reads_them(tmp_path):
    waker = WakerProcess(tmp_path, [{"name": "p1", "mode": "sleepy", "port": free_port()}])
    try:
        waker.start()
        flood(waker.process.pid, waker.port, declared_path="/w/p1/api/v1/pages",
              streamed_path="/w/p1/api/v1/pages", server="waker")
        assert waker.persona("p1")["state"] == "stopped"  # no body woke the sleepy worker
    finally:
        waker.stop()


def test_a_result_past_result_max_bytes_answers_507_for_a_call_and_a_job_and_keeps_nothing(make_worker):
    worker = make_worker({"RESULT_MAX_BYTES": "1000"})
    with worker.client() as api:
        assert api.post("/main/plugin/testing/blob", json={"size": 500}).status_code == 200
        refused = api.post("/main/plugin/testing/blob", json={"size": 2000})
        assert refused.status_code == 507
        assert refused.json() == {
            "success": False,
            "error": "testing/blob answered 2012 bytes of JSON, more than RESULT_MAX_BYTES (1000); nothing of it was "
            "kept. Ask for less, or for files.",
            "page_id": "main",
        }
        job = api.post("/main/plugin/testing/blob", json={"size": 2000}, headers={"X-Result-Ttl": "60"}).json()
        ended = api.get(f"/jobs/{job['job_id']}", params={"wait": 30}).json()
        assert (ended["state"], ended["status"], ended["result"]) == ("done", 507, refused.json())
