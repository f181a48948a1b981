"""Opt-in refusal of webhook callbacks that point into the host's own
networks (WEBHOOK_REFUSE_PRIVATE=1).

By default a client with the key may point a webhook anywhere the host
reaches, as the jobs guide says. With the guard on, the callback's host is
resolved and refused when any address is loopback, private, link-local,
shared, reserved, multicast or a cloud metadata address — at submit (400)
and again at every attempt, which then connects to the very address it
checked, so a name that changes its answer in between gains nothing.
Redirects are never followed either way.
"""

from __future__ import annotations

import asyncio
import socket
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings

from core.addresses import refused_address

__all__ = [
    "CallbackRefused", "CallbackUnresolved", "pinned_request", "refused_address", "resolve_allowed", "submit_refusal",
]

class CallbackRefused(Exception):
    """The callback points into the host's own networks: never sent."""


class CallbackUnresolved(Exception):
    """The callback's host has no address now (perhaps only for now)."""



async def submit_refusal(url: str, header: str = "X-Callback-Url") -> str | None:
    """Why a job start (or a schedule) with this callback is refused at
    submit under WEBHOOK_REFUSE_PRIVATE, in one sentence; None when it is
    allowed, or the guard is off."""
    if not settings.WEBHOOK_REFUSE_PRIVATE:
        return None
    try:
        await resolve_allowed(url)
    except (CallbackRefused, CallbackUnresolved) as refused:
        return f"{header} is refused: {refused} (WEBHOOK_REFUSE_PRIVATE)."
    return None


async def resolve_allowed(url: str) -> str:
    """The address to connect to for `url`; CallbackRefused or CallbackUnresolved."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        raise CallbackUnresolved(f"the callback's host {host} does not resolve") from None
    addresses = [info[4][0] for info in infos]
    if not addresses or any(refused_address(address) for address in addresses):
        raise CallbackRefused(
            f"the callback's host {host} resolves to a loopback, private, link-local or metadata address"
        )
    return addresses[0]


async def pinned_request(url: str) -> tuple[str, dict[str, str], dict[str, str]]:
    """(URL on the checked address, extra headers, httpx extensions): the
    request keeps its Host header and TLS name but cannot be re-resolved."""
    parts = urlsplit(url)
    address = await resolve_allowed(url)
    host_in_url = f"[{address}]" if ":" in address else address
    netloc = host_in_url + (f":{parts.port}" if parts.port else "")
    pinned = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
    host_header = parts.hostname + (f":{parts.port}" if parts.port else "")
    extensions = {"sni_hostname": parts.hostname} if parts.scheme == "https" else {}
    return pinned, {"Host": host_header}, extensions
