"""`/w/{persona}/...`: wake the persona's worker and pass the request
through. HTTP under `api/v1/` (with one of the persona's keys; health never
wakes, nor does a read key, whose requests do not count as forwards in
flight either), `GET`/`HEAD` under `live/` (no key: the live view's token is its
credential) and the worker's admin under `admin/` with its `static/` files
(no key: the admin signs in its own users; never woken, waker/admin_forward.py),
the answer streamed back with its status and headers (a cookie's Path moved
under `/w/{persona}/`). A
WebSocket at `api/v1/events` (with a key), `live/<token>/ws` or
`cdp/<token>` (no key: the token is the credential) is opened to the worker
first, then accepted, then relayed (waker/socket_relay.py).

A plain ASGI application in front of Django's (which serves the waker's own
API), because a proxy must hold its count of requests in flight exactly as
long as the exchange lasts, and notice a client that goes away: Django's
handler offers neither for a response that has not started streaming yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import unquote

import httpx

from core.api import status_of
from core.wrong_keys import KeyFlood, scope_address
from waker import admin_forward, socket_relay
from waker.api import WORKER_KEY_REQUIRED, any_key_matches
from waker.asgi_parts import Receive, Responder, Scope, Send, WakerRefusal, read_body, send_error, until_disconnected
from waker.persona_worker import RUNNING, PersonaWorker
from waker.process import StartFailed
from waker.socket_relay import loggable, masked
from waker.supervisor import Supervisor

log = logging.getLogger("penelope.waker")

PREFIX = "/w/"
API_PREFIX = "/api/v1/"
HEALTH_PATH = "/api/v1/health"
EVENTS_PATH = "/api/v1/events"
LIVE_PREFIX = "/live/"
LIVE_SOCKET = re.compile(r"/live/[^/]+/ws")
LIVE_METHODS = ("GET", "HEAD")
# A CDP client's socket (cdp/sockets.py), its token the credential; no HTTP there.
CDP_SOCKET = re.compile(r"/cdp/[^/]+")
# Headers of one hop, not of the exchange (RFC 9110, 7.6.1).
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
# httpx sets these for the next hop from the URL and the body it sends; and
# the body is already read, so an `Expect: 100-continue` was answered here.
NOT_FORWARDED = HOP_BY_HOP | {b"host", b"content-length", b"expect"}
# And for a socket, the handshake's own headers, which websockets writes anew.
SOCKET_NOT_FORWARDED = NOT_FORWARDED | socket_relay.HANDSHAKE_HEADERS
# A forwarded call may run for minutes; the worker's own time limits bound it.
FORWARD_TIMEOUT = httpx.Timeout(5.0, read=None, write=None, pool=None)


@dataclass(frozen=True)
class Route:
    """Where a request under `/w/` goes: the persona's worker and the path
    there, as the client encoded it; `by_token` for the paths whose token is
    the credential (the live view's, a CDP socket), which need no key."""

    worker: PersonaWorker
    target: bytes
    by_token: bool
    # A CDP client's socket: its messages may be far larger than the live view's frames.
    cdp: bool = False
    # A read key's request (PENELOPE_READ_KEYS): it neither wakes the worker
    # nor counts as a forward in flight, so a dashboard that polls through
    # the waker never keeps a sleepy worker awake.
    reads_only: bool = False
    # The worker's admin or its static files (waker/admin_forward.py): no key,
    # never woken, a forward in flight (what is activity is the worker's to say).
    admin: bool = False
    # An admin page's: `/w/{persona}`, the root path the worker is to write into its URLs.
    root_path: str = ""

    def url(self, scope: Scope) -> str:
        url = self.worker.persona.base_url + self.root_path + self.target.decode("latin-1")
        if scope["type"] == "websocket":
            url = "ws" + url.removeprefix("http")  # https, were it so, becomes wss
        if scope.get("query_string"):
            url += "?" + scope["query_string"].decode("latin-1")
        return url


def read_key_never_wakes(name: str, state: str) -> str:
    return (
        f"Persona {name}'s worker is {state}. A read key never wakes a worker: a request through /w/{name}/ with "
        f"the persona's full key does, as does POST /api/v1/personas/{name}/start."
    )


async def wake(worker: PersonaWorker) -> None:
    """Start the worker unless it runs, for a request or a socket; WakerRefusal (503) when it did not start."""
    try:
        await worker.ensure_running()
    except StartFailed as error:
        raise WakerRefusal(503, f"Persona {worker.persona.name}'s worker did not start: {error.message}") from None


class WakerApplication:
    """`/w/...` to the persona's worker; everything else to the waker's own API."""

    def __init__(self, api: Callable[[Scope, Receive, Send], Awaitable[None]], supervisor: Supervisor):
        self.api = api
        self.supervisor = supervisor

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self.socket(scope, receive, send)  # the waker's own API has none
        elif scope["type"] == "http" and scope["path"].startswith(PREFIX):
            await self.forward(scope, receive, send)
        else:
            await self.api(scope, receive, send)

    def route(self, scope: Scope) -> Route:
        """The route of a request or socket under `/w/`, its key checked unless
        it is live's or the admin's; WakerRefusal, before anything is woken, when it has none."""
        name_raw, target = _split(scope.get("raw_path") or scope["path"].encode())
        name = unquote(name_raw.decode("latin-1"))
        worker = self.supervisor.get(name)
        if worker is None:
            raise WakerRefusal(404, f"No persona {name[:64]}.")
        path = unquote(target.decode("latin-1"))
        socket = scope["type"] == "websocket"
        live = path.startswith(LIVE_PREFIX)
        cdp = socket and CDP_SOCKET.fullmatch(path) is not None
        admin = not socket and admin_forward.is_admin_path(path)
        # No dot segments: the client's HTTP library would resolve them, and
        # `api/v1/../../demo/` would leave the worker's API (and `admin/..` its admin).
        if {".", ".."} & set(path.split("/")) or not (
            (LIVE_SOCKET.fullmatch(path) or cdp or path == EVENTS_PATH)
            if socket
            else (live or admin or path.startswith(API_PREFIX))
        ):
            raise WakerRefusal(
                404,
                f"No route {scope['path'][:200]}: the waker forwards /w/{name}/api/v1/..., /w/{name}/live/... and "
                f"/w/{name}/admin/... with its /w/{name}/static/... (and sockets at /w/{name}/cdp/<token>) only.",
            )
        if admin:
            admin_forward.check(worker, scope["method"], path)  # no key, so never woken: Asleep (503)
            return Route(worker, target, by_token=False, admin=True, root_path=admin_forward.root_path(PREFIX + name, path))
        if live or cdp:
            # The token in the path is the credential: no key to check. Nor
            # is one woken for it: live links and CDP tokens live in the
            # worker's memory, so a stopped worker holds none, and a keyless
            # request that started it could only ever be refused.
            if not socket and scope["method"] not in LIVE_METHODS:
                raise WakerRefusal(
                    405, f"Method {scope['method']} is not allowed here; use GET or HEAD.", allow="GET, HEAD"
                )
            if worker.state != RUNNING:
                raise WakerRefusal(404, "Not found.")
        elif path == HEALTH_PATH:
            # Health needs no key, so it never wakes a worker.
            if worker.state != RUNNING:
                raise WakerRefusal(
                    503,
                    f"Persona {name}'s worker is {worker.state}. Health never wakes a worker: any other request "
                    f"through /w/{name}/ with its key does, as does POST /api/v1/personas/{name}/start.",
                )
        elif not self.key_accepted(scope, worker):
            # Checked here too, so a client without a key cannot wake a worker;
            # what a read key may do is the worker's to say.
            raise WakerRefusal(401, WORKER_KEY_REQUIRED, realm="penelope")
        elif not any_key_matches(
            dict(scope["headers"]).get(b"authorization", b"").decode("latin-1"), worker.persona.key.split()
        ):
            if worker.state != RUNNING:
                raise WakerRefusal(503, read_key_never_wakes(name, worker.state))
            return Route(worker, target, by_token=False, reads_only=True)
        return Route(worker, target, by_token=live or cdp, cdp=cdp)

    async def forward(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The body is read first: daphne holds it whole anyway, and once it is
        # read the only message left to receive is the client's disconnect.
        body = await read_body(receive)
        if body is None:
            return
        try:
            route = self.route(scope)
        except WakerRefusal as refused:
            await refused.answer(send)
            return
        responder = Responder(send)
        exchange = asyncio.ensure_future(self._exchange(route, scope, body, responder))
        gone = asyncio.ensure_future(until_disconnected(receive))
        try:
            await asyncio.wait({exchange, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            # A client gone mid-way cancels the exchange: the wait for a start,
            # or the request to the worker (which then logs it as 499).
            for task in (exchange, gone):
                task.cancel()
            await asyncio.gather(exchange, gone, return_exceptions=True)
        if exchange.done() and not exchange.cancelled() and exchange.exception() is not None:
            log.error("forwarding %s %s failed", scope["method"], loggable(scope["path"]), exc_info=exchange.exception())
            await responder.finish_after_error()

    async def _exchange(self, route: Route, scope: Scope, body: bytes, send: Responder) -> None:
        worker, url = route.worker, route.url(scope)
        name = worker.persona.name
        try:
            if route.admin:  # stopped since its route was found: still not woken
                admin_forward.refuse_unless_running(worker)
            elif not route.reads_only:
                await wake(worker)
            elif worker.state != RUNNING:  # stopped since its route was found
                raise WakerRefusal(503, read_key_never_wakes(name, worker.state))
        except WakerRefusal as refused:
            await refused.answer(send)
            return
        headers = [(key, value) for key, value in scope["headers"] if key not in NOT_FORWARDED]
        if route.admin:
            headers = admin_forward.request_headers(headers, scope["headers"], route.root_path)
        http = self.supervisor.http
        with worker.forwarding() if not route.reads_only else contextlib.nullcontext():
            request = http.build_request(scope["method"], url, headers=headers, content=body, timeout=FORWARD_TIMEOUT)
            try:
                upstream = await http.send(request, stream=True)
            except httpx.HTTPError as error:
                log.warning("persona %s: forwarding %s %s failed: %r", name, scope["method"], loggable(scope["path"]), error)
                await send_error(send, 502, f"Persona {name}'s worker did not answer: {error.__class__.__name__}.")
                return
            try:
                await send(
                    {
                        "type": "http.response.start",
                        "status": upstream.status_code,
                        # A cookie set through /w/{name}/ stays there: no other persona's (nor the console's).
                        "headers": admin_forward.cookies_under(
                            [(key.lower(), value) for key, value in upstream.headers.raw if key.lower() not in HOP_BY_HOP],
                            PREFIX + name,
                        ),
                    }
                )
                try:
                    async for chunk in upstream.aiter_raw():
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                except httpx.HTTPError as error:
                    # Too late for a status: the answer ends short of the
                    # Content-Length every worker answer carries, which is how
                    # the client can tell.
                    log.warning(
                        "persona %s: the worker's answer to %s %s broke off: %r",
                        name,
                        scope["method"],
                        loggable(scope["path"]),
                        error,
                    )
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            finally:
                await upstream.aclose()

    async def socket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Open the socket to the worker (woken first, unless its token is its
        credential), and only then accept the client's and relay; a refusal
        closes it before accept, which daphne answers 403 whatever the reason
        (the worker's own refusal of a CDP token included). An open live or
        CDP socket counts as a request in flight, so an open live view or CDP
        client keeps its worker awake (the worker counts its CDP connection
        too, cdp/sockets.py); an event socket does not, as it is not client
        activity on the worker (jobs/sockets.py)."""
        if (await receive())["type"] != "websocket.connect":
            return
        try:
            if not scope["path"].startswith(PREFIX):
                raise WakerRefusal(404, f"No socket at {scope['path'][:200]}.")
            route = self.route(scope)
        except WakerRefusal as refused:
            log.info("socket %s refused: %s", loggable(scope["path"]), masked(refused.message))
            await refused.taken()
            await send({"type": "websocket.close"})
            return
        with route.worker.forwarding() if route.by_token else contextlib.nullcontext():
            upstream = await self._open_socket(route, scope, receive)
            if upstream is None:
                await send({"type": "websocket.close"})  # dropped by daphne when the client is gone already
                return
            await send({"type": "websocket.accept", "subprotocol": upstream.subprotocol})
            await socket_relay.relay(upstream, receive, send)

    async def _open_socket(self, route: Route, scope: Scope, receive: Receive) -> socket_relay.ClientConnection | None:
        """The worker's socket, or None when it was refused or the client went
        away first (which abandons the open, not the start others wait for).
        Daphne refuses a handshake still waiting after 20 s
        (`websocket_connect_timeout`), which bounds the wait for a start."""
        headers = [(key, value) for key, value in scope["headers"] if key not in SOCKET_NOT_FORWARDED]
        headers = socket_relay.forwarded_for(headers, scope.get("client"))
        max_size = socket_relay.CDP_MAX_SIZE if route.cdp else socket_relay.MAX_SIZE

        async def open_() -> socket_relay.ClientConnection:
            if route.by_token:  # never woken (see `route`), even by a stop since it was found
                if route.worker.state != RUNNING:
                    raise WakerRefusal(404, "Not found.")
            elif not route.reads_only:
                await wake(route.worker)
            elif route.worker.state != RUNNING:
                raise WakerRefusal(503, read_key_never_wakes(route.worker.persona.name, route.worker.state))
            return await socket_relay.open_to_worker(
                route.url(scope), headers, scope.get("subprotocols") or [], max_size=max_size
            )

        opening = asyncio.ensure_future(open_())
        gone = asyncio.ensure_future(until_disconnected(receive, "websocket.disconnect"))
        try:
            await asyncio.wait({opening, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (opening, gone):
                task.cancel()
            await asyncio.gather(opening, gone, return_exceptions=True)
        if opening.cancelled():
            return None
        if (error := opening.exception()) is not None:
            if isinstance(error, WakerRefusal | socket_relay.WorkerHandshakeFailed):
                log.info("socket %s refused: %s", loggable(scope["path"]), masked(str(error)))
            else:
                log.error("opening socket %s failed", loggable(scope["path"]), exc_info=error)
            return None
        upstream = opening.result()
        if gone.done() and not gone.cancelled():  # gone in the same turn the socket opened
            await upstream.close()
            return None
        return upstream

    def key_accepted(self, scope: Scope, worker: PersonaWorker) -> bool:
        """Whether the request carries one of the persona's keys. False at once
        without one; a wrong one raises its 401 with its turn to wait
        (core/wrong_keys.py), and a flood of them 429, the key not compared."""
        authorization = dict(scope["headers"]).get(b"authorization")
        if authorization is None:
            return False
        given = authorization.decode("latin-1")
        address = scope_address(scope)
        guard = self.supervisor.key_guard
        try:
            due = guard.judge(address, lambda: any_key_matches(given, worker.persona.accepted_keys))
        except KeyFlood as flood:
            raise WakerRefusal(status_of(flood), flood.message, retry_after=flood.retry_after_s) from None
        if due is not None:
            raise WakerRefusal(
                401, WORKER_KEY_REQUIRED, realm="penelope", turn=functools.partial(guard.refusal, address, due)
            )
        return True


def _split(raw_path: bytes) -> tuple[bytes, bytes]:
    """`/w/<name>/<target>` as (name, b"/<target>"), on the raw path so the
    target reaches the worker exactly as the client encoded it."""
    parts = raw_path.split(b"/", 2)
    if len(parts) < 3:  # `/w%2F...`: decoded, the path began with /w/; raw, it does not
        return b"", b""
    name, slash, target = parts[2].partition(b"/")
    return name, slash + target
