"""What a CDP connection holds, both ways, against a real worker and its
real Chromium (cdp/sockets.py, browser/tap.py, browser/tap.cjs): a client
that reads nothing while Chromium's answers pile up is closed with 4008,
stops counting as work and leaves no memory behind; a large message from a
client that cannot be passed on (the driver is stopped) leaves the worker
answering, and nothing more is read from that client meanwhile; a message
past the size limit is refused with a close frame, 1009, not a dropped
connection. The limits are scaled down through settings."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import sqlite3
import struct
import termios
import threading
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from browser.tap import DRIVER_COMMAND
from core.procfs import command_line, descendants
from core.serving import CDP_MAX_MESSAGE_BYTES
from harness.worker import WorkerProcess, wait_until
from tests.conftest import worker_env
from tests.support.faults import browser_pids

MIB = 1024 * 1024
QUEUE_MB = 16  # CDP_QUEUE_MB of the test's worker


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory):
    running = WorkerProcess(
        tmp_path_factory.mktemp("store"),
        env=worker_env(
            REQUEST_LOG_FLUSH_S="0.05",
            CDP_QUEUE_MB=str(QUEUE_MB),
            # Long enough that the test reads up to the close whatever the machine's load;
            # the connection stops counting as work at once all the same.
            CDP_CLOSE_WAIT_S="300",
            BROWSER_CHECK_S="3600",  # a stopped driver is not a browser to relaunch here
        ),
    ).start()
    yield running
    running.stop()


@pytest.fixture
def lease(api):
    taken = api.post("/main/lease", json={"ttl": 300}).json()["lease"]
    yield taken
    api.delete("/main/lease", headers={"X-Lease": taken})


def open_client(worker: WorkerProcess, api: httpx.Client, lease: str, **options) -> ClientConnection:
    made = api.post("/main/cdp", json={}, headers={"X-Lease": lease})
    assert made.status_code == 201, made.text
    url = worker.base_url.replace("http://", "ws://") + made.json()["url"]
    return connect(url, max_size=None, open_timeout=10, ping_interval=None, compression=None, **options)


def page_session(client: ClientConnection) -> str:
    client.send(json.dumps({"id": 1, "method": "Target.setAutoAttach", "params": {
        "autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True,
    }}))
    while True:
        message = json.loads(client.recv(timeout=15))
        if message.get("method") == "Target.attachedToTarget":
            return message["params"]["sessionId"]


def closed_with(client: ClientConnection) -> tuple[int | None, str, int]:
    """Read to the end: the close's code and reason, and how many messages came before it."""
    read = 0
    try:
        while True:
            client.recv(timeout=60)
            read += 1
    except ConnectionClosed as closed:
        return (closed.rcvd.code, closed.rcvd.reason, read) if closed.rcvd else (None, "", read)


def resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def cdp_rows(worker: WorkerProcess) -> list[tuple[str, str]]:
    with sqlite3.connect(worker.store / "penelope.db") as db:
        rows = db.execute("select route, path from activity_requestlogentry where route like 'cdp/%' order by id").fetchall()
    db.close()
    return rows


def test_a_client_that_reads_nothing_is_closed_with_4008_stops_counting_and_gives_its_memory_back(worker, api, lease):
    """The audit's reproduction, scaled to CDP_QUEUE_MB=16: answers four
    times the bound pile up for a client that reads none of them. It was
    left hanging until its lease ended, counted as work all along, its
    queue emptied under the sender (`pop from an empty deque`)."""
    client = open_client(worker, api, lease, max_queue=1)  # its reading thread stops after one message
    with client:
        session = page_session(client)
        before = resident_mb(worker.process.pid)
        for number in range(16):
            client.send(json.dumps({"id": 10 + number, "sessionId": session, "method": "Runtime.evaluate", "params": {
                "expression": f"'x'.repeat({4 * MIB})", "returnByValue": True,
            }}))
        wait_until(
            lambda: api.get("/activity").json()["cdp_connections"] == 0, timeout=120,
            what="the client that reads nothing no longer counted",
        )
        assert api.get("/activity").json()["requests_in_flight"] == 0
        code, reason, read = closed_with(client)
    assert (code, reason) == (4008, "The client read its messages too slowly."), read
    assert read < 16  # the rest was dropped, not kept for it
    rows = wait_until(lambda: [row for row in cdp_rows(worker) if row[0] == "cdp/closed"], what="the closed row")
    assert rows[-1][1].endswith(": The client read its messages too slowly."), rows
    assert not [row for row in cdp_rows(worker) if "deque" in row[1]]
    # What waited for the client is gone: well under the 64 MiB asked for, with room for the allocator's own.
    wait_until(lambda: resident_mb(worker.process.pid) < before + 2 * QUEUE_MB, what="the worker's memory back")


