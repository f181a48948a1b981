"""`ws://HOST/cdp/<token>`: one CDP client driving its leased page.

The token is the only credential, and is checked before the handshake is
answered: a token that is unknown, expired, ended or used already is refused
with 403 and no CDP message passes. Once open, every message goes through
the client's bridge (cdp/bridge.py). The connection closes when the token
expires, when its lease ends (released, broken, or the page closed), at a
DELETE of the page's tokens, and when the browser or the page's tab goes;
the close's reason says which.

A plain ASGI application, not a channels consumer: a CDP client sends one
message per step, and channels' dispatch (a task per receive, a hop to a
thread to close database connections this socket never opens) would cost
each step more than the bridge itself does (docs/BENCHMARKS.md, "Issue 43").

An open connection counts as a request in flight: a sleepy worker stays
awake while a script drives a page. It stops counting as soon as it closes,
whether or not its client reads the close.

What each connection holds is bounded both ways. Chromium's messages wait
for a client that reads slowly up to CDP_QUEUE_MB; past that the queue is
dropped and the connection closes with 4008, the close sent after the one
message the connection already took, and the client has CDP_CLOSE_WAIT_S to
read up to it before the connection is dropped. A client's own message is
read only once the one before it has gone on to the tap (browser/tap.py):
while a large one is written there, in parts, nothing more is read from the
client, and the event loop serves everything else between the parts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from django.conf import settings
from playwright.async_api import Error as PlaywrightError

from cdp.bridge import Bridge
from cdp.grants import Grant
from cdp.mux import ChromiumError
from core.errors import LeaseRequired, PageBusy, Refusal
from core.runtime import runtime_of
from core.writable import Writable

if TYPE_CHECKING:
    from browser.pages import Driver
    from browser.tap import Link

log = logging.getLogger("penelope.cdp")

# Close codes: the grant ended (token expired, lease ended, revoked), the
# browser or the page's tab went, the client reads too slowly. A message past
# the size limit is closed by the server itself with 1009 (core/serving.py).
ENDED, BROWSER_GONE, TOO_SLOW = 4001, 4002, 4008
MIB = 1024 * 1024
CDP_CLIENT = "a CDP client"  # the driver hold's kind, as a refused call names it

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def cdp_socket(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """The ASGI application of `/cdp/<token>` (penelope_site/asgi.py)."""
    if (await receive())["type"] != "websocket.connect":
        return
    runtime = runtime_of(scope)
    grant = runtime.cdp.grants.take(scope["url_route"]["kwargs"]["token"])
    if grant is None:
        await send({"type": "websocket.close"})  # before the accept: the handshake answers 403
        return
    broker = runtime.pages.broker
    driver = None
    try:
        # The connection drives the page under a driver hold (browser/broker.py):
        # a call or job under the lease running now is waited for, up to PAGE_WAIT_S.
        # Both within PAGE_WAIT_S: the worker's daphne answers a handshake within PAGE_WAIT_S + 5 s.
        deadline = time.monotonic() + settings.PAGE_WAIT_S
        driver = await broker.drive(grant.page, grant.lease, kind=CDP_CLIENT, wait_s=settings.PAGE_WAIT_S)
        tab = await runtime.pages.ensure_tab(driver, max(0.0, deadline - time.monotonic()))
        mux = await runtime.cdp.mux()
        home = await runtime.cdp.target_of(tab)
    # One answer, whichever step failed: the driver hold or the page's tab (a
    # refusal: no page, another lease, a busy page, no browser, no tab), the
    # mux (RuntimeError: no browser; the tap's TapUnavailable; ChromiumError
    # or Playwright's Error as it attaches), the target's id (Playwright's
    # Error: the tab went).
    except (Refusal, PlaywrightError, ChromiumError, RuntimeError) as error:
        log.info("a CDP client of page %s was refused: %s", grant.page_id, error)
        if driver is not None:
            broker.undrive(driver)
        busy = isinstance(error, (PageBusy, LeaseRequired))  # the hold refused: a call runs, or another lease holds it
        runtime.cdp.grants.end(grant, error.message if busy else "The page has no tab now.")
        await send({"type": "websocket.close"})
        return
    except BaseException:  # the worker stops, or the client went, while it waited
        if driver is not None:
            broker.undrive(driver)
        raise
    connection = None
    try:
        await send({"type": "websocket.accept"})
        connection = Connection(runtime, grant, driver, scope, send)
        await connection.serve(mux, home, receive)
    finally:
        if connection is None or connection.letting_go is None:  # it ended before its own end could let go
            broker.undrive(driver)


class Connection:
    """One open CDP connection: its bridge, its queue to the client, its end."""

    def __init__(self, runtime: Any, grant: Grant, driver: Driver, scope: dict[str, Any], send: Send) -> None:
        self.runtime = runtime
        self.grant = grant
        self.driver = driver  # its hold on the page, let go once the bridge has closed
        self.letting_go: asyncio.Task | None = None
        self.send = send
        self.queue: deque[str] = deque()
        self.queued = 0  # characters in the queue
        self.bound = int(settings.CDP_QUEUE_MB * MIB)  # characters queued at once before it counts as too slow
        self.fresh = asyncio.Event()
        self.why = "The client disconnected."
        self.closing: tuple[int, str] | None = None
        self.who = _who(scope)
        self.writable = Writable.of(send)
        self.bridge: Bridge | None = None
        self.started_at = 0.0
        self.counted = False  # in requests_in_flight and the hub's open connections

    async def serve(self, mux: Any, home: str, receive: Receive) -> None:
        runtime, grant = self.runtime, self.grant
        self.bridge = bridge = Bridge(
            mux, home, out=self.deliver, budget=runtime.pages,
            refused=lambda method: runtime.cdp.refused(grant.page_id, method, self.who), page_name=grant.page_id,
        )
        bridge.gone = lambda why: self.end(why, BROWSER_GONE)
        grant.on_end.append(self.end)
        expiry = asyncio.get_running_loop().call_later(
            max(0.0, grant.expires_at - time.time()), lambda: runtime.cdp.grants.end(grant, "The token expired.")
        )
        runtime.tracker.requests_in_flight += 1
        self.started_at = runtime.cdp.opened(grant.page_id, self.who)
        self.counted = True
        sender = runtime.tasks.spawn(self._send_all(), about="a CDP client's messages")
        if not grant.usable():  # ended while the connection opened
            self.end("The lease ended.")
        try:
            while True:
                message = await receive()
                kind = message["type"]
                if kind == "websocket.disconnect":
                    break
                if kind == "websocket.receive" and self.closing is None:
                    text = message.get("text")
                    await bridge.receive(text if text is not None else (message.get("bytes") or b"").decode("utf-8", "replace"))
                    if not mux.link.drained:  # a large message is still written to the tap, in parts
                        await self._read_once_drained(mux.link)
        finally:
            expiry.cancel()
            sender.cancel()
            if self.end in grant.on_end:
                grant.on_end.remove(self.end)
            try:
                runtime.cdp.grants.end(grant, self.why)
                await asyncio.shield(self._let_go())
            finally:
                self._uncount()

    def _let_go(self) -> asyncio.Task:
        """Close the bridge, then let the page go: once, however the
        connection ended. From its start, calls under the lease wait in the
        page's line for it rather than being refused."""
        if self.letting_go is None:
            self.runtime.pages.broker.letting_go(self.driver)
            self.letting_go = self.runtime.tasks.spawn(self._close_then_undrive(), about="a CDP client's bridge, closing")
        return self.letting_go

    async def _close_then_undrive(self) -> None:
        try:
            if self.bridge is not None:
                await self.bridge.close()
        finally:
            self.runtime.pages.broker.undrive(self.driver)

    def _uncount(self) -> None:
        """The connection no longer counts as work, and the log says why it ended."""
        if self.counted:
            self.counted = False
            self.runtime.tracker.requests_in_flight -= 1
            self.runtime.tracker.touch()
            self.runtime.cdp.closed(self.grant.page_id, self.who, self.why, self.started_at)

    async def _read_once_drained(self, link: Link) -> None:
        """Read nothing more from the client until the tap took its last
        message: Twisted stops reading the connection meanwhile, so what the
        client sends waits in its own buffers, not in the worker."""
        transport = self.writable.transport if self.writable is not None else None
        if transport is not None:
            transport.pauseProducing()
        try:
            await link.wait_drained()
        finally:
            if transport is not None:
                transport.resumeProducing()

    # --- to the client -------------------------------------------------------------------

    def deliver(self, text: str) -> None:
        """A message to the client, queued for the sender, in order. Nothing
        goes once the connection closes."""
        if self.closing is not None:
            return
        self.queue.append(text)
        self.queued += len(text)
        self.fresh.set()
        if self.queued > self.bound:
            self.end("The client read its messages too slowly.", TOO_SLOW)

    def end(self, why: str, code: int = ENDED) -> None:
        """Close the connection, saying why. The bridge lets go of the page at
        once (its sessions detached, its tabs closed), whether or not the
        client reads: what was queued for it is dropped. The close goes at
        once, after what the connection took already (the sender may wait
        for a client that reads nothing: it is not waited for), and the
        connection stops counting as work."""
        if self.closing is not None:
            return
        self.why = why
        self.closing = (code, why[:120])
        self.queue.clear()
        self.queued = 0
        # Not through the sender, which may wait for a client that reads nothing.
        self.runtime.tasks.spawn(self._send_close(), about="a CDP client's close")
        self.fresh.set()  # the sender stops
        self._let_go()
        self._uncount()

    async def _send_all(self) -> None:
        """What was queued, in order, as the connection takes it."""
        try:
            while self.closing is None:
                await self.fresh.wait()
                self.fresh.clear()
                while self.queue and self.closing is None:
                    if self.writable is not None and not self.writable.open.is_set():
                        await self.writable.open.wait()
                        continue  # the connection may have closed meanwhile, its queue dropped
                    text = self.queue.popleft()
                    self.queued -= len(text)
                    await self.send({"type": "websocket.send", "text": text})
        except Exception as error:  # daphne raises on a send after the connection closed
            log.debug("a CDP client's connection went while it was sent to", exc_info=True)
            self.why = f"The connection failed: {error}"

    async def _send_close(self) -> None:
        """The close, with its code and why, after what the connection took already."""
        assert self.closing is not None
        code, reason = self.closing
        try:
            await self.send({"type": "websocket.close", "code": code, "reason": reason})
        except Exception:  # the connection went already
            log.debug("a CDP client's connection went as it was closed", exc_info=True)


def _who(scope: dict) -> str:
    """Where the connection comes from: the peer's address, and the one a
    waker forwarded for (as the peer said it: whoever reaches the worker's
    port may say anything there)."""
    client = scope.get("client") or ("?", 0)
    who = f"from {client[0]}"
    for name, value in scope.get("headers", []):
        if name == b"x-forwarded-for":
            who += f" (forwarded for {value.decode('latin-1').split(',')[0].strip()[:64]})"
    return who
