"""The persona's own proxy (PENELOPE_PROXY) behind the browser's egress
guard (browser/egress.py): an http or https proxy asked to CONNECT, or a
socks5 one, with the user name and password the URL gives."""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import struct
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from core.addresses import authority

HEAD_MAX_BYTES = 256 * 1024  # the proxy's answer's head at most
Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class Unreachable(Exception):
    """An allowed target could not be connected to; the message says why."""


@dataclass(frozen=True)
class Upstream:
    """The persona's own proxy (PENELOPE_PROXY), which the egress connects
    through once a target is allowed: asked for the checked address, never
    the name, so the proxy cannot resolve it to something else."""

    scheme: str
    host: str
    port: int
    username: str = ""
    password: str = field(default="", repr=False)

    SCHEMES = ("http", "https", "socks5")
    DEFAULT_PORTS = {"http": 80, "https": 443, "socks5": 1080}

    @classmethod
    def from_url(cls, url: str) -> Upstream | None:
        if not url:
            return None
        parts = urlsplit(url)
        if parts.scheme not in cls.SCHEMES or not parts.hostname:
            raise ValueError(
                "With BROWSER_REFUSE_PRIVATE on, PENELOPE_PROXY must look like "
                "http://, https:// or socks5://user:pass@host:port."
            )
        return cls(parts.scheme, parts.hostname, parts.port or cls.DEFAULT_PORTS[parts.scheme],
                   unquote(parts.username or ""), unquote(parts.password or ""))

    async def open(self, address: str, port: int) -> Stream:
        """A connection to `address:port` through the proxy."""
        stream = await asyncio.open_connection(
            self.host, self.port, ssl=self.scheme == "https" or None, limit=HEAD_MAX_BYTES,
        )
        try:
            if self.scheme == "socks5":
                await self._socks5(stream, address, port)
            else:
                await self._connect(stream, address, port)
        except BaseException:
            stream[1].close()
            raise
        return stream

    async def _connect(self, stream: Stream, address: str, port: int) -> None:
        reader, writer = stream
        target = authority(address, port)
        lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}"]
        if self.username or self.password:
            token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
            lines.append(f"Proxy-Authorization: Basic {token}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        status = status_of(await reader.readuntil(b"\r\n\r\n"))
        if not 200 <= status < 300:
            raise Unreachable(f"the persona's proxy answered {status} to CONNECT {target}")

    async def _socks5(self, stream: Stream, address: str, port: int) -> None:
        reader, writer = stream
        with_password = bool(self.username or self.password)
        writer.write(b"\x05\x02\x00\x02" if with_password else b"\x05\x01\x00")
        _version, method = await reader.readexactly(2)
        if method == 2 and with_password:
            user, password = self.username.encode(), self.password.encode()
            writer.write(bytes([1, len(user)]) + user + bytes([len(password)]) + password)
            if (await reader.readexactly(2))[1] != 0:
                raise Unreachable("the persona's socks5 proxy refused its user name and password")
        elif method != 0:
            raise Unreachable("the persona's socks5 proxy accepts none of the offered ways to sign in")
        ip = ipaddress.ip_address(address)
        kind = b"\x01" if ip.version == 4 else b"\x04"
        writer.write(b"\x05\x01\x00" + kind + ip.packed + struct.pack("!H", port))
        _version, reply, _reserved, bound = await reader.readexactly(4)
        if reply != 0:
            raise Unreachable(f"the persona's socks5 proxy could not reach {authority(address, port)} (reply {reply})")
        size = {1: 4, 4: 16}.get(bound)
        if size is None:  # the proxy answered with a name: its length first
            size = (await reader.readexactly(1))[0]
        await reader.readexactly(size + 2)  # the address the proxy bound, and its port


def status_of(raw: bytes) -> int:
    """The status of an HTTP answer's head, or 0."""
    try:
        return int(raw.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0
