"""The browser-level part of a CDP client's bridge (cdp/bridge.py): the
targets it shows the client (its leased page, the tabs it opened, and a tab
of the bridge's own making around each, for Puppeteer), and the Target and
Browser calls it answers itself instead of passing them to Chromium."""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from cdp.mux import ChromiumError
from cdp.policy import allows, target_filter

if TYPE_CHECKING:
    from cdp.mux import Mux

log = logging.getLogger("penelope.cdp")

SERVER_ERROR, NO_SESSION = -32000, -32001


class CdpErrorReply(Exception):
    """A client's message that is answered with an error, not passed on: a
    CDP error reply (`code`, the message) on the open socket, no HTTP refusal."""

    def __init__(self, message: str, code: int = SERVER_ERROR) -> None:
        super().__init__(message)
        self.code = code


class TabBudget(Protocol):
    """The worker's count of tabs against MAX_PAGES (browser/registry.py)."""

    def room(self) -> int: ...

    def hold_tab(self, target_id: str) -> None: ...

    def free_tab(self, target_id: str) -> None: ...


@dataclass
class Tab:
    """The tab target shown around one of the client's pages."""

    id: str
    page: str  # the page target's id
    session: str | None = None  # its session, once attached




class Targets:
    """What a bridge shows and answers at the browser level. The bridge
    (cdp/bridge.py) holds the state, made in its `__init__`, and routes the
    sessions' messages."""

    mux: Mux
    home: str
    out: Callable[[str], None]
    budget: TabBudget
    page_name: str
    tabs: dict[str, Tab]
    own_tabs: set[str]
    routes: dict[str, list[str]]
    attached: dict[str, tuple[str, str | None]]
    browser_sessions: set[str]
    caller: str | None
    tab_sessions: dict[str, Tab]
    auto_attach: tuple | None
    discover: tuple | None
    ended: bool


    def _own_context(self, params: dict[str, Any]) -> None:
        context = params.get("browserContextId")
        if context not in (None, "", self.mux.default_context_id):
            raise CdpErrorReply("Only the persona's browser context is offered.")

    async def _set_auto_attach(self, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("autoAttach") and not params.get("flatten"):
            raise CdpErrorReply("Only the flat protocol is offered: Target.setAutoAttach with flatten: true.")
        self.auto_attach = (target_filter(params.get("filter")), ) if params.get("autoAttach") else None
        if self.auto_attach is not None:
            for page in list(self.tabs):
                await self._announce(page)
        return {}

    async def _set_discover(self, params: dict[str, Any]) -> dict[str, Any]:
        self.discover = (target_filter(params.get("filter")), ) if params.get("discover") else None
        if self.discover is not None:
            for page in list(self.tabs):
                for info in await self._infos(page):
                    if allows(self.discover[0], info["type"]):
                        self._event("Target.targetCreated", {"targetInfo": info})
        return {}

    async def _get_targets(self, params: dict[str, Any]) -> dict[str, Any]:
        infos = []
        for page in list(self.tabs):
            infos += await self._infos(page)
        return {"targetInfos": [info for info in infos if allows(target_filter(params.get("filter")), info["type"])]}

    async def _get_target_info(self, params: dict[str, Any]) -> dict[str, Any]:
        target = params.get("targetId")
        if target is None:
            return await self.mux.call("Target.getTargetInfo", {})
        return {"targetInfo": await self._info_of(target)}

    async def _create_target(self, params: dict[str, Any]) -> dict[str, Any]:
        self._own_context(params)
        if self.budget.room() <= 0:
            raise CdpErrorReply("Every page MAX_PAGES allows is open: close a tab first.")
        passed = {key: params[key] for key in ("url", "width", "height", "background", "newWindow") if key in params}
        created = await self.mux.call("Target.createTarget", passed)
        self._adopt(created["targetId"], own=True)
        if self.auto_attach is not None:
            await self._announce(created["targetId"])
        return created

    async def _close_target(self, params: dict[str, Any]) -> dict[str, Any]:
        target = self._page_of(params.get("targetId"))
        if target == self.home:
            self._let_go_of_home()
            return {"success": True}
        return await self.mux.call("Target.closeTarget", {"targetId": target})

    def _let_go_of_home(self) -> None:
        """A client closing its leased page: the page is the worker's and
        stays open, so the client is detached from it, and told it closed."""
        for session_id, (page, _parent) in list(self.attached.items()):
            if page == self.home:
                self.mux.detach(session_id)
                self.detached(session_id)
        tab = self.tabs.get(self.home)
        if self.discover is not None and tab is not None:
            for target, kind in ((self.home, "page"), (tab.id, "tab")):
                if allows(self.discover[0], kind):
                    self._event("Target.targetDestroyed", {"targetId": target}, self.caller)
        self._drop(self.home)

    def detached(self, session_id: str) -> None:
        raise NotImplementedError  # the bridge's

    async def _activate_target(self, params: dict[str, Any]) -> dict[str, Any]:
        return await self.mux.call("Target.activateTarget", {"targetId": self._page_of(params.get("targetId"))})

    async def _attach_to_target(self, params: dict[str, Any]) -> dict[str, Any]:
        if not params.get("flatten"):
            raise CdpErrorReply("Only the flat protocol is offered: Target.attachToTarget with flatten: true.")
        target = params.get("targetId")
        tab = next((tab for tab in self.tabs.values() if tab.id == target), None)
        if tab is not None:
            return {"sessionId": self._attach_tab(tab, parent=self.caller)}
        page = self._page_of(target)
        session_id = await self._attach_page(page, parent=self.caller)
        return {"sessionId": session_id}

    async def _attach_to_browser_target(self, params: dict[str, Any]) -> dict[str, Any]:
        """A session at the browser level of the client's own (Playwright opens
        one for `new_cdp_session`): its calls are answered as the bridge answers
        the connection's, under the same rules; no browser session of Chromium's
        is attached for it."""
        session_id = fake_id()
        self.browser_sessions.add(session_id)
        info = (await self.mux.call("Target.getTargetInfo", {}))["targetInfo"]
        self._event("Target.attachedToTarget", {"sessionId": session_id, "targetInfo": info, "waitingForDebugger": False}, self.caller)
        return {"sessionId": session_id}

    async def _detach_from_target(self, params: dict[str, Any]) -> dict[str, Any]:
        session_id = params.get("sessionId")
        if session_id in self.tab_sessions:
            tab = self.tab_sessions.pop(session_id)
            tab.session = None
            self._event("Target.detachedFromTarget", {"sessionId": session_id, "targetId": tab.id}, self.caller)
            return {}
        if session_id in self.browser_sessions:
            self.browser_sessions.discard(session_id)
            self._event("Target.detachedFromTarget", {"sessionId": session_id}, self.caller)
            return {}
        if session_id not in self.routes or len(self.routes[session_id]) != 1:
            raise CdpErrorReply("No session with that id is attached at the browser level.", NO_SESSION)
        self.mux.detach(session_id)
        self.detached(session_id)
        return {}

    async def _get_browser_contexts(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"browserContextIds": [], "defaultBrowserContextId": self.mux.default_context_id}

    async def _get_window_for_target(self, params: dict[str, Any]) -> dict[str, Any]:
        return await self.mux.call("Browser.getWindowForTarget", {"targetId": self._page_of(params.get("targetId") or self.home)})

    async def _tab_call(self, tab: Tab, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A message to a tab the bridge shows: only what finds its page."""
        if method == "Target.setAutoAttach":
            if params.get("autoAttach"):
                if not params.get("flatten"):
                    raise CdpErrorReply("Only the flat protocol is offered: Target.setAutoAttach with flatten: true.")
                if (tab.page, tab.session) not in self.attached.values():
                    await self._attach_page(tab.page, parent=tab.session)
            return {}
        if method == "Runtime.runIfWaitingForDebugger":
            return {}
        if method == "Target.getTargetInfo":
            return {"targetInfo": await self._tab_info(tab)}
        raise CdpErrorReply(f"{method} is not offered on a tab: send it to the page inside it.")


    # --- targets ---------------------------------------------------------------------

    def _adopt(self, page: str, *, own: bool) -> None:
        self.tabs.setdefault(page, Tab(fake_id(), page))
        if own:
            self.own_tabs.add(page)
            self.budget.hold_tab(page)

    def _drop(self, page: str) -> None:
        tab = self.tabs.pop(page, None)
        self.own_tabs.discard(page)
        self.budget.free_tab(page)
        if tab is not None and tab.session is not None:
            self.tab_sessions.pop(tab.session, None)
            self._event("Target.detachedFromTarget", {"sessionId": tab.session, "targetId": tab.id})

    def _page_of(self, target: Any) -> str:
        if target in self.tabs:
            return target
        tab = next((tab for tab in self.tabs.values() if tab.id == target), None)
        if tab is None:
            raise CdpErrorReply(
                "No target with that id is the client's: it sees its leased page and the tabs it opened."
            )
        return tab.page

    async def _announce(self, page: str) -> None:
        """Tell the auto-attaching client of `page`: its tab, when the client
        asked for tabs (Puppeteer), else the page itself (Playwright)."""
        wanted = self.auto_attach[0] if self.auto_attach else None
        tab = self.tabs.get(page)
        if tab is None:
            return
        if allows(wanted, "tab"):
            if tab.session is None:
                self._attach_tab(tab, parent=None)
        elif allows(wanted, "page") and (page, None) not in self.attached.values():
            await self._attach_page(page, parent=None)

    async def _announce_quietly(self, page: str) -> None:
        try:
            await self._announce(page)
        except ChromiumError as error:
            log.debug("a CDP client's new page %s was not attached: %s", page, error)

    def _attach_tab(self, tab: Tab, *, parent: str | None) -> str:
        tab.session = fake_id()
        self.tab_sessions[tab.session] = tab
        info = {"targetId": tab.id, "type": "tab", "title": "", "url": "", "attached": True,
                "canAccessOpener": False, "browserContextId": self.mux.default_context_id}
        self._event("Target.attachedToTarget", {"sessionId": tab.session, "targetInfo": info, "waitingForDebugger": False}, parent)
        return tab.session

    async def _attach_page(self, page: str, *, parent: str | None) -> str:
        session_id = await self.mux.attach(page, self)
        if self.ended:
            self.mux.detach(session_id)
            raise CdpErrorReply("The connection is closing.")
        self.routes[session_id] = [session_id]
        self.attached[session_id] = (page, parent)
        info = {**await self._info_of(page), "attached": True}
        self._event("Target.attachedToTarget", {"sessionId": session_id, "targetInfo": info, "waitingForDebugger": False}, parent)
        return session_id

    async def _info_of(self, target: Any) -> dict[str, Any]:
        page = self._page_of(target)
        if target != page:
            return await self._tab_info(self.tabs[page])
        return (await self.mux.call("Target.getTargetInfo", {"targetId": page}))["targetInfo"]

    async def _tab_info(self, tab: Tab) -> dict[str, Any]:
        page = await self._info_of(tab.page)
        return {**page, "targetId": tab.id, "type": "tab", "attached": tab.session is not None}

    async def _infos(self, page: str) -> list[dict[str, Any]]:
        tab = self.tabs[page]
        info = await self._info_of(page)
        return [{**info, "targetId": tab.id, "type": "tab", "attached": tab.session is not None}, info]


    # --- to the client ---------------------------------------------------------------

    def _answer(self, call_id: int, session_id: str | None, result: dict[str, Any]) -> None:
        self._send({"id": call_id, "result": result, **({"sessionId": session_id} if session_id else {})})

    def _fail(self, call_id: int, session_id: str | None, message: str, code: int = SERVER_ERROR) -> None:
        self._send({"id": call_id, "error": {"code": code, "message": message}, **({"sessionId": session_id} if session_id else {})})

    def _event(self, method: str, params: dict[str, Any], session_id: str | None = None) -> None:
        self._send({"method": method, "params": params, **({"sessionId": session_id} if session_id else {})})

    def _send(self, message: dict[str, Any]) -> None:
        if not self.ended:
            self.out(json.dumps(message))


BROWSER_CALLS = {
    "Target.setAutoAttach": Targets._set_auto_attach,
    "Target.setDiscoverTargets": Targets._set_discover,
    "Target.getTargets": Targets._get_targets,
    "Target.getTargetInfo": Targets._get_target_info,
    "Target.createTarget": Targets._create_target,
    "Target.closeTarget": Targets._close_target,
    "Target.activateTarget": Targets._activate_target,
    "Target.attachToTarget": Targets._attach_to_target,
    "Target.attachToBrowserTarget": Targets._attach_to_browser_target,
    "Target.detachFromTarget": Targets._detach_from_target,
    "Target.getBrowserContexts": Targets._get_browser_contexts,
    "Browser.getWindowForTarget": Targets._get_window_for_target,
}


def fake_id() -> str:
    return secrets.token_hex(16).upper()
