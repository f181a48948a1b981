"""The parts of the waker's proxy (waker/proxy.py) that speak plain ASGI:
the waker's own refusals and error answers, the request body read whole,
the wait for a client's disconnect, and a `Responder` that knows how far an
answer got. Apart from the proxy so that what it forwards besides the API
(the admin, waker/admin_forward.py) answers the same way without importing it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from core.api import StatusError
from waker.api import encode, error_body

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class WakerRefusal(StatusError):
    """A request the waker answers itself, with its status and one sentence
    (a socket's handshake is refused whatever the status: daphne has 403 only).
    A refusal whose status is its meaning, like the worker's `ApiError`; it
    answers in plain ASGI (`answer`), never through the worker's handler."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        realm: str = "penelope-waker",
        allow: str | None = None,
        retry_after: int | None = None,
        turn: Callable[[], Awaitable[None]] | None = None,
    ):
        super().__init__(status, message)
        self.realm, self.allow = realm, allow
        self.retry_after = retry_after
        # A wrong key's: its turn to be refused (core/wrong_keys.py), awaited before the answer.
        self.turn = turn

    async def taken(self) -> None:
        """Return once a wrong key's turn has come (at once for any other refusal)."""
        if self.turn is not None:
            await self.turn()

    async def answer(self, send: Send) -> None:
        await self.taken()
        await send_error(send, self.status, self.message, realm=self.realm, allow=self.allow, retry_after=self.retry_after)


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


async def until_disconnected(receive: Receive, disconnect: str = "http.disconnect") -> None:
    while (await receive())["type"] != disconnect:
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


async def send_error(
    send: Send,
    status: int,
    message: str,
    realm: str = "penelope-waker",
    allow: str | None = None,
    retry_after: int | None = None,
) -> None:
    body = encode(error_body(message))
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", f'Bearer realm="{realm}"'.encode()))
    if allow is not None:
        headers.append((b"allow", allow.encode()))
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
