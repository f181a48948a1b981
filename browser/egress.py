"""BROWSER_REFUSE_PRIVATE's one choke point: the browser's only way out.

With the guard on, Chromium is launched with this proxy as its proxy for
every scheme, loopback included (Playwright adds `<-loopback>` to the bypass
list, so even `localhost` and `*.localhost` come here). Every connection the
browser makes arrives as a CONNECT (https, ws, wss) or an absolute-form
request (plain http): navigations and each redirect hop, sub-resources,
WebSockets, dedicated, shared and service workers, prefetch and preconnect.
For each, the egress

1. resolves the name itself (a name that does not resolve is refused);
2. refuses it when any of its addresses is loopback, private, shared,
   link-local, reserved, multicast or a metadata service
   (`core.addresses.refused_address`), unless BROWSER_ALLOW names the host
   or the address;
3. connects to an address it checked, never resolving again, so a name whose
   answer changes between the check and the connect (DNS rebinding) reaches
   only what was checked; directly, or through the persona's own proxy
   (PENELOPE_PROXY: http, https or socks5), asked for the checked address.

A refused plain-http request is answered `403` with a sentence naming the
address (and `Access-Control-Allow-Origin: *`, so a page's script can read
why); a refused CONNECT is answered `403` too, which Chromium shows as
`net::ERR_TUNNEL_CONNECTION_FAILED` (it never shows a proxy's body for a
tunnel). Either way the refusal is kept by target (`sentence_for`), so the
browser can tell the call in hand why its page was refused, and reported to
`on_refused` (the request log).

The proxy runs on an event loop of its own, in a thread of its own: bytes
copied for the browser never wait behind the API's requests, nor the other
way round. It listens on 127.0.0.1 on a port the system picks.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import ipaddress
import logging
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from core.addresses import refused_address

log = logging.getLogger("penelope.browser")

HEAD_MAX_BYTES = 256 * 1024  # a request's or response's head; past it the connection is dropped
HEAD_TIMEOUT_S = 60.0  # for a request's head on a new connection (Chromium opens some ahead of need)
CONNECT_TIMEOUT_S = 30.0  # for each address, and for the persona's proxy to answer
RESOLVED_FOR_S = 30.0  # a name's addresses are looked up again after this long
RESOLVED_KEPT = 1000
REFUSALS_KEPT = 256  # the latest refusals, by target, for the calls to say why
COPY_CHUNK = 256 * 1024
# Headers that concern one hop, not the request: never passed on.
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate", "te", "upgrade",
})
NO_BODY_STATUSES = frozenset({204, 304})

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class Refused(Exception):
    """The guard refuses a target; the message says why, naming the address."""


class Unreachable(Exception):
    """An allowed target could not be connected to; the message says why."""


# --- BROWSER_ALLOW -----------------------------------------------------------------


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
            host, port = _split_host_port(entry)
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


def _split_host_port(entry: str) -> tuple[str, int | None]:
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


# --- the persona's proxy, chained ---------------------------------------------------


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
        authority = _authority(address, port)
        lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
        if self.username or self.password:
            token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
            lines.append(f"Proxy-Authorization: Basic {token}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        status = _status_of(await reader.readuntil(b"\r\n\r\n"))
        if not 200 <= status < 300:
            raise Unreachable(f"the persona's proxy answered {status} to CONNECT {authority}")

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
            raise Unreachable(f"the persona's socks5 proxy could not reach {_authority(address, port)} (reply {reply})")
        size = {1: 4, 4: 16}.get(bound)
        if size is None:  # the proxy answered with a name: its length first
            size = (await reader.readexactly(1))[0]
        await reader.readexactly(size + 2)  # the address the proxy bound, and its port


# --- the proxy ----------------------------------------------------------------------


@dataclass
class Head:
    """A request's first line and headers, as the browser sent them."""

    method: str
    target: str
    headers: list[tuple[str, str]]

    @classmethod
    def parse(cls, raw: bytes) -> Head:
        lines = raw.decode("latin-1").split("\r\n")
        method, target, _version = lines[0].split(" ", 2)
        headers = []
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers.append((name.strip(), value.strip()))
        return cls(method, target, headers)


