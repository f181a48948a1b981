"""WebSockets and the live view's pages through the waker (waker/proxy.py,
waker/socket_relay.py), against the real waker and real workers of
tests/test_waker.py: an event socket wakes its persona and carries its
events, a handshake without the key wakes nothing, `/live/...` pages and
sockets reach the worker without a key and end as the worker ends them
(4404, 4429), a live view opened in a real Chromium through the waker shows
frames and keeps its persona awake while an event socket does not, an
unknown persona wakes nothing, and a client that stops reading holds back
the worker rather than filling the waker. Then the relay itself, against a
WebSocket server on loopback in the worker's place: text and bytes both
ways, and the close codes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from typing import Any

import httpx
import pytest
from playwright.async_api import async_playwright
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed, InvalidStatus

from harness.waker import WakerProcess
from harness.worker import wait_until
from tests import test_waker
from tests.support.faults import real_chromium
from tests.support.live import pass_checkpoint
from tests.support.raw_socket import RawSocket
from tests.test_waker import IDLE_TIMEOUT_S, stop, stopped
from waker import socket_relay

# The fixture of tests/test_waker.py, a waker of its own for this module:
# `nap` sleeps after 1.5 s idle, `doze` stays up unless stopped.
waker = test_waker.waker

# What the waker logs when it cannot pace a socket to the client's connection.
UNPACED = "cannot pace a socket"


def through(waker: WakerProcess, path: str) -> str:
    return f"ws://127.0.0.1:{waker.port}/w/{path}"


def direct(waker: WakerProcess, name: str, path: str) -> str:
    return f"ws://127.0.0.1:{waker.personas[name]['port']}{path}"


def key_of(waker: WakerProcess, name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {waker.worker_key(name)}"}


async def refused(url: str, headers: dict[str, str] | None = None) -> int:
    """The status of a handshake that must be refused."""
    with pytest.raises(InvalidStatus) as refusal:
        async with connect(url, additional_headers=headers, proxy=None):
            pass
    return refusal.value.response.status_code


async def ending(url: str) -> tuple[Any, ...]:
    """How a socket at `url` ends: ("refused", status) at its handshake, or
    ("closed", code, messages) once the server closed it."""
    try:
        socket = await connect(url, proxy=None)
    except InvalidStatus as refusal:
        return ("refused", refusal.response.status_code)
    messages = []
    async with asyncio.timeout(30):
        try:
            while True:
                messages.append(await socket.recv())
        except ConnectionClosed:
            pass
    return ("closed", socket.close_code, messages)


# --- through a real waker -----------------------------------------------------------------


async def test_an_event_socket_wakes_its_stopped_persona_and_carries_its_events(waker):
    assert stop(waker, "doze", force=True).json()["state"] == "stopped"
    events_url = through(waker, "doze/api/v1/events?page=sock")
    async with connect(events_url, additional_headers=key_of(waker, "doze"), proxy=None) as socket:
        assert waker.persona("doze")["state"] == "running"  # the handshake woke it before it was accepted
        async with httpx.AsyncClient(base_url=f"{waker.base_url}/w/doze/api/v1", headers=key_of(waker, "doze")) as via:
            assert (await via.post("/pages", json={"page_id": "sock"})).status_code == 201
            try:
                # A call on another page first: the filter, passed on in the
                # query string, keeps its events off this socket.
                assert (await via.get("/main/plugin/testing/sleep", params={"seconds": 0})).status_code == 200
                assert (await via.get("/sock/plugin/testing/sleep", params={"seconds": 0})).status_code == 200
                seen = [json.loads(await asyncio.wait_for(socket.recv(), 20)) for _ in range(2)]
            finally:
                assert (await via.delete("/sock")).status_code == 200
    assert [(event["event"], event["page_id"]) for event in seen] == [("page.busy", "sock"), ("page.idle", "sock")]
    assert UNPACED not in waker.log()  # the relay found daphne's transport to pace its sends by


async def test_a_socket_without_the_key_or_outside_the_routes_is_refused_and_wakes_nothing(waker):
    assert stop(waker, "doze", force=True).json()["state"] == "stopped"
    assert await refused(through(waker, "doze/api/v1/events")) == 403
    assert await refused(through(waker, "doze/api/v1/events"), {"Authorization": "Bearer not-the-key"}) == 403
    # With the key, but no socket there (the worker's API) or not the live view's socket path.
    assert await refused(through(waker, "doze/api/v1/pages"), key_of(waker, "doze")) == 403
    assert await refused(through(waker, "doze/live/badtoken"), key_of(waker, "doze")) == 403
    assert await refused(through(waker, "doze/live/%2E%2E/api/v1/events/ws")) == 403
    # The waker's own API has no socket.
    assert await refused(f"ws://127.0.0.1:{waker.port}/api/v1/personas") == 403
    assert waker.persona("doze")["state"] == "stopped" and waker.workers("doze") == []
    # With the key, the handshake wakes the worker; the worker refuses a bad
    # filter before accept, and the waker refuses the client's the same way.
    assert await refused(through(waker, "doze/api/v1/events?job=nope"), key_of(waker, "doze")) == 403
    assert waker.persona("doze")["state"] == "running"


def test_a_live_page_is_forwarded_without_a_key_and_never_wakes_its_persona(waker):
    assert stop(waker, "doze", force=True).json()["state"] == "stopped"
    with httpx.Client(base_url=f"{waker.base_url}/w/doze") as client:
        posted = client.post("/live/badtoken")
        assert (posted.status_code, posted.headers["Allow"]) == (405, "GET, HEAD")
        # A dot segment cannot take a request without a key out of live/.
        escaped = client.get("/live/%2E%2E/api/v1/pages")
        assert escaped.status_code == 404 and escaped.json()["error"].startswith(
            "No route /w/doze/live/../api/v1/pages"
        )
        # A stopped worker holds no link (they live in its memory): 404, and nothing started.
        assert client.get("/live/badtoken").status_code == 404
        assert waker.persona("doze")["state"] == "stopped"
        with waker.through("doze") as via:
            assert via.get("/pages").status_code == 200  # woken with its key
        page = client.get("/live/badtoken", params={"from": "waker"})
        head = client.head("/live/badtoken")
    # The worker's own answer for a token it does not know (or, before its
    # live routes, for a path it does not know), passed through.
    with httpx.Client(base_url=f"http://127.0.0.1:{waker.personas['doze']['port']}") as worker:
        page_there = worker.get("/live/badtoken", params={"from": "waker"})
        head_there = worker.head("/live/badtoken")
    assert page.status_code == page_there.status_code == 404
    assert page.headers["Content-Type"] == page_there.headers["Content-Type"]
    assert "No route" not in page.text and "No persona" not in page.text
    assert head.status_code == head_there.status_code and head.content == b""


async def test_a_live_socket_ends_as_the_worker_ends_it(waker):
    """Whatever the worker does with a token it does not know (refuses the
    handshake, or accepts and closes with its code), the client of the
    waker sees the same."""
    assert stop(waker, "doze", force=True).json()["state"] == "stopped"
    assert await refused(through(waker, "doze/live/badtoken/ws")) == 403  # a stopped worker holds no link
    assert waker.persona("doze")["state"] == "stopped"
    with waker.through("doze") as via:
        assert via.get("/pages").status_code == 200
    via_waker = await ending(through(waker, "doze/live/badtoken/ws"))
    assert via_waker == await ending(direct(waker, "doze", "/live/badtoken/ws"))


async def test_an_unknown_persona_answers_404_and_its_sockets_are_refused(waker):
    running_before = set(waker.workers())
    with httpx.Client(base_url=waker.base_url) as client:
        for path in ("/w/ghost/live/badtoken", "/w/ghost/live/badtoken/ws"):
            answer = client.get(path)
            assert answer.status_code == 404
            assert answer.json() == {"success": False, "error": "No persona ghost.", "page_id": None}
    assert await refused(through(waker, "ghost/live/badtoken/ws")) == 403
    assert await refused(through(waker, "ghost/api/v1/events"), key_of(waker, "doze")) == 403
    assert set(waker.workers()) <= running_before  # no worker started


async def test_an_event_socket_does_not_keep_a_sleepy_persona_awake(waker):
    events_url = through(waker, "nap/api/v1/events")
    async with connect(events_url, additional_headers=key_of(waker, "nap"), proxy=None) as socket:
        assert waker.persona("nap")["state"] == "running"
        # Nothing else to do: it sleeps after its idle timeout, the socket open.
        asleep = await asyncio.to_thread(stopped, waker, "nap")
        assert asleep["last_exit"]["expected"] is True
        # The worker's end ends the client's socket.
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(socket.recv(), 30)


async def test_a_live_view_through_the_waker_shows_the_page_and_keeps_its_persona_awake(waker):
    """The live page opened through the waker in a real Chromium, the person:
    its socket, `/w/nap/live/<token>/ws` from the page's own address, carries
    frames; the open viewer counts as a request in flight through the waker,
    and the persona stays up past its idle timeout until the viewer goes."""
    executable = await asyncio.to_thread(real_chromium)
    async with async_playwright() as playwright:
        person = await playwright.chromium.launch(
            executable_path=executable, args=["--no-sandbox"] if os.geteuid() == 0 else []
        )
        try:
            tab = await person.new_page()
            # The link lives in the worker's memory, and `nap` sleeps 1.5 s after its last request: the
            # person's browser is up before the link is made, so the page opens it at once (a slow launch
            # on a loaded machine let the persona sleep, and its link with it, in between).
            with waker.through("nap") as via:
                made = via.post("/main/live", json={})
            assert made.status_code == 201, made.text
            pid = waker.persona("nap")["pid"]
            await tab.goto(f"{waker.base_url}/w/nap{made.json()['url']}")
            await tab.wait_for_function("() => Number(document.body.dataset.frames) > 0")
            opened = time.time()
            assert waker.persona("nap")["forwards_in_flight"] == 1
            # Twice the idle timeout with the viewer open, a policy step every 0.2 s.
            read = await asyncio.to_thread(
                waker.wait_for, "nap", lambda body: (body["activity_read_at"] or 0) > opened + 2 * IDLE_TIMEOUT_S
            )
            assert (read["state"], read["pid"]) == ("running", pid)
            await tab.close()
        finally:
            await person.close()
    asleep = await asyncio.to_thread(stopped, waker, "nap")  # once the viewer went, it slept
    assert asleep["last_exit"]["pid"] == pid
    assert UNPACED not in waker.log()


async def test_live_frames_pass_as_bytes_and_a_viewer_past_the_cap_gets_4429(waker):
    async with httpx.AsyncClient(base_url=f"{waker.base_url}/w/doze/api/v1", headers=key_of(waker, "doze")) as via:
        made = await via.post("/main/live", json={})
        assert made.status_code == 201, made.text
        url = through(waker, f"doze{made.json()['url']}/ws")
        try:
            async with contextlib.AsyncExitStack() as viewers:
                # LIVE_MAX_VIEWERS (4) viewers, each told the link's mode, then sent a JPEG frame as bytes.
                for _ in range(4):
                    viewer = await viewers.enter_async_context(connect(url, proxy=None))
                    assert "control" in json.loads(await asyncio.wait_for(viewer.recv(), 20))
                    frame = await asyncio.wait_for(_next_bytes(viewer), 20)
                    assert frame[:2] == b"\xff\xd8"
                assert await ending(url) == ("closed", 4429, [])
        finally:
            await via.delete("/main/live")


async def _next_bytes(socket) -> bytes:
    while not isinstance(message := await socket.recv(), bytes):
        pass
    return message


def test_a_client_that_stops_reading_holds_back_the_worker_not_the_waker(tmp_path):
    """A client through the waker stops reading while 40 events of 1 MB each
    come: far more than the connections' buffers hold. The waker reads from
    the worker only as fast as its client takes, so the worker's own queue
    for the socket (EVENT_SOCKET_QUEUE, 20 here) overflows and the client is
    told; a waker that read on into memory would have taken them all."""
    flood = WakerProcess(
        tmp_path,
        [{"name": "flood", "mode": "sleepy", "idle_timeout_s": 600, "env": {"EVENT_SOCKET_QUEUE": "20"}}],
        env=test_waker.WAKER_ENV,
    ).start()
    try:
        stuck = RawSocket("127.0.0.1", flood.port, "/w/flood/api/v1/events?page=main", flood.worker_key("flood"))
        assert stuck.status == 101
        try:
            jobs = []
            with flood.through("flood") as via:
                for _ in range(40):
                    started = via.post(
                        "/main/plugin/testing/blob", json={"size": 1_000_000}, headers={"X-Result-Ttl": "60"}
                    )
                    assert started.status_code == 202, started.text
                    jobs.append(started.json()["job_id"])
                    wait_until(lambda: via.get(f"/jobs/{jobs[-1]}").json()["state"] == "done", what="the job to end")
            # Every job ended meanwhile, the worker unhindered; now read.
            received, dropped = [], 0
            while not (received and received[-1]["event"] == "job.ended" and received[-1]["job_id"] == jobs[-1]):
                message = stuck.message()
                if message["event"] == "overflow":
                    dropped += message["dropped"]
                else:
                    received.append(message)
        finally:
            stuck.close()
        assert dropped > 0
        assert len(received) + dropped == 4 * len(jobs)  # busy, started, idle, ended: each received or counted
        assert UNPACED not in flood.log()
    finally:
        assert flood.stop() == [], "workers outlived their waker"


# --- the relay, against a stand-in for the worker -------------------------------------------


class StandIn:
    """A WebSocket server on loopback in the worker's place: it echoes each
    message as it came, text or bytes, and `close <code>` closes with that
    code; it notes each handshake's headers and how each socket closed."""

    def __init__(self) -> None:
        self.headers: list[Any] = []
        self.closed: asyncio.Queue[int | None] = asyncio.Queue()

    async def serve(self, socket: ServerConnection) -> None:
        self.headers.append(socket.request.headers)
        with contextlib.suppress(ConnectionClosed):  # closed by the relay with a code other than 1000
            async for message in socket:
                if isinstance(message, str) and message.startswith("close "):
                    await socket.close(int(message.split()[1]))
                    break
                await socket.send(message)
        await socket.wait_closed()
        await self.closed.put(socket.close_code)

    async def relay(self) -> tuple[asyncio.Queue, asyncio.Queue, asyncio.Future, str | None]:
        """A relay from an ASGI client side (what it receives, what it sends) to this server."""
        upstream = await socket_relay.open_to_worker(
            f"ws://127.0.0.1:{self.port}/live/token/ws", [(b"authorization", b"Bearer k")], ["jpeg", "live"]
        )
        from_client: asyncio.Queue = asyncio.Queue()
        to_client: asyncio.Queue = asyncio.Queue()
        relay = asyncio.ensure_future(socket_relay.relay(upstream, from_client.get, to_client.put))
        return from_client, to_client, relay, upstream.subprotocol

    async def __aenter__(self) -> StandIn:
        self.server = await serve(self.serve, "127.0.0.1", 0, subprotocols=["live"])
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        await self.server.wait_closed()


