"""The WebSocket half of the waker's proxy (waker/proxy.py): a socket opened
to the worker with `websockets`, and the relay between it and the client's
socket under daphne, each message passed on as it came (text as text, bytes
as bytes) until either side closes, its close code passed on.

What the relay holds is bounded both ways, a message or a few at a time:

- worker to client: awaiting daphne's `websocket.send` bounds nothing, as it
  hands the message to Twisted's transport and returns (daphne 4.2.3
  `WebSocketProtocol.serverSend`, autobahn's `sendMessage`), and the
  transport buffers without limit. So each message waits until the client's
  connection takes more (`Writable`); meanwhile nothing is read from the
  worker past `max_queue` frames, and then its own sends wait in turn. A
  message is at most `max_size` bytes: MAX_SIZE for the live view and the
  events, CDP_MAX_SIZE for a CDP client's socket; the relay holds at most
  `max_queue` of them and the one it is sending.
- client to worker: each message is sent to the worker, and the send
  awaited (websockets waits while more than `write_limit` bytes are unsent),
  before the next is taken. What daphne reads from the client before the
  relay takes it sits in daphne's own queue (`onMessage` puts it there
  without a bound, each message at most its `websocket_max_message_size`,
  1 MiB), as it does for the worker's own sockets.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.frames import EXTERNAL_CLOSE_CODES, CloseCode

from core.serving import CDP_MAX_MESSAGE_BYTES
from core.writable import Writable

# A token (URL-safe base64, or anything a client put in its place) in a
# path, the worker's (`/live/<token>/ws`) or the waker's
# (`/w/<persona>/cdp/<token>`), wherever it stands in the path (`//`, `./`
# and the like in front of it included), whatever the persona is called.
TOKEN_IN_PATH = re.compile(r"/(live|cdp)/(?!(?:live|cdp)/)[^/\s?#]+")


def masked(text: str) -> str:
    """`text` (a path, or a sentence holding one) as the log shows it: a live
    link's or a CDP client's token is its credential, never written."""
    return TOKEN_IN_PATH.sub(r"/\1/…", text)


def loggable(path: str) -> str:
    return masked(path)[:200]


log = logging.getLogger("penelope.waker")

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

# The handshake's own headers: websockets writes them again for the worker
# (the offered subprotocols go as `subprotocols=`).
HANDSHAKE_HEADERS = frozenset(
    {b"sec-websocket-key", b"sec-websocket-version", b"sec-websocket-extensions", b"sec-websocket-protocol"}
)
# How the waker's socket to the worker reads and writes.
# How long the worker may take to answer a socket's handshake: a CDP
# client's waits for its page's turn, up to the worker's PAGE_WAIT_S (30 s
# by default), and its tab. The waker answers its own client within
# OPEN_WAIT_S + 5 (its daphne's handshake timeout, waker/management/commands/waker.py).
OPEN_WAIT_S = 60.0

UPSTREAM = {
    # The worker is on loopback: no proxy from the environment, and no
    # compression, which JPEG frames would not repay.
    "proxy": None,
    "compression": None,
    # Every header is the client's, its User-Agent (or none) included.
    "user_agent_header": None,
    "open_timeout": OPEN_WAIT_S,
    # The worker's daphne pings this hop (every 20 s) and websockets answers;
    # one keepalive per hop is enough.
    "ping_interval": None,
    # Frames read from the worker and not yet relayed: past these, websockets
    # stops reading, so a slow client holds back the worker, not the waker.
    "max_queue": 4,
}


# The largest message read from the worker: a live view's JPEG frame of a
# large screen fits; a message past it ends the socket (1009) rather than
# being held.
MAX_SIZE = 8 * 1024 * 1024
# A CDP client's: a full-page screenshot or a large evaluate result is one
# message of many MB. As much as the worker's daphne takes on that path
# (core/serving.py), which is Playwright's own limit.
CDP_MAX_SIZE = CDP_MAX_MESSAGE_BYTES


def forwarded_for(headers: list[tuple[bytes, bytes]], client: tuple[str, int] | None) -> list[tuple[bytes, bytes]]:
    """`headers` with `X-Forwarded-For` set to the address the client
    connected from (ASGI's `client`), for the worker's request log
    (cdp/sockets.py). A client's own is dropped: the waker is the hop clients
    reach, so nothing before it vouches for one."""
    kept = [(key, value) for key, value in headers if key != b"x-forwarded-for"]
    return [*kept, (b"x-forwarded-for", client[0].encode("latin-1"))] if client else kept


class WorkerHandshakeFailed(Exception):
    """The worker did not open the socket: it refused the handshake, or did
    not answer it. The client's handshake is then refused too."""


async def open_to_worker(
    url: str, headers: list[tuple[bytes, bytes]], subprotocols: list[str], *, max_size: int = MAX_SIZE
) -> ClientConnection:
    """The socket to the worker, its handshake done, with the client's
    end-to-end `headers` (its `Authorization` among them) and `subprotocols`;
    a message from the worker past `max_size` bytes ends it."""
    try:
        return await connect(
            url,
            additional_headers=[(key.decode("latin-1"), value.decode("latin-1")) for key, value in headers],
            subprotocols=subprotocols or None,
            max_size=max_size,
            **UPSTREAM,
        )
    except InvalidStatus as refused:
        raise WorkerHandshakeFailed(f"the worker answered the handshake {refused.response.status_code}") from None
    except (OSError, TimeoutError, InvalidHandshake) as error:
        raise WorkerHandshakeFailed(f"the worker did not open the socket: {error!r}") from None


async def relay(upstream: ClientConnection, receive: Receive, send: Send) -> None:
    """Pass messages both ways until either side closes, then close the other
    with the same code; the client's socket is accepted already."""
    writable = Writable.of(send)
    if writable is None:
        log.warning("cannot pace a socket to the client's connection: the relay is not bounded toward it")
    to_worker = asyncio.ensure_future(_client_to_worker(upstream, receive))
    to_client = asyncio.ensure_future(_worker_to_client(upstream, send, writable))
    try:
        await asyncio.wait({to_worker, to_client}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for direction in (to_worker, to_client):
            direction.cancel()
        results = await asyncio.gather(to_worker, to_client, return_exceptions=True)
        # Neither side is left open, whatever ended the relay: closing the
        # worker's socket again does nothing, and daphne drops a close to a
        # client that is gone.
        await upstream.close()
        if not (to_client.done() and not to_client.cancelled() and to_client.exception() is None):
            await send({"type": "websocket.close"})
    for result in results:
        if isinstance(result, Exception):
            log.error("relaying a socket to %s failed", loggable(upstream.request.path), exc_info=result)


async def _client_to_worker(upstream: ClientConnection, receive: Receive) -> None:
    """Ends when the client goes; the worker's socket is then closed with its code."""
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            await upstream.close(code_for_worker(message.get("code")))
            return
        if message["type"] != "websocket.receive":
            continue
        data = message.get("bytes")
        try:
            await upstream.send(data if data is not None else message.get("text", ""))
        except ConnectionClosed:
            pass  # the worker closed: the other direction passes its close on and ends the relay


async def _worker_to_client(upstream: ClientConnection, send: Send, writable: Writable | None) -> None:
    """Ends when the worker's socket closes, having closed the client's with its code."""
    try:
        async for message in upstream:
            if writable is not None:
                await writable.open.wait()
            if isinstance(message, bytes):
                await send({"type": "websocket.send", "bytes": message})
            else:
                await send({"type": "websocket.send", "text": message})
    except ConnectionClosed:
        pass  # closed with a code other than 1000 and 1001, or broken off: the code is read below
    received = upstream.protocol.close_rcvd
    await send({"type": "websocket.close", "code": code_for_client(received.code if received else None)})


def code_for_client(code: int | None) -> int:
    """The worker's close code as the client gets it. Daphne sends only 1000
    and 3000-4999 from an application (autobahn's `sendClose` raises on any
    other): those pass as they are (a live socket's 4404 and 4429 among
    them); any other, or a socket to the worker that broke off without a
    code, ends the client's as a plain 1000."""
    # A plain int: autobahn refuses any other type, an IntEnum included.
    if code is not None and (code == CloseCode.NORMAL_CLOSURE or 3000 <= code <= 4999):
        return int(code)
    return int(CloseCode.NORMAL_CLOSURE)


def code_for_worker(code: int | None) -> int:
    """The client's close code as the worker gets it: as it came when it may
    be sent (websockets' own rule); 1000 when the client closed without a
    code (1005), 1001 (going away) when its connection broke off."""
    if code is not None and (code in EXTERNAL_CLOSE_CODES or 3000 <= code <= 4999):
        return int(code)
    return int(CloseCode.NORMAL_CLOSURE if code == CloseCode.NO_STATUS_RCVD else CloseCode.GOING_AWAY)


