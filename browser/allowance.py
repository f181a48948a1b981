"""BROWSER_ALLOW: the addresses and hosts the browser's egress guard lets
through although they are the host's own (browser/egress.py), such as an
intranet site one persona must use."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Allowance:
    """BROWSER_ALLOW: the exceptions an operator names, space-separated. A
    `host` (a name or an address, any port), a `host:port` (`[v6]:port` for
    IPv6), or a CIDR network (any port). A name is matched as the browser
    asked for it, whatever it resolves to; an address or a network is
    matched against the addresses a name resolves to."""

    names: frozenset[str] = frozenset()
    name_ports: frozenset[tuple[str, int]] = frozenset()
    networks: tuple[Network, ...] = ()
    address_ports: frozenset[tuple[Address, int]] = frozenset()

    @classmethod
    def parse(cls, text: str) -> Allowance:
        names, name_ports, networks, address_ports = set(), set(), [], set()
        for entry in text.split():
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            host, port = split_host_port(entry)
            if port is None:
                names.add(_name(host, entry))
                continue
            try:
                address_ports.add((ipaddress.ip_address(host), port))
            except ValueError:
                name_ports.add((_name(host, entry), port))
        return cls(frozenset(names), frozenset(name_ports), tuple(networks), frozenset(address_ports))

    def allows_name(self, host: str, port: int) -> bool:
        host = host.lower().rstrip(".")
        return host in self.names or (host, port) in self.name_ports

    def allows_address(self, address: str, port: int) -> bool:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        return (ip, port) in self.address_ports or any(ip in network for network in self.networks)


def split_host_port(entry: str) -> tuple[str, int | None]:
    """`host`, `host:port` or `[v6]:port` as (host, port or None); ValueError for a bad port."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        if not rest:
            return host, None
        if not rest.startswith(":"):
            raise ValueError(f"BROWSER_ALLOW: {entry!r} is not a host, host:port or CIDR network.")
        return host, _port(rest[1:], entry)
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        return host, _port(port, entry)
    return entry, None


def _port(text: str, entry: str) -> int:
    if not (text.isascii() and text.isdigit() and 0 < int(text) < 65536):
        raise ValueError(f"BROWSER_ALLOW: {entry!r} has no valid port (1-65535).")
    return int(text)


def _name(host: str, entry: str) -> str:
    name = host.lower().rstrip(".")
    if not name or not all(part and part.replace("-", "").replace("_", "").isalnum() and part.isascii()
                            for part in name.split(".")):
        raise ValueError(f"BROWSER_ALLOW: {entry!r} is not a host, host:port or CIDR network.")
    return name
