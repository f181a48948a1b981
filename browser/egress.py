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
   on this port, or the address (browser/allowance.py); and refuses a
   metadata address, and the worker's own port (`WorkerPort`), whatever
   BROWSER_ALLOW says;
3. connects to an address it checked, never resolving again, so a name whose
   answer changes between the check and the connect (DNS rebinding) reaches
   only what was checked; directly, or through the persona's own proxy
   (PENELOPE_PROXY: http, https or socks5), asked for the checked address.
   For a name BROWSER_ALLOW names, the check is the port, the metadata
   addresses and the worker's port only: a new answer for it moves it to
   another address, on the entry's ports (80 and 443 when it names none).

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
import collections
import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from browser.allowance import Allowance, WorkerPort, split_host_port
from browser.http1 import UNTIL_CLOSE, Head, answer, copy, copy_body, encode
from browser.upstream import HEAD_MAX_BYTES, Stream, Unreachable, Upstream
from core.addresses import authority, bracketed, metadata_address, refused_address

log = logging.getLogger("penelope.browser")

HEAD_TIMEOUT_S = 60.0  # for a request's head on a new connection (Chromium opens some ahead of need)
CONNECT_TIMEOUT_S = 30.0  # for each address, and for the persona's proxy to answer
RESOLVED_FOR_S = 30.0  # a name's addresses are looked up again after this long
RESOLVED_KEPT = 1000
REFUSALS_KEPT = 256  # the latest refusals, by target, for the calls to say why
# A plain-http exchange in which nothing moves for this long is dropped: the
# egress does not read the browser's side while it waits for the site, so a
# browser that gave up is only noticed this way.
IDLE_S = 300.0
RESOLVE_TIMEOUT_S = 10.0  # a name's lookup, on the loop's resolver threads


class TargetBlocked(Exception):
    """The guard refuses a target; the message says why, naming the address.
    Only the proxy's own signal: the browser gets its 403 from the proxy,
    and a call learns of it as a `NavigationRefused`."""