class Egress:
    """The browser's proxy; `start()` answers its port."""

    def __init__(
        self,
        allowance: Allowance,
        upstream: Upstream | None = None,
        on_refused: Callable[[str, str, str], object] | None = None,
    ) -> None:
        self.allowance = allowance
        self.upstream = upstream
        # (method, target, sentence), called on the egress's thread.
        self.on_refused = on_refused
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._resolved: dict[str, tuple[float, list[str]]] = {}
        # (host, port) -> why, newest last. Written on the egress's thread,
        # read on the worker's: single dict operations, atomic under the GIL.
        self._refusals: collections.OrderedDict[tuple[str, int], str] = collections.OrderedDict()

    @property
    def server(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> int:
        if self._thread is not None:
            return self.port
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="penelope-egress", daemon=True)
        self._thread.start()
        starting = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0, limit=HEAD_MAX_BYTES), loop,
        )
        self._server = starting.result(timeout=10)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("the browser's egress guard listens on 127.0.0.1:%d", self.port)
        return self.port

    def close(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._loop = self._thread = None

        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()

    # --- what the browser's calls ask -----------------------------------------------

    def sentence_for(self, url: str) -> str | None:
        """Why the egress refused `url`'s host and port lately, as the call
        answers it; None when it did not."""
        parts = urlsplit(url)
        if not parts.hostname:
            return None
        try:
            port = parts.port or (443 if parts.scheme in ("https", "wss") else 80)
        except ValueError:
            return None
        why = self._refusals.get((parts.hostname, port))
        return None if why is None else sentence(parts.scheme, parts.hostname, parts.port, why)

    # --- one connection from the browser ------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
                head = Head.parse(raw)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError, ConnectionError):
                return
            if head.method == "CONNECT":
                await self._tunnel(head, reader, writer)
            else:
                await self._forward(head, reader, writer)
        except (ConnectionError, OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _tunnel(self, head: Head, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """https, ws and wss: a tunnel to the checked address."""
        host, port = _split_host_port(head.target)
        if port is None:
            await _answer(writer, 400, "CONNECT needs host:port.")
            return
        try:
            upstream = await self._open(host, port)
        except Refused as refused:
            self._refused("CONNECT", host, port, f"{_authority(host, port)}", str(refused))
            await _answer(writer, 403, sentence("https", host, port, str(refused)))
            return
        except Unreachable as error:
            await _answer(writer, 502, str(error))
            return
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await _both_ways((reader, writer), upstream)

    async def _forward(self, head: Head, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Plain http: one request a connection, passed on in origin form."""
        parts = urlsplit(head.target)
        if parts.scheme != "http" or not parts.hostname:
            await _answer(writer, 400, "The egress guard passes on absolute http:// requests and CONNECT only.")
            return
        port = parts.port or 80
        try:
            upstream = await self._open(parts.hostname, port)
        except Refused as refused:
            said = sentence("http", parts.hostname, parts.port, str(refused))
            self._refused(head.method, parts.hostname, port, head.target.split("?", 1)[0], str(refused))
            await _answer(writer, 403, said)
            return
        except Unreachable as error:
            await _answer(writer, 502, str(error))
            return
        up_reader, up_writer = upstream
        try:
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            headers = [(name, value) for name, value in head.headers if name.lower() not in HOP_BY_HOP]
            up_writer.write(_head_bytes(f"{head.method} {path} HTTP/1.1", [*headers, ("Connection", "close")]))
            body = asyncio.ensure_future(_copy(reader, up_writer))
            try:
                await self._respond(head.method, up_reader, writer)
            finally:
                body.cancel()
        finally:
            up_writer.close()

    async def _respond(self, method: str, up_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """The answer, its head marked `Connection: close` (so the browser
        sends its next request on a new connection, checked anew), its body
        passed on as it comes."""
        while True:
            raw = await up_reader.readuntil(b"\r\n\r\n")
            status = _status_of(raw)
            if 100 <= status < 200 and status != 101:  # 100 Continue, 103 Early Hints: passed on as they are
                writer.write(raw)
                continue
            break
        lines = raw.decode("latin-1").split("\r\n")
        headers = []
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                if name.strip().lower() not in HOP_BY_HOP:
                    headers.append((name.strip(), value.strip()))
        writer.write(_head_bytes(lines[0], [*headers, ("Connection", "close")]))
        if method == "HEAD" or status in NO_BODY_STATUSES:
            await writer.drain()
            return
        length = next((value for name, value in headers if name.lower() == "content-length"), None)
        chunked = any(name.lower() == "transfer-encoding" for name, _ in headers)
        limit = int(length) if length is not None and length.isdigit() and not chunked else None
        await _copy(up_reader, writer, limit)

    # --- the check, and the connection to what was checked ---------------------------------

    async def _open(self, host: str, port: int) -> Stream:
        """A connection to an allowed address of `host`, or Refused."""
        host = host.lower().rstrip(".")
        addresses = await self._addresses(host, port)
        why = self.refusal(host, port, addresses)
        if why is not None:
            raise Refused(why)
        last: BaseException | None = None
        for address in addresses:
            try:
                if self.upstream is not None:
                    return await asyncio.wait_for(self.upstream.open(address, port), CONNECT_TIMEOUT_S)
                return await asyncio.wait_for(
                    asyncio.open_connection(address, port, limit=HEAD_MAX_BYTES), CONNECT_TIMEOUT_S,
                )
            except (OSError, TimeoutError, Unreachable, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as error:
                last = error
        reason = str(last) if isinstance(last, Unreachable) else f"{type(last).__name__}: {last}"
        raise Unreachable(f"{_authority(host, port)} could not be reached: {reason}")

    def refusal(self, host: str, port: int, addresses: list[str]) -> str | None:
        """Why a connection to `host:port` at `addresses` is refused, or None."""
        if self.allowance.allows_name(host, port):
            return None
        if not addresses:
            return f"{host} does not resolve"
        for address in addresses:
            if refused_address(address) and not self.allowance.allows_address(address, port):
                shown = host if _same_address(host, address) else f"{host} ({address})"
                return f"{shown} is a loopback, private, link-local or metadata address"
        return None

    async def _addresses(self, host: str, port: int) -> list[str]:
        try:
            return [str(ipaddress.ip_address(host.split("%", 1)[0]))]
        except ValueError:
            pass
        now = time.monotonic()
        cached = self._resolved.get(host)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
            found = list(dict.fromkeys(info[4][0] for info in infos))  # the resolver's order, once each
        except (OSError, UnicodeError):
            found = []
        if len(self._resolved) >= RESOLVED_KEPT:
            self._resolved.clear()
        self._resolved[host] = (now + RESOLVED_FOR_S, found)
        return found

    def _refused(self, method: str, host: str, port: int, target: str, why: str) -> None:
        self._refusals[(host, port)] = why
        self._refusals.move_to_end((host, port))
        while len(self._refusals) > REFUSALS_KEPT:
            self._refusals.popitem(last=False)
        log.info("the browser's egress refused %s %s: %s", method, target[:200], why)
        if self.on_refused is not None:
            try:
                self.on_refused(method, target, why)
            except Exception:
                log.exception("recording a refusal of the egress guard failed")


def sentence(scheme: str, host: str, port: int | None, why: str) -> str:
    """A refusal as the browser's answers and the calls say it."""
    return f"The browser refused {scheme}://{host}{f':{port}' if port else ''}: {why} (BROWSER_REFUSE_PRIVATE)."


def _same_address(host: str, address: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]) == ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False


def _authority(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _status_of(raw: bytes) -> int:
    try:
        return int(raw.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0


def _head_bytes(first_line: str, headers: list[tuple[str, str]]) -> bytes:
    return (first_line + "\r\n" + "".join(f"{name}: {value}\r\n" for name, value in headers) + "\r\n").encode("latin-1")


async def _answer(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = text.encode()
    writer.write(_head_bytes(f"HTTP/1.1 {status} {reason}", [
        ("Content-Type", "text/plain; charset=utf-8"),
        ("Content-Length", str(len(body))),
        ("Access-Control-Allow-Origin", "*"),
        ("X-Penelope-Refused", "1" if status == 403 else "0"),
        ("Connection", "close"),
    ]) + body)
    await writer.drain()


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, limit: int | None = None) -> None:
    """Bytes from `reader` to `writer` until its end (or `limit` bytes)."""
    left = limit
    while left is None or left > 0:
        data = await reader.read(COPY_CHUNK if left is None else min(COPY_CHUNK, left))
        if not data:
            return
        writer.write(data)
        await writer.drain()
        if left is not None:
            left -= len(data)


async def _both_ways(one: Stream, other: Stream) -> None:
    """A tunnel: each side's bytes to the other, until either side ends."""
    (one_reader, one_writer), (other_reader, other_writer) = one, other
    forth = asyncio.ensure_future(_copy(one_reader, other_writer))
    back = asyncio.ensure_future(_copy(other_reader, one_writer))
    try:
        await asyncio.wait([forth, back], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (forth, back):
            task.cancel()
        await asyncio.gather(forth, back, return_exceptions=True)
        other_writer.close()
