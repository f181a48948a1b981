"""A seam in channels (piece 17; core/seams/__init__.py says what it
replaces, and why)."""

from __future__ import annotations

from typing import Any

from channels.consumer import get_handler_name


class NoDatabaseDispatch:
    """Put before a channels consumer whose handlers never touch the
    database: `dispatch` calls the message's handler straight away, where
    channels 4.3.2's `AsyncConsumer.dispatch` first awaits
    `aclose_old_connections()`, `sync_to_async(close_old_connections)`, a
    hop to a thread and back for every message a socket receives."""

    async def dispatch(self, message: dict[str, Any]) -> None:
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)
