"""`ws://HOST/live/<token>/ws`: one viewer of a page's live view.

The token is the only credential. The socket is always accepted and a
refusal is a close code the live page can read (a browser cannot read a
refused handshake's status): 4404 for a token that is unknown, expired,
revoked or whose page closed (not told apart), also when a link expires or
is revoked under an open socket; 4429 past LIVE_MAX_VIEWERS viewers of the
page; 4013 while the page has no tab to show, and 4012 when its tab went
(the live page tries again a second later).

From the worker: binary messages are JPEG frames (the newest only, when
the connection takes more: live/screencast.py), text messages JSON objects
of what changed: `url`, `title`, `control`, `human` (the page's question, or
null), `answered` (a viewer's answer, taken). From the viewer, JSON
objects, dropped unless the link has control: `{"type": "mouse", "action":
"down"|"up"|"move", "x", "y", "button", "clicks", "modifiers"}` (x and y
fractions of the frame, 0 to 1), `{"type": "wheel", "x", "y", "dx", "dy"}`,
`{"type": "key", "action": "down"|"up", "key", "code", "keyCode", "text",
"modifiers"}`, `{"type": "text", "text"}` (a paste) and `{"type": "answer",
"answer": "done"|"gave_up"}`.

An open viewer counts as a request in flight: a sleepy worker stays awake
while someone watches.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from collections.abc import Coroutine
from typing import Any

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from core.errors import Refusal
from core.runtime import runtime_of
from core.writable import Writable
from live.links import Link
from live.screencast import NoTab, PageCast, Watcher

log = logging.getLogger("penelope.live")

# Close codes (daphne sends 1000 and 3000 to 4999 only): the link is no
# good; too many viewers; no tab to show now, or the tab went (both: the
# live page comes back a second later).
GONE, TOO_MANY, TRY_AGAIN = 4404, 4429, 4013
LIVE_CONTROL = "live control"  # a person's input as a driver hold, as a refused call names it
MAX_MESSAGE = 64 * 1024  # characters of one message from a viewer
MAX_TEXT = 10_000  # characters of one paste
MAX_METAS = 32  # changes queued for a viewer before the oldest are dropped
# The middle button (and a modified click) would open a link in a new tab,
# which nothing would show or close: only left and right clicks pass.
BUTTONS = {"left": 1, "right": 2}
MOUSE_TYPES = {"down": "mousePressed", "up": "mouseReleased", "move": "mouseMoved"}


class LiveSocket(AsyncWebsocketConsumer, Watcher):
    link: Link | None = None
    cast: PageCast | None = None
    counted = False

    async def connect(self) -> None:
        await self.accept()
        self.runtime = runtime = runtime_of(self)
        link = runtime.links.find(self.scope["url_route"]["kwargs"]["token"])
        if link is None:
            await self.close(GONE)
            return
        cast = runtime.casts.of(link.page)
        if len(cast.watchers) >= settings.LIVE_MAX_VIEWERS:
            await self.close(TOO_MANY)
            return
        self.latest, self.fresh = None, asyncio.Event()
        self.metas: deque[dict[str, Any]] = deque(maxlen=MAX_METAS)
        self.meta({"control": link.control, "human": runtime.questions.shown_to_viewers(link.page), "expires_at": round(link.expires_at, 3)})
        try:
            await cast.join(self)
        except NoTab:
            await self.close(TRY_AGAIN)
            return
        # A viewer from here on: counted, closed with its link, fed by its sender.
        self.link, self.cast = link, cast
        runtime.tracker.requests_in_flight += 1
        self.counted = True
        link.on_revoke.append(self._revoked)
        self.expiry = asyncio.get_running_loop().call_later(max(0.0, link.expires_at - time.time()), self._revoked)
        self.writable = Writable.of(self.base_send)
        self.sender = runtime.tasks.spawn(self._send_loop(), about="a live viewer")
        if not link.usable():  # revoked or expired while the screencast started
            self._revoked()

    # --- from the page (live/screencast.py calls these on the loop) -------------------------

    def frame(self, data: bytes) -> None:
        self.latest = data
        self.fresh.set()

    def meta(self, meta: dict[str, Any]) -> None:
        self.metas.append(meta)
        self.fresh.set()

    def ended(self, code: int) -> None:
        self.runtime.tasks.spawn(self.close(code), about="closing a live viewer")

    def _revoked(self) -> None:
        self.ended(GONE)

    async def _send_loop(self) -> None:
        try:
            await self._send_all()
        except Exception:  # daphne raises on a send after the connection closed: its disconnect cleans up
            if self.counted:
                log.debug("a live viewer's connection went while it was sent to", exc_info=True)

    async def _send_all(self) -> None:
        while True:
            await self.fresh.wait()
            self.fresh.clear()
            while self.metas:
                await self.send(text_data=json.dumps(self.metas.popleft()))
            if self.latest is not None:
                if self.writable is not None:
                    await self.writable.open.wait()
                data, self.latest = self.latest, None  # the newest at the moment it can go
                if data is not None:
                    await self.send(bytes_data=data)

    # --- from the viewer -----------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        link, cast = self.link, self.cast
        if link is None or cast is None or not link.control or text_data is None or len(text_data) > MAX_MESSAGE:
            return  # view-only links, and anything malformed, change nothing
        try:
            message = json.loads(text_data)
        except ValueError:
            return
        if not isinstance(message, dict) or not link.usable():
            return
        kind = message.get("type")
        if kind == "answer":
            self.runtime.questions.answer(link.page, message.get("answer"))
        elif kind == "text" and isinstance(message.get("text"), str):
            await self._driving(link, cast.dispatch("Input.insertText", {"text": message["text"][:MAX_TEXT]}))
        elif kind == "key":
            await self._driving(link, self._key(cast, message))
        elif kind in ("mouse", "wheel"):
            await self._driving(link, self._pointer(cast, message))

    async def _driving(self, link: Link, step: Coroutine[Any, Any, None]) -> None:
        """One input of a person's, under a driver hold on the page (browser/broker.py):
        never while a call or job drives its tab. A call or job running now is
        waited for, as a plain call waits, up to PAGE_WAIT_S; past it, or when
        the link's lease no longer holds the page, the input is dropped. A page
        whose job asks a person (live/human.py) is driven inside that job's
        claim: the person's input is what the job waits for."""
        if self.runtime.questions.question_of(link.page) is not None:
            await step
            return
        broker = self.runtime.pages.broker
        try:
            driver = await broker.drive(link.page, link.lease, kind=LIVE_CONTROL, wait_s=settings.PAGE_WAIT_S)
        except Refusal as refused:
            step.close()
            log.debug("a live viewer's input on page %s was dropped: %s", link.page_id, refused.message)
            return
        except BaseException:  # the viewer went, or the worker stops, while it waited
            step.close()
            raise
        try:
            await step
        finally:
            broker.undrive(driver)

    async def _pointer(self, cast: PageCast, message: dict[str, Any]) -> None:
        at = cast.place(message.get("x"), message.get("y"))
        if at is None:
            return
        event: dict[str, Any] = {"x": at[0], "y": at[1], "modifiers": _modifiers(message)}
        if message["type"] == "wheel":
            dx, dy = message.get("dx"), message.get("dy")
            if not all(isinstance(d, int | float) and not isinstance(d, bool) and abs(d) <= 10_000 for d in (dx, dy)):
                return
            event.update(type="mouseWheel", deltaX=dx, deltaY=dy)
        else:
            kind = MOUSE_TYPES.get(message.get("action"))
            held = message.get("buttons")
            held = held & 3 if isinstance(held, int) and not isinstance(held, bool) else 0
            if kind is None:
                return
            if kind == "mouseMoved":  # a drag carries the buttons held down
                pressed = next((name for name, bit in BUTTONS.items() if held & bit), "none")
                event.update(type=kind, button=pressed, buttons=held)
            else:
                button = message.get("button")
                if button not in BUTTONS:
                    return
                clicks = message.get("clicks")
                event.update(
                    type=kind, button=button, buttons=held, modifiers=0,
                    clickCount=clicks if isinstance(clicks, int) and 1 <= clicks <= 3 else 1,
                )
        await cast.dispatch("Input.dispatchMouseEvent", event)

    async def _key(self, cast: PageCast, message: dict[str, Any]) -> None:
        action, key, code = message.get("action"), message.get("key"), message.get("code")
        if action not in ("down", "up") or not isinstance(key, str) or not 0 < len(key) <= 32:
            return
        event: dict[str, Any] = {"key": key, "modifiers": _modifiers(message)}
        if isinstance(code, str) and len(code) <= 32:
            event["code"] = code
        key_code = message.get("keyCode")
        if isinstance(key_code, int) and 0 < key_code < 256:
            event["windowsVirtualKeyCode"] = key_code
        text = message.get("text")
        if action == "up":
            event["type"] = "keyUp"
        elif key == "Enter":
            event.update(type="keyDown", text="\r")
        elif isinstance(text, str) and len(text) == 1:
            event.update(type="keyDown", text=text)
        else:
            event["type"] = "rawKeyDown"
        await cast.dispatch("Input.dispatchKeyEvent", event)

    async def disconnect(self, code: int) -> None:
        if not self.counted:
            return
        self.counted = False
        self.runtime.tracker.requests_in_flight -= 1
        self.runtime.tracker.touch()
        self.expiry.cancel()
        self.sender.cancel()
        if self.link is not None and self._revoked in self.link.on_revoke:
            self.link.on_revoke.remove(self._revoked)
        if self.cast is not None:
            self.cast.leave(self)


def _modifiers(message: dict[str, Any]) -> int:
    """CDP's bit mask (Alt 1, Ctrl 2, Meta 4, Shift 8) from the viewer's."""
    value = message.get("modifiers")
    return value if isinstance(value, int) and 0 <= value <= 15 else 0