async def test_the_relay_passes_text_and_bytes_both_ways_and_the_workers_close_code():
    async with StandIn() as worker:
        from_client, to_client, relay, subprotocol = await worker.relay()
        assert subprotocol == "live"  # the client's offer reached the worker, and its choice came back
        assert worker.headers[0]["Authorization"] == "Bearer k"
        frame = bytes(range(256)) * 1000
        for message in ({"text": '{"type": "click"}'}, {"bytes": frame}):
            await from_client.put({"type": "websocket.receive", **message})
            assert await asyncio.wait_for(to_client.get(), 10) == {"type": "websocket.send", **message}
        await from_client.put({"type": "websocket.receive", "text": "close 4404"})
        await asyncio.wait_for(relay, 10)
    assert to_client.get_nowait() == {"type": "websocket.close", "code": 4404}
    assert to_client.empty()


async def test_the_relay_closes_the_workers_socket_with_the_clients_code():
    async with StandIn() as worker:
        from_client, to_client, relay, _ = await worker.relay()
        await from_client.put({"type": "websocket.disconnect", "code": 4001})
        await asyncio.wait_for(relay, 10)
        assert await asyncio.wait_for(worker.closed.get(), 10) == 4001


@pytest.mark.parametrize(
    ("code", "for_client"), [(1000, 1000), (4404, 4404), (4429, 4429), (1001, 1000), (1011, 1000), (None, 1000)]
)
def test_close_codes_daphne_cannot_send_end_the_clients_socket_as_1000(code, for_client):
    assert type(socket_relay.code_for_client(code)) is int  # autobahn refuses any other type
    assert socket_relay.code_for_client(code) == for_client


