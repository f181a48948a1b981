"""`ws://HOST/cdp/<token>`: one CDP client driving its leased page.

The token is the only credential, and is checked before the handshake is
answered: a token that is unknown, expired, ended or used already is refused
with 403 and no CDP message passes. Once open, every message goes through
the client's bridge (cdp/bridge.py). The connection closes when the token
expires, when its lease ends (released, broken, or the page closed), at a
DELETE of the page's tokens, and when the browser goes; the close's reason
says which.

An open connection counts as a request in flight: a sleepy worker stays
awake while a script drives a page.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from playwright.async_api import Error as PlaywrightError

from cdp.bridge import Bridge
from cdp.grants import Grant
from core.errors import Refusal
from core.runtime import runtime_of
from core.seams import NoDatabaseDispatch
from core.writable import Writable

log = logging.getLogger("penelope.cdp")

# Close codes: the grant ended (token expired, lease ended, revoked), the
# browser went, the client reads too slowly.
ENDED, BROWSER_GONE, TOO_SLOW = 4001, 4002, 4008
# Characters of messages to the client queued at once before it counts as too slow.
MAX_QUEUED = 512 * 1024 * 1024


class CdpSocket(NoDatabaseDispatch, AsyncWebsocketConsumer):
    grant: Grant | None = None
    bridge: Bridge | None = None

    async def connect(self) -> None:
        self.runtime = runtime = runtime_of(self)
        grant = runtime.cdp.grants.take(self.scope["url_route"]["kwargs"]["token"])
        if grant is None:
            await self.close()  # before the accept: the handshake answers 403
            return
        try:
            tab = await runtime.pages.ensure_tab(grant.page, settings.PAGE_WAIT_S)
            mux = await runtime.cdp.mux()
            home = await runtime.cdp.target_of(tab)
        except (Refusal, PlaywrightError, RuntimeError) as error:
            log.info("a CDP client of page %s was refused: %s", grant.page_id, error)
            runtime.cdp.grants.end(grant, "The page has no tab now.")
            await self.close()
            return
        await self.accept()
        self.queue: deque[str] = deque()
        self.queued = 0  # characters in the queue
        self.fresh = asyncio.Event()
        self.why = "The client disconnected."
        self.who = _who(self.scope)
        self.bridge = Bridge(
            mux, home, out=self.deliver, budget=runtime.pages,
            refused=lambda method: runtime.cdp.refused(grant.page_id, method), page_name=grant.page_id,
        )
        self.bridge.gone = lambda why: self._end(why, BROWSER_GONE)
        self.grant = grant
        grant.on_end.append(self._end)
        self.expiry = asyncio.get_running_loop().call_later(
            max(0.0, grant.expires_at - time.time()), lambda: runtime.cdp.grants.end(grant, "The token expired.")
        )
        runtime.tracker.requests_in_flight += 1
        self.started_at = runtime.cdp.opened(grant.page_id, self.who)
        self.writable = Writable.of(self.base_send)
        self.sender = runtime.tasks.spawn(self._send_loop(), about="a CDP client's messages")
        if not grant.usable():  # ended while the connection opened
            self._end("The lease ended.")

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.bridge is None:
            return
        if text_data is None:
            text_data = (bytes_data or b"").decode("utf-8", "replace")
        await self.bridge.receive(text_data)

    # --- to the client -------------------------------------------------------------------

    def deliver(self, text: str) -> None:
        self.queue.append(text)
        self.queued += len(text)
        self.fresh.set()
        if self.queued > MAX_QUEUED:
            self.queue.clear()
            self.queued = 0
            self._end("The client read its messages too slowly.", TOO_SLOW)

    async def _send_loop(self) -> None:
        try:
            while True:
                await self.fresh.wait()
                self.fresh.clear()
                while self.queue:
                    if self.writable is not None and not self.writable.open.is_set():
                        await self.writable.open.wait()
                    text = self.queue.popleft()
                    self.queued -= len(text)
                    await self.send(text_data=text)
        except Exception as error:  # daphne raises on a send after the connection closed
            log.debug("a CDP client's connection went while it was sent to", exc_info=True)
            self._end(f"The connection failed: {error}")

    def _end(self, why: str, code: int = ENDED) -> None:
        self.why = why
        self.runtime.tasks.spawn(self.close(code, why[:120]), about="closing a CDP connection")

    async def disconnect(self, code: int) -> None:
        grant, bridge = self.grant, self.bridge
        if grant is None or bridge is None:
            return
        self.grant = self.bridge = None
        self.expiry.cancel()
        self.sender.cancel()
        if self._end in grant.on_end:
            grant.on_end.remove(self._end)
        try:
            self.runtime.cdp.grants.end(grant, self.why)
            await bridge.close()
        finally:
            self.runtime.tracker.requests_in_flight -= 1
            self.runtime.tracker.touch()
            self.runtime.cdp.closed(grant.page_id, self.who, self.why, self.started_at)


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
