"""The worker's live events, `ws://…/api/v1/events`, one JSON object a
message. Needs the `events` extra (the websockets package)."""

from __future__ import annotations

import asyncio
import json
from contextlib import ExitStack
from types import TracebackType
from typing import Any

from penelope_client._shared import EVENTS_NEED_WEBSOCKETS, EVENTS_REFUSED, Answer
from penelope_client.errors import PenelopeError

try:
    from websockets.exceptions import ConnectionClosedOK, InvalidStatus
except ImportError:  # the extra is not installed; events() says so when called
    ConnectionClosedOK = InvalidStatus = None  # type: ignore[assignment,misc]


def _refused(error: Exception) -> PenelopeError:
    """The handshake answered another status than 101 (403 for every refusal)."""
    return PenelopeError(error.response.status_code, EVENTS_REFUSED)  # type: ignore[attr-defined]


class EventStream:
    """Iterate it for each event as it happens, or `receive(timeout)` one;
    `close()` it, or use it in `with`. The iteration ends when the worker
    closes the socket (a stop)."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        if InvalidStatus is None:
            raise ImportError(EVENTS_NEED_WEBSOCKETS)
        self.url = url
        self.headers = headers
        self.socket: Any = None
        self._closing = ExitStack()

    def open(self) -> EventStream:
        """Connect now (iterating connects too): events that happen from here on reach it."""
        from websockets.sync.client import connect

        if self.socket is None:
            try:
                # As a context manager, as websockets 17 asks, whichever version is installed.
                self.socket = self._closing.enter_context(connect(self.url, additional_headers=self.headers))
            except InvalidStatus as error:
                raise _refused(error) from None
        return self

    def receive(self, timeout: float | None = None) -> Answer:
        """The next event; TimeoutError when none comes within `timeout` seconds."""
        return json.loads(self.open().socket.recv(timeout))

    def close(self) -> None:
        self._closing.close()

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> Answer:
        try:
            return self.receive()
        except ConnectionClosedOK:
            raise StopIteration from None

    def __enter__(self) -> EventStream:
        return self.open()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


class AsyncEventStream:
    """`EventStream` for asyncio: `async with`, `async for`, `await receive(timeout)`."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        if InvalidStatus is None:
            raise ImportError(EVENTS_NEED_WEBSOCKETS)
        self.url = url
        self.headers = headers
        self.socket: Any = None

    async def open(self) -> AsyncEventStream:
        from websockets.asyncio.client import connect

        if self.socket is None:
            try:
                self.socket = await connect(self.url, additional_headers=self.headers)
            except InvalidStatus as error:
                raise _refused(error) from None
        return self

    async def receive(self, timeout: float | None = None) -> Answer:
        await self.open()
        return json.loads(await asyncio.wait_for(self.socket.recv(), timeout))

    async def close(self) -> None:
        if self.socket is not None:
            await self.socket.close()

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __anext__(self) -> Answer:
        try:
            return await self.receive()
        except ConnectionClosedOK:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AsyncEventStream:
        return await self.open()

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()