@pytest.mark.parametrize(("code", "for_worker"), [(4001, 4001), (1001, 1001), (1005, 1000), (1006, 1001), (None, 1001)])
def test_a_client_gone_without_a_code_closes_the_workers_socket_as_going_away(code, for_worker):
    assert socket_relay.code_for_worker(code) == for_worker


def test_a_person_answers_a_plugin_through_the_waker(waker, person):
    """The whole loop through `/w/doze/...`: demo/sign-in started through the
    waker asks a person; its live link, prefixed with the persona's path,
    opens the live page and its socket through the waker; the person passes
    the checkpoint there and the job ends signed in."""
    with waker.through("doze") as via:
        started = via.post("/main/plugin/demo/sign-in", json={"handle": "bob"}, headers={"X-Result-Ttl": "60"})
        assert started.status_code == 202, started.text
        job_id = started.json()["job_id"]
        human = wait_until(lambda: via.get(f"/jobs/{job_id}").json().get("human"), what="the checkpoint's question")
        site = f"http://127.0.0.1:{waker.personas['doze']['port']}"  # the demo site, the person's own browser
        pass_checkpoint(person, f"{waker.base_url}/w/doze{human['live_url']}", site, "bob")
        ended = via.get(f"/jobs/{job_id}", params={"wait": 30}).json()
    assert ended["status"] == 200 and ended["result"]["signed_in"] is True, ended
