"""A CDP client through the waker (waker/proxy.py, waker/socket_relay.py)
against a real waker and its real workers: the lease and the token taken
through `/w/{persona}/api/v1/...` with the Python client, Playwright's
`connect_over_cdp` at `ws://WAKER/w/{persona}/cdp/<token>` in a process of
its own drives the leased page (messages of 1 MB both ways included), and
the worker logs the client's address as the waker forwarded it; a made-up
token is refused at the handshake as the worker refuses it, never wakes a
stopped persona, and never reaches the waker's log; an open CDP connection
keeps a sleepy persona awake past its idle timeout, and once it closes the
persona sleeps. A message of 20 MB passes both ways, through the waker's
daphne and the worker's (core/serving.py raises their limit on CDP paths
alone). Then the relay against a stand-in for the
worker: a CDP socket passes a message of 20 MB, which ends a live view's."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import InvalidStatus

from harness.waker import WakerProcess
from harness.worker import ROOT, wait_until
from tests.test_waker import WAKER_ENV, stop, stopped
from waker import socket_relay

sys.path.insert(0, str(ROOT / "client"))  # the client from the checkout, uninstalled

from penelope_client import Waker  # noqa: E402

# `cdpnap` sleeps after this long idle; `cdp` stays up (10 minutes) unless stopped.
IDLE_TIMEOUT_S = 2.0
# A message each way a little under the 1 MiB that daphne sends and takes
# (its `websocket_max_message_size`, on the worker and on the waker).
LARGE = 1_000_000
# Larger than the live view's largest message (socket_relay.MAX_SIZE, 8 MiB).
HUGE = 20 * 1024 * 1024

# The CDP client: Playwright up first, then told its URL, page and size on
# stdin; it answers what it saw on stdout, and holds the connection until
# its stdin says more (a line) or ends.
SCRIPT = """
import json, sys
from playwright.sync_api import sync_playwright

with sync_playwright() as playwright:
    print("ready", flush=True)
    url, target, size = sys.stdin.readline().split()
    # An address of the client's own choosing, which the waker drops.
    browser = playwright.chromium.connect_over_cdp(url, headers={"X-Forwarded-For": "203.0.113.9"})
    (page,) = browser.contexts[0].pages
    page.goto(target)
    seen = {
        "where": page.text_content("#where"),
        "sum": page.evaluate("1 + 1"),
        "taken": page.evaluate("sent => sent.length", "y" * int(size)),
        "given": len(page.evaluate(f"'x'.repeat({int(size)})")),
    }
    print(json.dumps(seen), flush=True)
    sys.stdin.readline()
"""


@pytest.fixture(scope="module")
def waker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WakerProcess]:
    running = WakerProcess(
        tmp_path_factory.mktemp("waker"),
        [
            {"name": "cdp", "mode": "sleepy", "idle_timeout_s": 600},
            {"name": "cdpnap", "mode": "sleepy", "idle_timeout_s": IDLE_TIMEOUT_S},
        ],
        env=WAKER_ENV,
    ).start()
    yield running
    assert running.stop() == [], "workers outlived their waker"


class CdpClient:
    """SCRIPT in a process of its own, its Playwright started."""

    def __init__(self, folder: Path) -> None:
        script = folder / "cdp_client.py"
        script.write_text(SCRIPT)
        self.process = subprocess.Popen(
            [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=folder
        )
        assert self.process.stdout.readline().strip() == "ready"

    def drive(self, url: str, target: str, size: int = 10) -> dict:
        """Connect at `url`, open `target` on the page, send and be sent
        `size` characters: what it saw. The connection stays open."""
        self.process.stdin.write(f"{url} {target} {size}\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"the CDP client ended with {self.process.wait()}"
        return json.loads(line)

    def close(self) -> int:
        """Disconnect, and wait for the process to end: its exit status."""
        if self.process.poll() is None:
            self.process.stdin.close()
        return self.process.wait(30)


def through(waker: WakerProcess, path: str) -> str:
    return f"ws://127.0.0.1:{waker.port}/w/{path}"


async def refused(url: str) -> int:
    """The status of a handshake that must be refused."""
    with pytest.raises(InvalidStatus) as refusal:
        async with connect(url, proxy=None):
            pass
    return refusal.value.response.status_code


def cdp_rows(waker: WakerProcess, name: str) -> list[str]:
    """The paths of the persona's request log rows of CDP connections opened."""
    with sqlite3.connect(waker.store(name) / "penelope.db") as db:
        rows = db.execute("select path from activity_requestlogentry where route = 'cdp/opened'").fetchall()
    db.close()
    return [path for (path,) in rows]


def test_playwright_drives_a_persona_page_through_the_waker(waker, site, tmp_path):
    client = CdpClient(tmp_path)
    try:
        with Waker(waker.base_url, waker.key) as operator, operator.persona("cdp", waker.worker_key("cdp")) as cdp:
            with cdp.lease("main", ttl=120) as lease:
                url = lease.cdp_url()  # its POST woke the persona
                assert url.startswith(f"ws://127.0.0.1:{waker.port}/w/cdp/cdp/")
                seen = client.drive(url, f"{site.url}/second.html", LARGE)
                assert seen == {"where": "second page", "sum": 2, "taken": LARGE, "given": LARGE}
                # The page the client drove is the persona's page `main`, as its API says through the waker.
                page = cdp.request("GET", "/main")
                assert page["url"] == f"{site.url}/second.html" and page["leased"] is True
                assert client.close() == 0
    finally:
        client.close()
    # The worker saw the client's address as the waker forwarded it, not the one the client sent.
    assert wait_until(lambda: cdp_rows(waker, "cdp"), what="the CDP connection's row") == [
        "/api/v1/main/cdp from 127.0.0.1 (forwarded for 127.0.0.1)"
    ]