def test_a_message_past_the_limit_is_refused_with_a_close_frame_not_a_dropped_connection(worker, api, lease):
    with open_client(worker, api, lease) as client:
        session = page_session(client)
        client.send(json.dumps({"id": 2, "sessionId": session, "method": "Runtime.evaluate", "params": {
            "expression": "1", "objectGroup": "y" * CDP_MAX_MESSAGE_BYTES,
        }}))
        code, reason, _ = closed_with(client)
    assert code == 1009 and "exceeds payload limit of 67108864 octets" in reason, (code, reason)
    wait_until(lambda: api.get("/activity").json()["cdp_connections"] == 0, what="the connection uncounted")
    assert api.get("/health").status_code == 200


def driver_of(worker: WorkerProcess) -> int:
    """The Playwright driver of the worker's browser, whose tap carries every CDP message."""
    drivers = [pid for pid in descendants(worker.process.pid) if DRIVER_COMMAND in command_line(pid)]
    assert len(drivers) == 1, drivers
    return drivers[0]


def bytes_acked(sock: socket.socket) -> int:
    """What the worker's end has acknowledged of what this socket sent (TCP_INFO's tcpi_bytes_acked)."""
    return struct.unpack_from("Q", sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 192), 120)[0]


def unsent(sock: socket.socket) -> int:
    """Bytes this socket still holds for the worker (SIOCOUTQ)."""
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]


@pytest.mark.parametrize("stopped", ["driver", "browser"])
def test_a_large_message_in_flight_leaves_the_worker_answering_and_the_client_unread(worker, api, lease, stopped):
    """Three 16 MiB messages while the first cannot reach Chromium: the
    driver (whose tap carries it) or Chromium itself is stopped. The worker
    writes it to the tap a part at a time as the tap takes it, the tap takes
    no more than Chromium's pipe does, and the worker reads nothing more of
    the client meanwhile (its TCP window stays shut: not one more byte is
    acknowledged however many times /health answers); the worker and the
    driver each hold about one message, not all. Both read and wrote
    without a bound: the messages sat in the worker's or the driver's memory."""
    big = 16 * MIB
    with open_client(worker, api, lease) as client:
        session = page_session(client)
        driver = driver_of(worker)
        target = driver if stopped == "driver" else browser_pids(worker.store)[0]
        before = {pid: resident_mb(pid) for pid in (worker.process.pid, driver)}
        os.kill(target, signal.SIGSTOP)
        try:
            messages = [
                json.dumps({"id": number, "sessionId": session, "method": "Runtime.evaluate", "params": {
                    "expression": str(number), "objectGroup": "y" * big,
                }})
                for number in (2, 3, 4)
            ]
            sending = threading.Thread(target=lambda: [client.send(message) for message in messages], daemon=True)
            sending.start()

            def client_unread(answers: int = 50) -> bool:
                """The client's bytes still wait, and not one more is taken while /health answers many times."""
                acked = bytes_acked(client.socket)
                for _ in range(answers):
                    assert api.get("/health").status_code == 200  # a turn of the worker's loop, at least
                    if bytes_acked(client.socket) != acked or unsent(client.socket) == 0:
                        return False
                return True

            wait_until(client_unread, what=f"the worker reading nothing more of the client while the {stopped} is stopped")
            assert sending.is_alive()
            # One message in the copies it passes through on its way (the
            # frames, the text, the parsed object, the parts written): the
            # worker grew 41 to 80 MB here, the bound leaves room above that.
            # All three held, as before the bound, is three times as much.
            for pid, was in before.items():
                assert resident_mb(pid) < was + 7 * big / MIB, (pid, was, resident_mb(pid))
        finally:
            os.kill(target, signal.SIGCONT)
        sending.join(60)
        answers = {}
        while len(answers) < 3:
            message = json.loads(client.recv(timeout=60))
            if message.get("id") in (2, 3, 4):
                answers[message["id"]] = message["result"]["result"]["value"]
    assert answers == {2: 2, 3: 3, 4: 4}
