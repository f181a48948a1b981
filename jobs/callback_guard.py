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
import ipaddress
import socket
from urllib.parse import urlsplit, urlunsplit

METADATA_ADDRESSES = {
    ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack
    ipaddress.ip_address("fd00:ec2::254"),  # AWS over IPv6
    ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
}


class CallbackRefused(Exception):
    """The callback points into the host's own networks: never sent."""


class CallbackUnresolved(Exception):
    """The callback's host has no address now (perhaps only for now)."""


# IPv6 addresses that carry an IPv4 address a router or the host will reach:
# the guard judges them by that address (Python's ipaddress calls most of
# them global, whatever they embed).
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052, the well-known prefix
NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215, local use
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated, still routed by some stacks


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for: IPv4-mapped, 6to4
    (2002::/16), NAT64 (64:ff9b::/96, and 64:ff9b:1::/48 as RFC 6052 lays a
    /48 out) or IPv4-compatible (::/96); None for any other."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    value = int(ip)
    if ip in NAT64 or ip in IPV4_COMPATIBLE:
        return ipaddress.IPv4Address(value & 0xFFFFFFFF)
    if ip in NAT64_LOCAL:  # bits 48-63 and 72-87; bits 64-71 are the "u" octet
        return ipaddress.IPv4Address((((value >> 64) & 0xFFFF) << 16) | ((value >> 40) & 0xFFFF))
    return None


def refused_address(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = embedded_ipv4(ip)
        if embedded is not None:
            ip = embedded
    return ip in METADATA_ADDRESSES or not ip.is_global or ip.is_multicast


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