class Egress:
    """The browser's proxy; `start()` answers its port."""

    def __init__(
        self,
        allowance: Allowance,
        upstream: Upstream | None = None,
        on_refused: Callable[[str, str, str], object] | None = None,
        idle_s: float = IDLE_S,
        worker: WorkerPort | None = None,
    ) -> None:
        self.allowance = allowance
        # The worker's own port, refused whatever BROWSER_ALLOW says (None: a
        # test's egress with no worker behind it).
        self.worker = worker
        self.idle_s = idle_s
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
        except (ConnectionError, OSError, ValueError, IndexError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # a browser gone, a site that stalled (TimeoutError), a head that is no HTTP
        finally:
            writer.close()

    async def _tunnel(self, head: Head, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """https, ws and wss: a tunnel to the checked address."""
        host, port = split_host_port(head.target)
        if port is None:
            await answer(writer, 400, "CONNECT needs host:port.")
            return
        try:
            upstream = await self._open(host, port)
        except TargetBlocked as refused:
            self._refused("CONNECT", host, port, f"{authority(host, port)}", str(refused))
            await answer(writer, 403, sentence("https", host, port, str(refused)))
            return
        except Unreachable as error:
            await answer(writer, 502, str(error))
            return
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await _both_ways((reader, writer), upstream)

    async def _forward(self, head: Head, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Plain http: each request on the browser's connection checked and
        passed on in origin form to an address checked for its host. The
        connection to that address is kept for the next request while it
        names the same host and port, and closed as soon as one names another."""
        upstream: Stream | None = None
        reached: tuple[str, int] | None = None
        try:
            while True:
                parts = urlsplit(head.target)
                if parts.scheme != "http" or not parts.hostname:
                    await answer(writer, 400, "The egress guard passes on absolute http:// requests and CONNECT only.")
                    return
                port = parts.port or 80
                if (parts.hostname, port) != reached:
                    if upstream is not None:
                        upstream[1].close()
                        upstream = reached = None
                    try:
                        upstream = await self._open(parts.hostname, port)
                    except TargetBlocked as refused:
                        self._refused(head.method, parts.hostname, port, head.target.split("?", 1)[0], str(refused))
                        await answer(writer, 403, sentence("http", parts.hostname, parts.port, str(refused)))
                        return
                    except Unreachable as error:
                        await answer(writer, 502, str(error))
                        return
                    reached = (parts.hostname, port)
                up_reader, up_writer = upstream
                path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
                up_writer.write(encode(f"{head.method} {path} HTTP/1.1", head.end_to_end()))
                await copy_body(reader, up_writer, head.body_framing(), self.idle_s)
                if not await self._respond(head.method, up_reader, writer) or head.wants_close():
                    return
                head = Head.parse(await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S))
                if head.method == "CONNECT":  # a tunnel on a connection of plain http: not Chromium's way
                    return
        finally:
            if upstream is not None:
                upstream[1].close()

    async def _respond(self, method: str, up_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """The answer passed on as it comes, without the headers of one hop;
        whether the connections may carry another request."""
        while True:
            answered = Head.parse(await asyncio.wait_for(up_reader.readuntil(b"\r\n\r\n"), self.idle_s))
            if not (100 <= answered.status < 200 and answered.status != 101):
                break
            writer.write(encode(answered.first_line, answered.headers))  # 100 Continue, 103 Early Hints
        framing = answered.body_framing(method)
        closing = answered.wants_close() or framing == UNTIL_CLOSE
        writer.write(encode(answered.first_line, answered.end_to_end() + ([("Connection", "close")] if closing else [])))
        await copy_body(up_reader, writer, framing, self.idle_s)
        return not closing

    # --- the check, and the connection to what was checked ---------------------------------

    async def _open(self, host: str, port: int) -> Stream:
        """A connection to an allowed address of `host`, or TargetBlocked."""
        host = host.lower().rstrip(".")
        addresses = await self._addresses(host, port)
        why = self.refusal(host, port, addresses)
        if why is not None:
            raise TargetBlocked(why)
        if not addresses:  # an allowed name that does not resolve
            raise Unreachable(f"{authority(host, port)} could not be reached: {host} does not resolve")
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
        raise Unreachable(f"{authority(host, port)} could not be reached: {reason}")

    def refusal(self, host: str, port: int, addresses: list[str]) -> str | None:
        """Why a connection to `host:port` at `addresses` is refused, or None.

        Each address is judged with the port: a name BROWSER_ALLOW allows on
        this port lets its addresses through, whatever they are, except a
        metadata address and the worker's own port, which nothing lets
        through. The egress connects to one of these addresses only."""
        named = self.allowance.allows_name(host, port)
        if not addresses:
            return None if named else f"{host} does not resolve"  # an allowed name: unreachable (502), not refused
        for address in addresses:
            shown = host if _same_address(host, address) else f"{host} ({address})"
            allowed = named or self.allowance.allows_address(address, port)
            if refused_address(address) and not allowed:
                return f"{shown} is a loopback, private, link-local or metadata address"
            if metadata_address(address):
                return f"{shown} is a cloud metadata address, which BROWSER_ALLOW never allows"
            if self.worker is not None and self.worker.covers(address, port):
                return f"{shown} port {port} is the worker's own, which BROWSER_ALLOW never allows"
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
            resolving = asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
            infos = await asyncio.wait_for(resolving, RESOLVE_TIMEOUT_S)
            found = list(dict.fromkeys(info[4][0] for info in infos))  # the resolver's order, once each
        except (OSError, UnicodeError):  # TimeoutError is an OSError: a name that does not answer does not resolve
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
    """A refusal as the browser's answers and the calls say it: the URL as a
    URL writes it, an IPv6 address in brackets (`http://[::1]:5202`)."""
    return f"The browser refused {scheme}://{bracketed(host)}{f':{port}' if port else ''}: {why} (BROWSER_REFUSE_PRIVATE)."


def _same_address(host: str, address: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]) == ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False


async def _both_ways(one: Stream, other: Stream) -> None:
    """A tunnel: each side's bytes to the other, until either side ends."""
    (one_reader, one_writer), (other_reader, other_writer) = one, other
    forth = asyncio.ensure_future(copy(one_reader, other_writer))
    back = asyncio.ensure_future(copy(other_reader, one_writer))
    try:
        await asyncio.wait([forth, back], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (forth, back):
            task.cancel()
        await asyncio.gather(forth, back, return_exceptions=True)
        other_writer.close()
