"""One CDP client's view of the persona's browser: its leased page, the tabs
it opens, and nothing else.

The client speaks the flat protocol, as Playwright's `connect_over_cdp` and
Puppeteer's `connect` do: one connection, messages to a target carry its
`sessionId`. The bridge answers the browser-level part itself, from what it
may show (`Target.setAutoAttach`, `Target.getTargets`, `Target.createTarget`
...), and passes a session's messages through the mux (cdp/mux.py) into the
nested session it attached for that target. Session ids the client sees are
Chromium's own, but only those the bridge attached for it route anywhere.

Puppeteer attaches to tab targets and finds each page inside its tab; the
bridge shows it a tab of its own making around each page it owns (`Tab`),
so no real tab target, which would reach past the page, is ever attached.
What the bridge answers itself at the browser level, and the targets it
shows, are in cdp/targets.py.

Every message first passes the policy (cdp/policy.py); what is refused is
answered as a CDP error and never reaches Chromium.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import Callable
from typing import Any

from cdp.mux import ChromiumError, Mux
from cdp.permissions import PERMISSION_CALLS
from cdp.policy import NOT_APPLIED, SESSION_BROWSER_CALLS, SESSION_DOMAINS, allows, refusal
from cdp.targets import BROWSER_CALLS, NO_SESSION, CdpErrorReply, Tab, TabBudget, Targets, fake_id

log = logging.getLogger("penelope.cdp")

# Methods the bridge answers at the browser level; the rest is refused there.
BROWSER_PASS = frozenset({"Browser.getVersion", "SystemInfo.getInfo"})
# What a page's session auto-attaches below it: its frames and its workers.
CHILD_TYPES = frozenset({"iframe", "worker"})
CHILD_TARGETS = [{"type": "iframe"}, {"type": "worker"}, {"exclude": True}]
# The persona's cookies, every origin's, as the full key's web/cookies reaches them.
CONTEXT_CALLS = frozenset({"Storage.getCookies", "Storage.setCookies", "Storage.clearCookies"})
SESSION_TARGET_CALLS = frozenset({"Target.setAutoAttach", "Target.detachFromTarget", "Target.getTargetInfo"})
# Characters of a client's message past which it is passed on in parts (cdp/mux.py, `json_pieces`).
LARGE_MESSAGE = 1024 * 1024


class Bridge(Targets):
    def __init__(
        self, mux: Mux, home: str, *, out: Callable[[str], None], budget: TabBudget,
        refused: Callable[[str], None] | None = None, page_name: str = "",
    ) -> None:
        self.mux = mux
        self.home = home  # the leased page's target id
        self.out = out  # sends one message to the client, in order
        self.budget = budget  # the tabs MAX_PAGES allows: the client's count with the pages
        self.on_refused = refused
        self.page_name = page_name
        self.tabs: dict[str, Tab] = {home: Tab(fake_id(), home)}  # page target id: its tab
        self.own_tabs: set[str] = set()  # the pages it opened: closed at its end
        self.routes: dict[str, list[str]] = {}  # session id: nested sessions from the mux's
        self.attached: dict[str, tuple[str, str | None]] = {}  # a page's session: (the page, the session it came in)
        self.browser_sessions: set[str] = set()  # the client's own sessions at the browser level
        self.caller: str | None = None  # the browser-level session of the call being answered
        self.tab_sessions: dict[str, Tab] = {}
        self.auto_attach: list | None = None  # the client's filter, while it auto-attaches
        self.discover: list | None = None
        self.wrappers: dict[int, tuple[int, str]] = {}  # our envelope's id: the client's (id, session)
        self.envelope_ids = itertools.count(-1, -1)
        self.ended = False
        self.gone: Callable[[str], None] | None = None  # told when the browser goes under it
        self.large = False  # the client's message being passed on is large: the mux writes it in parts
        mux.bridges.add(self)

    # --- from the client -------------------------------------------------------------

    async def receive(self, text: str) -> None:
        self.large = len(text) > LARGE_MESSAGE
        try:
            message = json.loads(text)
            call_id, method = message["id"], message["method"]
            if not isinstance(call_id, int) or isinstance(call_id, bool) or call_id < 0 or not isinstance(method, str):
                raise ValueError
        except (ValueError, KeyError, TypeError):
            self._send({"id": _id_of(text), "error": {
                "code": -32700, "message": "A CDP message is a JSON object with an id (a whole number, 0 or more) and a method.",
            }})
            return
        params = message.get("params") or {}
        session_id = message.get("sessionId")
        if session_id is not None and not isinstance(session_id, str):
            self._fail(call_id, None, "sessionId is a string.", -32602)
            return
        try:
            if not isinstance(params, dict):
                raise CdpErrorReply("params must be an object.", -32602)
            why = refusal(method, params)
            if why is not None:
                if self.on_refused is not None:
                    self.on_refused(method)
                raise CdpErrorReply(f"{method} is refused: {why}.")
            if method in NOT_APPLIED:
                self._answer(call_id, session_id, {})
            elif method in PERMISSION_CALLS and (session_id is None or session_id in (*self.browser_sessions, *self.routes)):
                # The context's, wherever sent: kept by the mux's ledger, and undone when the client goes.
                self._own_context(params)
                self._answer(call_id, session_id, await self.mux.permissions.call(self, method, params))
            elif session_id is None or session_id in self.browser_sessions:
                self.caller = session_id
                self._answer(call_id, session_id, await self._browser_call(method, params))
            elif session_id in self.tab_sessions:
                self._answer(call_id, session_id, await self._tab_call(self.tab_sessions[session_id], method, params))
            else:
                self._session_call(call_id, session_id, method, params)
        except CdpErrorReply as error:
            self._fail(call_id, session_id, str(error), error.code)
        except ChromiumError as error:
            self._fail(call_id, session_id, str(error))
        except (TypeError, ValueError, AttributeError) as error:  # a parameter of the wrong shape
            self._fail(call_id, session_id, f"Invalid parameters: {error}.", -32602)

    async def _browser_call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method in BROWSER_PASS:
            return await self.mux.call(method, params)
        if method in CONTEXT_CALLS:
            self._own_context(params)
            return await self.mux.call(method, params)
        handler = BROWSER_CALLS.get(method)
        if handler is None:
            raise CdpErrorReply(
                f"{method} is not offered at the browser level: a CDP client drives its own pages; "
                "send it with a page's sessionId."
            )
        return await handler(self, params)

    def _session_call(self, call_id: int, session_id: str, method: str, params: dict[str, Any]) -> None:
        route = self.routes.get(session_id)
        if route is None:
            raise CdpErrorReply(f"Session with given id not found: {session_id}", NO_SESSION)
        domain = method.split(".", 1)[0]
        if domain not in SESSION_DOMAINS or (domain == "Browser" and method not in SESSION_BROWSER_CALLS):
            raise CdpErrorReply(f"{method} is not offered to a CDP client: it acts beyond the client's pages.")
        if domain == "Browser":
            self._own_context(params)
            if params.get("targetId") is not None:
                params = {**params, "targetId": self._page_of(params["targetId"])}
        page = self.attached.get(route[0], (None, None))[0]
        if method == "Page.close" and page == self.home and len(route) == 1:
            self._let_go_of_home()  # the worker's page stays; the client is let go of it
            self._answer(call_id, session_id, {})
            return
        if method.startswith("Target."):
            if method not in SESSION_TARGET_CALLS:
                raise CdpErrorReply(f"{method} is not offered inside a page's session.")
            if method == "Target.setAutoAttach":
                # Nested inside the page's session, where the bridge routes them, and
                # only the page's own frames and workers: a service worker is its origin's.
                params = {**params, "flatten": False, "filter": CHILD_TARGETS}
            elif method == "Target.detachFromTarget" and params.get("sessionId") not in self.routes:
                raise CdpErrorReply("No session with that id is attached here.", NO_SESSION)
            elif method == "Target.getTargetInfo" and params.get("targetId") not in (None, *self.tabs):
                raise CdpErrorReply("No target with that id is the client's.")
        self._post(route, call_id, method, params, lambda why: self._fail(call_id, session_id, why, NO_SESSION), (call_id, session_id))

    def _post(
        self, route: list[str], call_id: int, method: str, params: dict[str, Any],
        failed: Callable[[str], None], client: tuple[int, str] | None,
    ) -> None:
        """A message into the session at the end of `route`: straight into
        a page's flat session, or wrapped for each nested session below it
        (`Target.sendMessageToTarget`), whose answers come back inside its
        events. `failed` hears why when a session on the way is gone."""
        if len(route) == 1:
            if not self.mux.post(route[0], call_id, method, params, None if client else _dropped, large=self.large):
                failed("Session with given id not found.")
            return
        message = json.dumps({"id": call_id, "method": method, "params": params})
        for inner in reversed(route[2:]):
            envelope = next(self.envelope_ids)
            if client is not None:
                self.wrappers[envelope] = client
            message = json.dumps({"id": envelope, "method": "Target.sendMessageToTarget", "params": {"sessionId": inner, "message": message}})
        if not self.mux.post(route[0], 0, "Target.sendMessageToTarget", {"sessionId": route[1], "message": message},
                             lambda reply: _refused(reply, failed)):
            failed("Session with given id not found.")

    # --- from Chromium, through the mux ---------------------------------------------------

    def from_target(self, session_id: str, text: str) -> None:
        """A message of a session the bridge attached, ending with the
        session's id: to the client. Answers and most events pass as text,
        unparsed."""
        if self.ended:
            return
        if text.startswith('{"method":"Target.') or text.startswith('{"id":-') or not text.startswith(('{"id":', '{"method":')):
            self._special(session_id, json.loads(text))
            return
        self.out(text)

    def _special(self, session_id: str, message: dict[str, Any]) -> None:
        call_id = message.get("id")
        if isinstance(call_id, int) and call_id < 0:  # the answer to one of our envelopes
            held = self.wrappers.pop(call_id, None)
            if held is not None and "error" in message:
                self._fail(*held, message["error"].get("message", "The session is gone."))
            return
        method, params = message.get("method"), message.get("params") or {}
        if method == "Target.receivedMessageFromTarget":
            child = params.get("sessionId")
            if child in self.routes:  # a frame's or a worker's, nested in its page's session
                self.from_target(child, f'{params.get("message", "{}")[:-1]},"sessionId":"{child}"}}')
            return
        if method == "Target.attachedToTarget" and session_id in self.routes:
            child = params.get("sessionId", "")
            if (params.get("targetInfo") or {}).get("type") not in CHILD_TYPES:
                self._post_own(session_id, "Target.detachFromTarget", {"sessionId": child})
                return
            self.routes[child] = [*self.routes[session_id], child]
        elif method == "Target.detachedFromTarget":
            self._forget(params.get("sessionId", ""))
        message["sessionId"] = session_id
        self._send(message)

    def _post_own(self, session_id: str, method: str, params: dict[str, Any]) -> None:
        """A message of the bridge's own into one of the client's sessions; its answer is dropped."""
        self._post(self.routes[session_id], next(self.envelope_ids), method, params,
                   lambda why: log.debug("%s failed: %s", method, why), None)

    def detached(self, session_id: str) -> None:
        """A session at the top of a route ended (its target closed, or we detached it)."""
        self._forget(session_id)
        held = self.attached.pop(session_id, None)
        if held is not None:
            page, parent = held
            self._event("Target.detachedFromTarget", {"sessionId": session_id, "targetId": page}, parent)

    def _forget(self, session_id: str) -> None:
        for held in [held for held, route in self.routes.items() if session_id in route]:
            del self.routes[held]

    def target_news(self, method: str, params: dict[str, Any]) -> None:
        info = params.get("targetInfo") or {}
        target = params.get("targetId") or info.get("targetId")
        if method == "Target.targetCreated" and info.get("openerId") in self.tabs and info.get("type") == "page":
            self._popup(info)
            return
        if target not in self.tabs or self.ended:
            return
        tab = self.tabs[target]
        if target == self.home and method in ("Target.targetDestroyed", "Target.targetCrashed"):
            self.browser_gone("The page's tab went (closed, crashed, or the browser went); take a new token.")
        if method == "Target.targetDestroyed":
            self._drop(target)
        if self.discover is None:
            return
        if allows(self.discover[0], "page"):
            self._event(method, params)
        if method == "Target.targetDestroyed" and allows(self.discover[0], "tab"):
            self._event(method, {"targetId": tab.id})

    def _popup(self, info: dict[str, Any]) -> None:
        """A page one of the client's pages opened is the client's too, and
        counts as one of its tabs; past MAX_PAGES it is closed at once."""
        if self.budget.room() <= 0:
            self.mux.post_quietly("Target.closeTarget", {"targetId": info["targetId"]})
            return
        self._adopt(info["targetId"], own=True)
        if self.discover is not None and allows(self.discover[0], "page"):
            self._event("Target.targetCreated", {"targetInfo": info})
        if self.auto_attach is not None:
            asyncio.ensure_future(self._announce_quietly(info["targetId"]))

    def browser_gone(self, why: str = "The persona's browser went; the worker launches it again.") -> None:
        if self.gone is not None:
            self.gone(why)

    # --- the end ---------------------------------------------------------------------

    async def close(self) -> None:
        """The client went, or its lease or token ended: its sessions are
        detached (Chromium undoes what they set on the page), the permissions
        it set for the persona are undone (cdp/permissions.py), and the tabs
        it opened are closed."""
        if self.ended:
            return
        self.ended = True
        self.mux.bridges.discard(self)
        for session_id in [session_id for session_id, route in self.routes.items() if len(route) == 1]:
            self.mux.detach(session_id)
        try:
            await self.mux.permissions.release(self)  # the permissions it granted, for every page of the persona
        except ChromiumError as error:
            log.debug("undoing a CDP client's permissions: %s", error)
        for page in list(self.own_tabs):
            if not self.mux.closed:
                try:
                    await self.mux.call("Target.closeTarget", {"targetId": page})
                except ChromiumError as error:
                    log.debug("closing a CDP client's tab %s: %s", page, error)
            self.budget.free_tab(page)
        self.own_tabs.clear()


def _dropped(_reply: str) -> None:
    """The answer to a message of the bridge's own: nobody waits for it."""


def _refused(reply: str, failed: Callable[[str], None]) -> None:
    """An envelope's answer: `failed` hears Chromium's words when it is an error."""
    error = json.loads(reply).get("error")
    if error is not None:
        failed(error.get("message", "The session is gone."))


def _id_of(text: str) -> int:
    try:
        call_id = json.loads(text).get("id")
    except (ValueError, AttributeError):
        return 0
    return call_id if isinstance(call_id, int) else 0

