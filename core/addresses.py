"""Which addresses are the host's own: loopback, private, link-local, shared,
reserved, multicast, a cloud's metadata service, and IPv6 that embeds any of
those. The webhook guard (jobs/webhooks.py) and the browser's
(browser/egress.py) refuse them."""

from __future__ import annotations

import ipaddress

# A cloud's metadata and credential services: refused by both guards, and
# never let through by the browser's BROWSER_ALLOW (browser/allowance.py).
METADATA_ADDRESSES = {
    ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack, Oracle
    ipaddress.ip_address("fd00:ec2::254"),  # AWS over IPv6
    ipaddress.ip_address("169.254.170.2"),  # AWS ECS, a task's credentials
    ipaddress.ip_address("169.254.170.23"),  # AWS EKS Pod Identity, a pod's credentials
    ipaddress.ip_address("fd00:ec2::23"),  # the same over IPv6
    ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
}


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


def judged(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The address a connection to `address` reaches, as the guards judge
    it: without an IPv6 zone, and the IPv4 address an IPv6 one embeds."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = embedded_ipv4(ip)
        if embedded is not None:
            return embedded
    return ip


def refused_address(address: str) -> bool:
    ip = judged(address)
    return ip in METADATA_ADDRESSES or not ip.is_global or ip.is_multicast


def metadata_address(address: str) -> bool:
    return judged(address) in METADATA_ADDRESSES


def bracketed(host: str) -> str:
    """A host as a URL writes it: an IPv6 address in brackets (`[::1]`)."""
    return f"[{host}]" if ":" in host else host


def authority(host: str, port: int) -> str:
    """`host:port` as a URL writes it: `[::1]:5202`, where `::1:5202` reads as one address."""
    return f"{bracketed(host)}:{port}"
