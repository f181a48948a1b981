"""A byte relay for the tests' own proxies (tests/test_egress*.py)."""

from __future__ import annotations

import asyncio


async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy `source` to `sink` until its end, then close `sink`."""
    while data := await source.read(65536):
        sink.write(data)
        await sink.drain()
    sink.close()
