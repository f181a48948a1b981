"""The worker's one browser-level CDP session, which carries every CDP
client's messages to Chromium and back.

Chromium is launched by Playwright over a pipe, and no debugging port is
ever opened: a CDP client reaches the browser only through the worker. Its
messages go onto the pipe through the driver tap (browser/tap.py), which
passes them as bytes beside Playwright's own, not as Playwright calls.

At its opening the mux attaches a browser-level session of its own
(`Target.attachToBrowserTarget`). Each page a client drives is attached on
it as a flat session (`Target.attachToTarget`, `flatten: true`): a client's
message goes to Chromium with that session's id, and Chromium's answers and
events come back ending with it, which routes them, unparsed, to the bridge
(cdp/bridge.py) that attached the session.

Also routed: a session's end (`Target.detachedFromTarget`), and the
browser's news of targets (created, changed, destroyed, crashed), which
each bridge filters down to its own.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

    from playwright.async_api import BrowserContext

    from browser.tap import Link

log = logging.getLogger("penelope.cdp")

TARGET_NEWS = frozenset({"Target.targetCreated", "Target.targetInfoChanged", "Target.targetDestroyed", "Target.targetCrashed"})
SESSION_TAIL = ',"sessionId":"'
ATTACH_ID = -1  # the one message at the browser's root: negative, so the tap knows its answer


class ChromiumError(Exception):
    """Chromium answered a call with an error (its own words), or the browser went."""


class Owner(Protocol):
    """What the mux tells a bridge."""

    def from_target(self, session_id: str, message: str) -> None: ...

    def detached(self, session_id: str) -> None: ...

    def target_news(self, method: str, params: dict[str, Any]) -> None: ...

    def browser_gone(self) -> None: ...


class Mux:
    def __init__(self, context: BrowserContext, link: Link) -> None:
        self.context = context
        self.link = link
        self.session = ""  # the mux's browser-level session
        self.owners: dict[str, Owner] = {}  # a page's session: the bridge that attached it
        self.bridges: set[Owner] = set()
        self.closed = False
        self.default_context_id = ""
        self._calls: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        link.on_message = self._message
        link.on_close = self._closed

    @classmethod
    async def open(cls, context: BrowserContext, link: Link) -> Mux:
        """A mux on the browser of `context` (a persistent context: its browser is the persona's), through `link`."""
        mux = cls(context, link)
        attached = mux._calls[ATTACH_ID] = asyncio.get_running_loop().create_future()
        link.send(json.dumps({"id": ATTACH_ID, "method": "Target.attachToBrowserTarget", "params": {}}))
        mux.session = (await attached)["sessionId"]
        await mux.call("Target.setDiscoverTargets", {"discover": True})
        contexts = await mux.call("Target.getBrowserContexts")
        mux.default_context_id = contexts.get("defaultBrowserContextId", "")
        return mux

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A browser-level call, awaited: its result, or ChromiumError."""
        if self.closed:
            raise ChromiumError("The browser went.")
        call_id = next(self._ids)
        answer = self._calls[call_id] = asyncio.get_running_loop().create_future()
        self.link.send(json.dumps({"id": call_id, "method": method, "params": params or {}, "sessionId": self.session}))
        return await answer

    def post(self, session_id: str, message: str, failed: Callable[[str], None]) -> None:
        """Send `message` (a CDP message as text, without a session) into a
        page's session now, so messages keep their order. `failed` hears
        why when the session is gone already; Chromium answers the message
        itself otherwise."""
        if self.closed or session_id not in self.owners:
            failed("Session with given id not found.")
            return
        self.link.send(f"{message[:-1]}{SESSION_TAIL}{session_id}\"}}")

    async def attach(self, target_id: str, owner: Owner) -> str:
        """Attach `target_id` as a flat session for `owner`: the session's id."""
        attached = await self.call("Target.attachToTarget", {"targetId": target_id, "flatten": True})
        session_id = attached["sessionId"]
        self.owners[session_id] = owner
        return session_id

    def detach(self, session_id: str) -> None:
        if self.owners.pop(session_id, None) is not None and not self.closed:
            self.post_quietly("Target.detachFromTarget", {"sessionId": session_id})

    def post_quietly(self, method: str, params: dict[str, Any]) -> None:
        """A browser-level call nobody waits for; a failure (the target went
        meanwhile) is only logged."""
        sent = asyncio.ensure_future(self.call(method, params))
        sent.add_done_callback(lambda done: _report(done, lambda why: log.debug("%s failed: %s", method, why)))

    # --- from Chromium ---------------------------------------------------------------

    def _message(self, text: str) -> None:
        """Every message of the mux's sessions, as the tap passes it. An
        exception here would end the link, so none leaves (a client's odd
        message stays that client's)."""
        try:
            tail = text.rfind(SESSION_TAIL)
            session_id = text[tail + len(SESSION_TAIL):-2] if tail != -1 and text.endswith('"}') else ""
            owner = self.owners.get(session_id)
            if owner is not None:
                owner.from_target(session_id, text)
            elif session_id == self.session:  # the mux's own session, or its attach at the root
                self._browser_message(json.loads(text))
        except Exception:
            log.exception("a CDP message could not be routed: %.80s", text)

    def _browser_message(self, message: dict[str, Any]) -> None:
        call_id = message.get("id")
        if call_id is not None:
            answer = self._calls.pop(call_id, None)
            if answer is None or answer.done():
                return
            if "error" in message:
                answer.set_exception(ChromiumError(message["error"].get("message", "The call failed.")))
            else:
                answer.set_result(message.get("result") or {})
            return
        method, params = message.get("method"), message.get("params") or {}
        if method == "Target.detachedFromTarget":
            owner = self.owners.pop(params.get("sessionId", ""), None)
            if owner is not None:
                owner.detached(params["sessionId"])
        elif method in TARGET_NEWS:
            for bridge in list(self.bridges):
                try:
                    bridge.target_news(method, params)
                except Exception:
                    log.exception("a CDP client's bridge failed on %s", method)

    def _closed(self) -> None:
        """The browser went (stopped, recycled, or the worker stops)."""
        self.closed = True
        for answer in self._calls.values():
            if not answer.done():
                answer.set_exception(ChromiumError("The browser went."))
        self._calls.clear()
        for bridge in list(self.bridges):
            bridge.browser_gone()
        self.bridges.clear()
        self.owners.clear()


def _report(done: asyncio.Future, failed: Callable[[str], None]) -> None:
    if done.cancelled():
        return
    error = done.exception()
    if error is not None:
        failed(str(error))
