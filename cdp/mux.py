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
from json.encoder import encode_basestring_ascii
from typing import TYPE_CHECKING, Any, Protocol

from browser.tap import PART
from cdp.permissions import Permissions

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from playwright.async_api import BrowserContext

    from browser.tap import Link

log = logging.getLogger("penelope.cdp")

TARGET_NEWS = frozenset({"Target.targetCreated", "Target.targetInfoChanged", "Target.targetDestroyed", "Target.targetCrashed"})
SESSION_TAIL = ',"sessionId":"'
FIRST_ID = -10_000  # the mux's ids count down from here (Playwright's only negative id is -9999)
SERVER_ERROR = -32000


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
        self.permissions = Permissions(self)  # the clients' permission overrides, undone as each goes
        # Every message the mux sends has an id of its own, negative (the tap's
        # sign for the worker's: browser/tap.cjs) and below Playwright's one
        # negative id (-9999): its answer comes back to the mux whichever
        # session it went to, even as Chromium's answer at the root for a
        # session that is gone. The handler of each answer, by that id:
        self._waiting: dict[int, Callable[[str, int], None]] = {}
        self._ids = itertools.count(FIRST_ID, -1)
        link.on_message = self._message
        link.on_close = self._closed

    @classmethod
    async def open(cls, context: BrowserContext, link: Link) -> Mux:
        """A mux on the browser of `context` (a persistent context: its browser is the persona's), through `link`."""
        mux = cls(context, link)
        mux.session = (await mux.ask(None, "Target.attachToBrowserTarget", {}))["sessionId"]
        await mux.call("Target.setDiscoverTargets", {"discover": True})
        contexts = await mux.call("Target.getBrowserContexts")
        mux.default_context_id = contexts.get("defaultBrowserContextId", "")
        return mux

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A browser-level call, awaited: its result, or ChromiumError."""
        return await self.ask(self.session, method, params or {})

    async def ask(self, session_id: str | None, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A call into `session_id` (None: the browser's root), awaited: its result, or ChromiumError."""
        if self.closed:
            raise ChromiumError("The browser went.")
        answer = asyncio.get_running_loop().create_future()

        def answered(text: str, _comma: int) -> None:
            if not answer.done():
                message = json.loads(text)
                if "error" in message:
                    answer.set_exception(ChromiumError(message["error"].get("message", "The call failed.")))
                else:
                    answer.set_result(message.get("result") or {})

        self._send(session_id, method, params, answered)
        return await answer

    def post(
        self, session_id: str, call_id: int, method: str, params: dict[str, Any], answered: Callable[[str], None] | None = None,
        *, large: bool = False,
    ) -> bool:
        """Send a message into a page's session now, so messages keep their
        order: False, and nothing sent, when the session is gone already.
        Its answer, with `call_id` for its id and ending with the session's
        id, goes to the session's owner (`from_target`), or to `answered`.
        A `large` message is written as its JSON is made, in parts."""
        owner = self.owners.get(session_id)
        if self.closed or owner is None:
            return False
        to = answered or (lambda reply: owner.from_target(session_id, reply))
        tail = f'{SESSION_TAIL}{session_id}"}}'

        def relay(text: str, comma: int) -> None:
            rest = text[comma:]
            if not rest.endswith(tail):  # Chromium answers at the root for a session that went
                rest = rest[:-1] + tail
            to(f'{{"id":{call_id}{rest}')

        self._send(session_id, method, params, relay, large=large)
        return True

    def _send(
        self, session_id: str | None, method: str, params: dict[str, Any], answered: Callable[[str, int], None], *, large: bool = False,
    ) -> None:
        wire = next(self._ids)
        self._waiting[wire] = answered
        message = {"id": wire, "method": method, "params": params}
        if session_id:
            message["sessionId"] = session_id
        self.link.send(json_pieces(message) if large else json.dumps(message, separators=(",", ":")))

    async def attach(self, target_id: str, owner: Owner) -> str:
        """Attach `target_id` as a flat session for `owner`: the session's id.
        The owner is set as the answer is read, before any later message of
        the session (or its end) is routed."""
        if self.closed:
            raise ChromiumError("The browser went.")
        attached = asyncio.get_running_loop().create_future()

        def answered(text: str, _comma: int) -> None:
            message = json.loads(text)
            if "error" in message:
                if not attached.done():
                    attached.set_exception(ChromiumError(message["error"].get("message", "The target could not be attached.")))
                return
            session_id = message["result"]["sessionId"]
            self.owners[session_id] = owner
            if attached.done():  # the caller went meanwhile: nobody drives it
                self.detach(session_id)
            else:
                attached.set_result(session_id)

        self._send(self.session, "Target.attachToTarget", {"targetId": target_id, "flatten": True}, answered)
        session_id = await attached
        if self.owners.get(session_id) is not owner:
            raise ChromiumError("The target went as it was attached.")
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
            if text.startswith('{"id":-'):  # an answer to one of the mux's messages
                comma = text.index(",", 6)
                answered = self._waiting.pop(int(text[6:comma]), None)
                if answered is not None:
                    answered(text, comma)
                return
            tail = text.rfind(SESSION_TAIL)
            session_id = text[tail + len(SESSION_TAIL):-2] if tail != -1 and text.endswith('"}') else ""
            owner = self.owners.get(session_id)
            if owner is not None:
                owner.from_target(session_id, text)
            elif session_id == self.session:
                self._browser_event(json.loads(text))
        except Exception:
            log.exception("a CDP message could not be routed: %.80s", text)

    def _browser_event(self, message: dict[str, Any]) -> None:
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
        """The browser went (stopped, recycled, or the worker stops): what
        waits for an answer hears so."""
        self.closed = True
        waiting, self._waiting = self._waiting, {}
        for wire, answered in waiting.items():
            text = json.dumps({"id": wire, "error": {"code": SERVER_ERROR, "message": "The browser went."}}, separators=(",", ":"))
            try:
                answered(text, text.index(","))
            except Exception:
                log.exception("a CDP answer could not be given at the browser's end")
        for bridge in list(self.bridges):
            bridge.browser_gone()
        self.bridges.clear()
        self.owners.clear()


def json_pieces(value: Any) -> Iterator[str]:
    """`json.dumps(value, separators=(",", ":"))` in pieces, for a value
    parsed from JSON: a long string is escaped a PART at a time (escaping
    is per character, and `json.loads` joins a surrogate pair into one), so
    writing a large message never spends long in one step (browser/tap.py)."""
    if isinstance(value, str):
        if len(value) <= PART:
            yield encode_basestring_ascii(value)
            return
        yield '"'
        for start in range(0, len(value), PART):
            yield encode_basestring_ascii(value[start:start + PART])[1:-1]
        yield '"'
    elif isinstance(value, dict):
        yield "{"
        for number, (key, item) in enumerate(value.items()):
            yield f"{',' if number else ''}{encode_basestring_ascii(str(key))}:"
            yield from json_pieces(item)
        yield "}"
    elif isinstance(value, list):
        yield "["
        for number, item in enumerate(value):
            if number:
                yield ","
            yield from json_pieces(item)
        yield "]"
    else:
        yield json.dumps(value)


def _report(done: asyncio.Future, failed: Callable[[str], None]) -> None:
    if done.cancelled():
        return
    error = done.exception()
    if error is not None:
        failed(str(error))