async def test_a_made_up_token_is_refused_as_the_worker_refuses_it_and_wakes_nothing(waker):
    assert stop(waker, "cdp", force=True).json()["state"] == "stopped"
    assert await refused(through(waker, "cdp/cdp/made-up-token")) == 403  # a stopped worker holds no token
    assert waker.persona("cdp")["state"] == "stopped" and waker.workers("cdp") == []
    with waker.through("cdp") as via:
        assert via.get("/pages").status_code == 200  # woken with its key
    # Running, the worker refuses the token at its handshake, and the waker passes the refusal on.
    direct = f"ws://127.0.0.1:{waker.personas['cdp']['port']}/cdp/made-up-token"
    assert await refused(direct) == await refused(through(waker, "cdp/cdp/made-up-token")) == 403
    # Only the socket: no HTTP under /cdp/, nor a path past the token.
    assert httpx.get(f"{waker.base_url}/w/cdp/cdp/made-up-token").status_code == 404
    assert await refused(through(waker, "cdp/cdp/made-up-token/more")) == 403
    # Each refusal is logged, its token never: it is the credential.
    assert "made-up-token" not in waker.log() and "socket /w/cdp/cdp/… refused" in waker.log()


def test_an_open_cdp_connection_keeps_a_sleepy_persona_awake(waker, site, tmp_path):
    """Playwright is up before the token is made: the persona sleeps
    IDLE_TIMEOUT_S after its last request, and the connection is that
    request's successor."""
    client = CdpClient(tmp_path)
    try:
        with waker.through("cdpnap") as via:
            lease = via.post("/main/lease", json={"ttl": 120})
            assert lease.status_code == 201, lease.text
            made = via.post("/main/cdp", json={}, headers={"X-Lease": lease.json()["lease"]})
        assert made.status_code == 201, made.text
        assert client.drive(through(waker, "cdpnap" + made.json()["url"]), f"{site.url}/second.html")["sum"] == 2
        opened, pid = time.time(), waker.persona("cdpnap")["pid"]
        # Twice the idle timeout with the connection open, a policy step every 0.2 s.
        read = waker.wait_for(
            "cdpnap", lambda body: (body["activity_read_at"] or 0) > opened + 2 * IDLE_TIMEOUT_S, timeout=60
        )
        assert (read["state"], read["pid"]) == ("running", pid)
        # Both count it: the worker as a request in flight, the waker as a forward.
        assert read["requests_in_flight"] >= 1 and read["forwards_in_flight"] == 1
        assert client.close() == 0
    finally:
        client.close()
    asleep = stopped(waker, "cdpnap")  # once the connection closed, it slept
    assert asleep["last_exit"]["pid"] == pid and asleep["last_exit"]["expected"] is True


def test_a_cdp_message_of_many_megabytes_passes_through_the_waker(waker, site, tmp_path):
    client = CdpClient(tmp_path)
    try:
        with waker.through("cdp") as via:
            lease = via.post("/main/lease", json={"ttl": 60}).json()["lease"]
            try:
                made = via.post("/main/cdp", json={"ttl": 50}, headers={"X-Lease": lease})
                assert made.status_code == 201, made.text
                seen = client.drive(through(waker, "cdp" + made.json()["url"]), f"{site.url}/second.html", HUGE)
                assert (seen["taken"], seen["given"]) == (HUGE, HUGE)
            finally:
                via.delete("/main/lease", headers={"X-Lease": lease})
    finally:
        client.close()


# --- the relay, against a stand-in for the worker -------------------------------------------


async def test_a_cdp_socket_passes_a_message_that_ends_a_live_views():
    """The stand-in sends HUGE characters as one message: the relay's socket
    to it takes the message with CDP_MAX_SIZE, and ends (1009, passed on as
    1000) with the live view's MAX_SIZE."""
    message = "x" * HUGE

    async def worker(socket: ServerConnection) -> None:
        await socket.send(message)
        await socket.wait_closed()

    async with serve(worker, "127.0.0.1", 0) as server:
        url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}/cdp/token"
        for max_size, first in (
            (socket_relay.CDP_MAX_SIZE, {"type": "websocket.send", "text": message}),
            (socket_relay.MAX_SIZE, {"type": "websocket.close", "code": 1000}),
        ):
            upstream = await socket_relay.open_to_worker(url, [], [], max_size=max_size)
            from_client: asyncio.Queue = asyncio.Queue()
            to_client: asyncio.Queue = asyncio.Queue()
            relay = asyncio.ensure_future(socket_relay.relay(upstream, from_client.get, to_client.put))
            assert await asyncio.wait_for(to_client.get(), 30) == first
            await from_client.put({"type": "websocket.disconnect", "code": 1000})
            await asyncio.wait_for(relay, 10)
