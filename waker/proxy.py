"""`ANY /w/{persona}/api/v1/...`: wake the persona's worker and pass the
request through, its answer streamed back with its status and headers.

A plain ASGI application in front of Django's (which serves the waker's own
API), because a proxy must hold its count of requests in flight exactly as
long as the exchange lasts, and notice a client that goes away: Django's
handler offers neither for a response that has not started streaming yet.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote

import httpx

from waker.api import WORKER_KEY_REQUIRED, any_key_matches, encode, error_body
from waker.supervisor import RUNNING, PersonaWorker, StartFailed, Supervisor

log = logging.getLogger("penelope.waker")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

PREFIX = "/w/"
API_PREFIX = "/api/v1/"
HEALTH_PATH = "/api/v1/health"
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
# A forwarded call may run for minutes; the worker's own time limits bound it.
FORWARD_TIMEOUT = httpx.Timeout(5.0, read=None, write=None, pool=None)


class WakerApplication:
    """`/w/...` to the persona's worker; everything else to the waker's own API."""

    def __init__(self, api: Callable[[Scope, Receive, Send], Awaitable[None]], supervisor: Supervisor):
        self.api = api
        self.supervisor = supervisor

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(PREFIX):
            await self.forward(scope, receive, send)
        else:
            await self.api(scope, receive, send)

    async def forward(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The body is read first: daphne holds it whole anyway, and once it is
        # read the only message left to receive is the client's disconnect.
        body = await read_body(receive)
        if body is None:
            return
        name_raw, target = _split(scope.get("raw_path") or scope["path"].encode())
        name = unquote(name_raw.decode("latin-1"))
        worker = self.supervisor.get(name)
        if worker is None:
            await send_error(send, 404, f"No persona {name[:64]}.")
            return
        path = unquote(target.decode("latin-1"))
        # No dot segments: the client's HTTP library would resolve them, and
        # `api/v1/../../admin/` would leave the worker's API.
        if not path.startswith(API_PREFIX) or {".", ".."} & set(path.split("/")):
            await send_error(
                send, 404, f"No route {scope['path'][:200]}: the waker forwards /w/{name}/api/v1/... only."
            )
            return
        headers = dict(scope["headers"])
        if path == HEALTH_PATH:
            # Health needs no key, so it never wakes a worker.
            if worker.state != RUNNING:
                await send_error(
                    send,
                    503,
                    f"Persona {name}'s worker is {worker.state}. Health never wakes a worker: any other request "
                    f"through /w/{name}/ with its key does, as does POST /api/v1/personas/{name}/start.",
                )
                return
        elif not any_key_matches(headers.get(b"authorization", b"").decode("latin-1"), worker.persona.accepted_keys):
            # Checked here too, so a client without a key cannot wake a worker;
            # what a read key may do is the worker's to say.
            await send_error(send, 401, WORKER_KEY_REQUIRED, realm="penelope")
            return
        url = worker.persona.base_url + target.decode("latin-1")
        if scope.get("query_string"):
            url += "?" + scope["query_string"].decode("latin-1")
        responder = Responder(send)
        exchange = asyncio.ensure_future(self._exchange(worker, scope, url, body, responder))
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
            log.error("forwarding %s %s failed", scope["method"], scope["path"], exc_info=exchange.exception())
            await responder.finish_after_error()

    async def _exchange(self, worker: PersonaWorker, scope: Scope, url: str, body: bytes, send: Responder) -> None:
        name = worker.persona.name
        try:
            await worker.ensure_running()
        except StartFailed as error:
            await send_error(send, 503, f"Persona {name}'s worker did not start: {error.message}")
            return
        headers = [(key, value) for key, value in scope["headers"] if key not in NOT_FORWARDED]
        http = self.supervisor.http
        with worker.forwarding():
            request = http.build_request(scope["method"], url, headers=headers, content=body, timeout=FORWARD_TIMEOUT)
            try:
                upstream = await http.send(request, stream=True)
            except httpx.HTTPError as error:
                log.warning("persona %s: forwarding %s %s failed: %r", name, scope["method"], scope["path"], error)
                await send_error(send, 502, f"Persona {name}'s worker did not answer: {error.__class__.__name__}.")
                return
            try:
                await send(
                    {
                        "type": "http.response.start",
                        "status": upstream.status_code,
                        "headers": [
                            (key.lower(), value) for key, value in upstream.headers.raw if key.lower() not in HOP_BY_HOP
                        ],
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
                        scope["path"],
                        error,
                    )
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            finally:
                await upstream.aclose()


def _split(raw_path: bytes) -> tuple[bytes, bytes]:
    """`/w/<name>/<target>` as (name, b"/<target>"), on the raw path so the
    target reaches the worker exactly as the client encoded it."""
    parts = raw_path.split(b"/", 2)
    if len(parts) < 3:  # `/w%2F...`: decoded, the path began with /w/; raw, it does not
        return b"", b""
    name, slash, target = parts[2].partition(b"/")
    return name, slash + target


async def read_body(receive: Receive) -> bytes | None:
    """The request's whole body, or None when the client went away first."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def until_disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class Responder:
    """The client's side of `send`, knowing how far the answer got."""

    def __init__(self, send: Send):
        self._send = send
        self.started = False
        self.finished = False

    async def __call__(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        elif not message.get("more_body", False):
            self.finished = True
        await self._send(message)

    async def finish_after_error(self) -> None:
        """After an unexpected error: the envelope if nothing was sent yet, else end the answer."""
        if not self.started:
            await send_error(self, 500, "The waker hit an unexpected error; the details are in its log.")
        elif not self.finished:
            await self({"type": "http.response.body", "body": b"", "more_body": False})


async def send_error(send: Send, status: int, message: str, realm: str = "penelope-waker") -> None:
    body = encode(error_body(message))
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", f'Bearer realm="{realm}"'.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
