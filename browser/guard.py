"""BROWSER_REFUSE_PRIVATE: the browser refuses requests into the host's own
networks (loopback, private, link-local, shared, metadata addresses, the
worker's own port among them), whatever asks for them: `web/*`, primitives,
every plugin, and the pages themselves (sub-requests, redirects, scripts).

Every request of the browser passes through one context route while the
guard is on. A refused one is answered here with a 403 naming the address
(and `Access-Control-Allow-Origin: *`, so a page's script can read why); a
refused navigation of a page's main frame also makes the call in hand
answer 403 (`plugins.calls.run_claimed`).

A guard, not a boundary: the browser resolves a name again when it connects,
so a name whose answer changes in between (DNS rebinding) can slip past it.
The boundary is the network's: the Kubernetes base's NetworkPolicy.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from playwright.async_api import Page, Request, Route

from core.addresses import refused_address

log = logging.getLogger("penelope.browser")

# A name's addresses are looked up again after this long.
RESOLVED_FOR_S = 30.0
GUARDED_SCHEMES = frozenset({"http", "https", "ws", "wss"})


class PrivateGuard:
    """The context route that refuses private addresses, with a small cache of names."""

    def __init__(self, on_navigation_refused: Callable[[Page, str], None]) -> None:
        self.on_navigation_refused = on_navigation_refused
        self._resolved: dict[str, tuple[float, list[str]]] = {}

    async def handle(self, route: Route, request: Request) -> None:
        refused = await self.refusal(request.url)
        if refused is None:
            await route.fallback()
            return
        log.info("the browser refused %s: %s", request.url.split("?", 1)[0][:200], refused)
        page = _main_frame_navigation_page(request)
        if page is not None:
            self.on_navigation_refused(page, refused)
        await route.fulfill(
            status=403,
            content_type="text/plain; charset=utf-8",
            headers={"Access-Control-Allow-Origin": "*"},
            body=refused,
        )

    async def refusal(self, url: str) -> str | None:
        """Why `url` is refused (a sentence naming the address), or None."""
        parts = urlsplit(url)
        if parts.scheme not in GUARDED_SCHEMES or not parts.hostname:
            return None
        host = parts.hostname
        for address in await self.addresses(host, parts.port or (443 if parts.scheme in ("https", "wss") else 80)):
            if refused_address(address):
                shown = host if host == address else f"{host} ({address})"
                return (
                    f"The browser refused {parts.scheme}://{host}{':' + str(parts.port) if parts.port else ''}: "
                    f"{shown} is a loopback, private, link-local or metadata address (BROWSER_REFUSE_PRIVATE)."
                )
        return None

    async def addresses(self, host: str, port: int) -> list[str]:
        try:
            return [str(ipaddress.ip_address(host))]
        except ValueError:
            pass
        now = time.monotonic()
        cached = self._resolved.get(host)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
            found = sorted({info[4][0] for info in infos})
        except OSError:
            found = []  # the browser will fail to resolve it too
        if len(self._resolved) > 1000:
            self._resolved.clear()
        self._resolved[host] = (now + RESOLVED_FOR_S, found)
        return found


def _main_frame_navigation_page(request: Request) -> Page | None:
    try:
        if request.is_navigation_request() and request.frame.parent_frame is None:
            return request.frame.page
    except Exception:  # a service worker's request has no frame
        return None
    return None
