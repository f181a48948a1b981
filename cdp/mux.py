"""The worker's one browser-level CDP session, which carries every CDP
client's messages to Chromium and back.

Chromium is launched by Playwright over a pipe, and no debugging port is
ever opened: a CDP client reaches the browser only through the worker, which
holds the pipe. Playwright offers a browser-level session on that pipe
(`Browser.new_browser_cdp_session`), but routes no flat child session
attached through it. So each page a client drives is attached in Chromium's
other, nested mode (`Target.attachToTarget` with `flatten: false`): the
client's messages go in as `Target.sendMessageToTarget` on this one session,
and Chromium's answers and events come back as its
`Target.receivedMessageFromTarget` events, which this routes by session id
to the bridge (cdp/bridge.py) that attached it.

Also routed: a session's end (`Target.detachedFromTarget`), and the
browser's news of targets (created, changed, destroyed, crashed), which
each bridge filters down to its own.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Protocol

from playwright.async_api import Error as PlaywrightError

from core.seams import on_cdp_events, send_cdp

if TYPE_CHECKING:
    from collections.abc import Callable

    from playwright.async_api import BrowserContext, CDPSession

log = logging.getLogger("penelope.cdp")

TARGET_NEWS = frozenset({"Target.targetCreated", "Target.targetInfoChanged", "Target.targetDestroyed", "Target.targetCrashed"})


class Owner(Protocol):
    """What the mux tells a bridge."""

    def from_target(self, session_id: str, message: str) -> None: ...

    def detached(self, session_id: str) -> None: ...

    def target_news(self, method: str, params: dict[str, Any]) -> None: ...

    def browser_gone(self) -> None: ...


class Mux:
    def __init__(self, context: BrowserContext, session: CDPSession) -> None:
        self.context = context
        self.session = session
        self.owners: dict[str, Owner] = {}  # a nested session's id: the bridge that attached it
        self.bridges: set[Owner] = set()
        self.closed = False
        self.default_context_id = ""
        on_cdp_events(session, self._event)
        session.on("close", lambda _session: self._closed())

    @classmethod
    async def open(cls, context: BrowserContext) -> Mux:
        """A mux on the browser of `context` (a persistent context: its browser is the persona's)."""
        browser = context.browser
        if browser is None:
            raise RuntimeError("The persona's browser offers no browser-level session.")
        mux = cls(context, await browser.new_browser_cdp_session())
        await mux.call("Target.setDiscoverTargets", {"discover": True})
        contexts = await mux.call("Target.getBrowserContexts")
        mux.default_context_id = contexts.get("defaultBrowserContextId", "")
        return mux

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A browser-level call, awaited: its result, or PlaywrightError."""
        return await self.session.send(method, params or {})

    def post(self, session_id: str, message: str, failed: Callable[[str], None]) -> None:
        """Send `message` (a CDP message as text) into a nested session now,
        not waiting for Chromium's receipt, so messages keep their order.
        `failed` hears why when Chromium refuses the envelope (the session is
        gone)."""
        sent = send_cdp(self.session, "Target.sendMessageToTarget", {"sessionId": session_id, "message": message})
        sent.add_done_callback(lambda done: _report(done, failed))

    async def attach(self, target_id: str, owner: Owner) -> str:
        """Attach `target_id` in nested mode for `owner`: the session's id."""
        attached = await self.call("Target.attachToTarget", {"targetId": target_id, "flatten": False})
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

    def _event(self, event: dict[str, Any]) -> None:
        """Playwright calls this for every event; an exception here would be
        raised by the worker's next Playwright call, whatever it is, so none
        leaves (a client's odd message stays that client's)."""
        try:
            self._route(event)
        except Exception:
            log.exception("a CDP event could not be routed: %s", event.get("method"))

    def _route(self, event: dict[str, Any]) -> None:
        method, params = event["method"], event.get("params") or {}
        if method == "Target.receivedMessageFromTarget":
            owner = self.owners.get(params.get("sessionId", ""))
            if owner is not None:
                owner.from_target(params["sessionId"], params["message"])
        elif method == "Target.detachedFromTarget":
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
        for bridge in list(self.bridges):
            bridge.browser_gone()
        self.bridges.clear()
        self.owners.clear()


def _report(done: asyncio.Future, failed: Callable[[str], None]) -> None:
    if done.cancelled():
        return
    error = done.exception()
    if error is not None:
        failed(str(error).splitlines()[0] if isinstance(error, PlaywrightError) else repr(error))
