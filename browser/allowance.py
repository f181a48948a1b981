"""BROWSER_ALLOW: the addresses and hosts the browser's egress guard lets
through although they are the host's own (browser/egress.py), such as an
intranet site one persona must use; and what no entry lets through: a
cloud's metadata service and the worker's own port."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from core.addresses import judged, metadata_address, refused_address

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# The ports a name entry without one allows: http and ws, https and wss.
NAME_PORTS = (80, 443)
# Hosts a server listens on that stand for every address of the host.
WILDCARD_HOSTS = {"", "0.0.0.0", "::"}


@dataclass(frozen=True)
class Allowance:
    """BROWSER_ALLOW: the exceptions an operator names, space-separated.

    - A name (`intranet.corp`, ports 80 and 443) or `name:port` (that port
      only), matched as the browser asked for it: it allows whatever the
      name resolves to at each connection, on its ports only. Whoever
      answers for the name chooses the address.
    - An address or a CIDR network (any port), or `address:port`
      (`[v6]:port` for IPv6): matched against the address connected to.

    None of them opens a metadata address or the worker's own port
    (`WorkerPort`): the egress refuses those first. An entry that names a
    metadata address by itself is refused here, naming it."""

    name_ports: frozenset[tuple[str, int]] = frozenset()
    networks: tuple[Network, ...] = ()
    address_ports: frozenset[tuple[Address, int]] = frozenset()

    @classmethod
    def parse(cls, text: str) -> Allowance:
        name_ports, networks, address_ports = set(), [], set()
        for entry in text.split():
            try:
                network = ipaddress.ip_network(entry, strict=False)
            except ValueError:
                network = None
            if network is not None:
                if network.num_addresses == 1:
                    _not_metadata(str(network.network_address), entry)
                networks.append(network)
                continue
            host, port = split_host_port(entry)
            try:
                address = ipaddress.ip_address(host)
            except ValueError:
                name = _name(host, entry)
                name_ports.update((name, allowed) for allowed in ((port,) if port is not None else NAME_PORTS))
                continue
            if port is None:  # `[::1]`: an address in brackets needs its port
                raise ValueError(f"BROWSER_ALLOW: {entry!r} is not a host, host:port or CIDR network.")
            _not_metadata(host, entry)
            address_ports.add((address, port))
        return cls(frozenset(name_ports), tuple(networks), frozenset(address_ports))

    def allows_name(self, host: str, port: int) -> bool:
        return (host.lower().rstrip("."), port) in self.name_ports

    def allows_address(self, address: str, port: int) -> bool:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        return (ip, port) in self.address_ports or any(ip in network for network in self.networks)


@dataclass(frozen=True)
class WorkerPort:
    """The worker's own port (PENELOPE_PORT), which no BROWSER_ALLOW entry
    opens. It is refused on every loopback address, on the unspecified ones
    (a connection to 0.0.0.0 or :: reaches the host itself) and on the
    address the worker listens on (PENELOPE_HOST). A worker that listens on
    every address (0.0.0.0, ::), or on a name, is reached at each address
    of the host's own networks, which the guard cannot list: its port is
    then refused on every address that is not global."""

    port: int
    # The address the worker listens on; None for every address.
    address: Address | None = None

    @classmethod
    def of(cls, host: str, port: int) -> WorkerPort:
        if host.strip("[]") in WILDCARD_HOSTS:
            return cls(port)
        try:
            return cls(port, judged(host.strip("[]")))
        except ValueError:
            return cls(port)  # a name: judged as widely as a wildcard, never looked up

    def covers(self, address: str, port: int) -> bool:
        """Whether a connection to `address:port` reaches the worker's port."""
        if port != self.port:
            return False
        raw, ip = ipaddress.ip_address(address.split("%", 1)[0]), judged(address)
        if any(each.is_loopback or each.is_unspecified for each in (raw, ip)):
            return True
        return refused_address(address) if self.address is None else ip == self.address


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
    if not name or not all(
        part and part.replace("-", "").replace("_", "").isalnum() and part.isascii() for part in name.split(".")
    ):
        raise ValueError(f"BROWSER_ALLOW: {entry!r} is not a host, host:port or CIDR network.")
    return name


def _not_metadata(address: str, entry: str) -> None:
    if metadata_address(address):
        raise ValueError(
            f"BROWSER_ALLOW: {entry!r} is a cloud metadata address, which the browser's guard always refuses."
        )
