"""The HTTP/1.1 the browser's egress guard (browser/egress.py) speaks to pass
plain-http requests on: a message's head, its body by its framing, and the
guard's own short answers. Requests and answers are passed on as they come;
only the headers that concern one hop are dropped."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

COPY_CHUNK = 256 * 1024
# Headers that concern one hop, not the message: never passed on.
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate", "te", "upgrade",
})
NO_BODY_STATUSES = frozenset({204, 304})
CHUNKED = -1  # a body's framing: chunked
UNTIL_CLOSE = -2  # a body's framing: it ends with the connection
REASONS = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}


@dataclass
class Head:
    """A request's or an answer's first line and headers."""

    first_line: str
    headers: list[tuple[str, str]]

    @classmethod
    def parse(cls, raw: bytes) -> Head:
        lines = raw.decode("latin-1").split("\r\n")
        headers = []
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers.append((name.strip(), value.strip()))
        return cls(lines[0], headers)

    @property
    def method(self) -> str:
        return self.first_line.split(" ", 1)[0]

    @property
    def target(self) -> str:
        return self.first_line.split(" ", 2)[1]

    @property
    def status(self) -> int:
        try:
            return int(self.first_line.split(" ", 2)[1])
        except (IndexError, ValueError):
            return 0

    def get(self, name: str) -> str | None:
        name = name.lower()
        return next((value for key, value in self.headers if key.lower() == name), None)

    def end_to_end(self) -> list[tuple[str, str]]:
        return [(name, value) for name, value in self.headers if name.lower() not in HOP_BY_HOP]

    def wants_close(self) -> bool:
        """The sender closes after this message (or asks the other side to)."""
        tokens = {token.strip().lower() for token in (self.get("connection") or "").split(",")}
        if self.first_line.endswith("HTTP/1.0") or self.first_line.startswith("HTTP/1.0"):
            return "keep-alive" not in tokens
        return "close" in tokens

    def body_framing(self, request_method: str | None = None) -> int:
        """The body's length, CHUNKED or UNTIL_CLOSE; for an answer, the
        method of the request it answers."""
        if request_method is not None and (request_method == "HEAD" or self.status in NO_BODY_STATUSES
                                           or 100 <= self.status < 200):
            return 0
        if "chunked" in (self.get("transfer-encoding") or "").lower():
            return CHUNKED
        length = self.get("content-length")
        if length is not None and length.isascii() and length.isdigit():
            return int(length)
        return UNTIL_CLOSE if request_method is not None else 0


def encode(first_line: str, headers: list[tuple[str, str]]) -> bytes:
    return (first_line + "\r\n" + "".join(f"{name}: {value}\r\n" for name, value in headers) + "\r\n").encode("latin-1")


async def copy(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, limit: int | None = None, idle_s: float | None = None,
) -> None:
    """Bytes from `reader` to `writer` until its end (or `limit` bytes);
    TimeoutError when nothing comes for `idle_s`."""
    left = limit
    while left is None or left > 0:
        data = await asyncio.wait_for(reader.read(COPY_CHUNK if left is None else min(COPY_CHUNK, left)), idle_s)
        if not data:
            if left is not None:
                raise asyncio.IncompleteReadError(b"", left)
            return
        writer.write(data)
        await writer.drain()
        if left is not None:
            left -= len(data)


async def copy_body(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, framing: int, idle_s: float | None = None,
) -> None:
    """A message's body, by its framing (Head.body_framing); TimeoutError
    when nothing comes for `idle_s`."""
    if framing == UNTIL_CLOSE:
        await copy(reader, writer, idle_s=idle_s)
    elif framing == CHUNKED:
        while True:
            size_line = await asyncio.wait_for(reader.readuntil(b"\r\n"), idle_s)
            writer.write(size_line)
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:  # the trailers, up to the blank line
                while (line := await asyncio.wait_for(reader.readuntil(b"\r\n"), idle_s)) != b"\r\n":
                    writer.write(line)
                writer.write(line)
                break
            await copy(reader, writer, size + 2, idle_s)  # the chunk and its CRLF
    elif framing > 0:
        await copy(reader, writer, framing, idle_s)
    await writer.drain()


async def answer(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    """The guard's own short answer; the connection closes after it."""
    body = text.encode()
    writer.write(encode(f"HTTP/1.1 {status} {REASONS[status]}", [
        ("Content-Type", "text/plain; charset=utf-8"),
        ("Content-Length", str(len(body))),
        ("Access-Control-Allow-Origin", "*"),
        ("X-Penelope-Refused", "1" if status == 403 else "0"),
        ("Connection", "close"),
    ]) + body)
    await writer.drain()
