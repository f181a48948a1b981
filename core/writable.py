"""Whether a WebSocket's connection takes more bytes now, under daphne.

Shared by the worker's sockets (the event stream, the live view) and the
waker's relay; it imports nothing of the project, so the waker, which does
not load the worker's settings, can use it too.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any


class Writable:
    """Whether the connection takes more bytes now: Twisted pauses a push
    producer registered on the transport when its write buffer fills (64 KiB)
    and resumes it once drained. The transport already has one, the HTTP
    channel the socket was upgraded from; this stands in front of it and
    passes every call on."""

    def __init__(self, transport: Any) -> None:
        self.open = asyncio.Event()
        self.open.set()
        self.transport = transport
        self.previous = getattr(transport, "producer", None)
        if self.previous is not None:
            transport.unregisterProducer()
        transport.registerProducer(self, True)

    def pauseProducing(self) -> None:  # noqa: N802 - Twisted's interface
        self.open.clear()
        if self.previous is not None:
            self.previous.pauseProducing()

    def resumeProducing(self) -> None:  # noqa: N802
        self.open.set()
        if self.previous is not None:
            self.previous.resumeProducing()

    def stopProducing(self) -> None:  # noqa: N802
        self.open.set()
        if self.previous is not None:
            self.previous.stopProducing()

    @classmethod
    def of(cls, send: Any) -> Writable | None:
        """For a socket served by daphne, whose `send` is its server's reply
        function bound to the socket's protocol; None under another server
        (the queue then still bounds a burst)."""
        protocol = send.args[0] if isinstance(send, functools.partial) and send.args else None
        transport = getattr(protocol, "transport", None)
        if transport is None or not hasattr(transport, "registerProducer"):
            return None
        return cls(transport)
