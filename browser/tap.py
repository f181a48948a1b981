"""The worker's end of the driver tap (browser/tap.cjs): a second way onto
Chromium's debugging pipe, beside Playwright's, for the CDP clients'
messages (cdp/mux.py).

Playwright's driver is a Node process, and Chromium's one pipe is its. The
tap, loaded into the driver, passes the messages of the worker's own CDP
sessions to this end and writes the worker's messages to the pipe, so a
client's step crosses the driver as bytes, not as a Playwright call (a
Python call, its answer and events, each validated and dispatched on both
sides). docs/BENCHMARKS.md, "Issue 43", has what that saves.

The socket sits in a folder only this user can enter, and a connection is
taken only from Playwright's driver among this process's children (the
peer's pid is read from the socket, its parent and command line from
/proc): no other local process reaches the pipe through it, whoever it runs
as. The tap's two variables leave this process's environment once the
driver runs, so no later child loads it. No port is ever opened.

Each launch starts a driver of its own (browser/runner.py), whose tap
connects when it spawns Chromium; `link()` is the one of the browser that
runs now. A link closes when its browser's pipe does.

What each side holds is bounded. The worker writes a large message (a CDP
client's, up to 64 MiB) in parts of PART characters, each once the tap took
the one before (asyncio's flow control, past HIGH_WATER bytes), a turn of
the event loop apart: no one step holds the loop for the whole message, and
`wait_drained` lets a CDP connection read its client's next message only
once the last is on its way. The tap stops reading the worker while
Chromium's pipe is full, and stops reading Chromium while the worker has not
taken what it has (tap.cjs).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
import struct
import tempfile
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path

from core.procfs import command_line, parent_pid

log = logging.getLogger("penelope.browser")

HOOK = Path(__file__).with_name("tap.cjs")
SOCKET_ENV = "PENELOPE_CDP_TAP"
DRIVER_COMMAND = "run-driver"  # in the command line of Playwright's driver (`node cli.js run-driver`)
# Characters of a message written to the tap in one step; a longer one goes in parts.
PART = 1024 * 1024
# Bytes the link's transport holds for the tap before the link waits for it to take them.
HIGH_WATER = 4 * 1024 * 1024


class TapUnavailable(RuntimeError):
    """The running browser's driver has not linked (it has no tap)."""


class Link(asyncio.Protocol):
    """One driver's tap: messages to and from Chromium's pipe, NUL-ended.
    With `taken`, a connection accepted on the tap's socket: it is a link
    (and `taken` hears of it) only once its peer proves to be this process's
    driver; any other is closed at once."""

    def __init__(self, taken: Callable[[Link], None] | None = None) -> None:
        self.taken = taken
        self.transport: asyncio.Transport | None = None
        self.on_message: Callable[[str], None] = lambda text: None
        self.on_close: Callable[[], None] = lambda: None
        self.closed = False
        self._pending: list[bytes] = []
        # Messages to the tap that wait their turn: a text, or a message's JSON in pieces (cdp/mux.py).
        self._outbox: deque[str | Iterable[str]] = deque()
        self._writer: asyncio.Future | None = None  # writes the outbox, part by part
        self._taking = asyncio.Event()  # the transport takes more (asyncio's pause_writing clears it)
        self._taking.set()
        self._drained = asyncio.Event()  # nothing waits to be written
        self._drained.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.set_write_buffer_limits(high=HIGH_WATER)  # type: ignore[attr-defined]
        if self.taken is None:
            return
        peer = _peer_pid(transport.get_extra_info("socket"))
        if peer is None or parent_pid(peer) != os.getpid() or DRIVER_COMMAND not in command_line(peer):
            log.warning("a process (pid %s) that is not this worker's driver connected to the tap; refused", peer)
            self.closed = True
            transport.abort()  # type: ignore[attr-defined]
            return
        self.taken(self)

    def data_received(self, data: bytes) -> None:
        end = data.find(b"\0")
        if end == -1:
            self._pending.append(data)  # a large message arrives in many reads: joined once, at its end
            return
        if self._pending:
            self._pending.append(data[:end])
            self.on_message(b"".join(self._pending).decode())
            self._pending = []
        else:
            self.on_message(data[:end].decode())
        start = end + 1
        end = data.find(b"\0", start)
        while end != -1:
            self.on_message(data[start:end].decode())
            start = end + 1
            end = data.find(b"\0", start)
        if start < len(data):
            self._pending.append(data[start:])

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._outbox.clear()
        self._taking.set()
        self._drained.set()
        self.on_close()

    def pause_writing(self) -> None:
        self._taking.clear()
        self._drained.clear()

    def resume_writing(self) -> None:
        self._taking.set()
        self._settle()

    @property
    def drained(self) -> bool:
        """Whether every message sent is on its way to the tap (or the link closed)."""
        return self._drained.is_set()

    async def wait_drained(self) -> None:
        await self._drained.wait()

    def send(self, text: str | Iterable[str]) -> None:
        """Write a message to the tap, after those still waiting: a text, or
        its pieces (a large message, written in parts as the tap takes them)."""
        if self.transport is None or self.closed:
            return
        if isinstance(text, str) and len(text) <= PART and self._writer is None and self._taking.is_set():
            self.transport.write(text.encode() + b"\0")
            return
        self._outbox.append(text)
        self._drained.clear()
        if self._writer is None:
            self._writer = asyncio.ensure_future(self._write_out())

    async def _write_out(self) -> None:
        try:
            while self._outbox and not self.closed:
                message = self._outbox.popleft()
                pieces = (
                    (message[start : start + PART] for start in range(0, len(message), PART))
                    if isinstance(message, str)
                    else message
                )
                part: list[str] = []
                size = 0
                for piece in pieces:
                    part.append(piece)
                    size += len(piece)
                    if size >= PART:
                        await self._write("".join(part))
                        part, size = [], 0
                part.append("\0")
                await self._write("".join(part))
        except Exception:  # a message that cannot be written: the pipe is in an unknown state
            log.exception("a message to the driver's tap could not be written; the link closes")
            self.close()
        finally:
            self._writer = None
            self._settle()

    async def _write(self, part: str) -> None:
        """One part, once the transport takes more; then the loop serves others."""
        await self._taking.wait()
        if self.transport is not None and not self.closed:
            self.transport.write(part.encode())
            await asyncio.sleep(0)

    def _settle(self) -> None:
        if self.closed or (self._writer is None and not self._outbox and self._taking.is_set()):
            self._drained.set()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class DriverTap:
    """The socket the taps of this worker's drivers connect to."""

    def __init__(self) -> None:
        self.folder: Path | None = None
        self._server: asyncio.AbstractServer | None = None
        self._link: Link | None = None
        self._linked = asyncio.Event()

    async def open(self) -> str:
        """Listen (once): the socket's path, for the driver's environment."""
        if self._server is None:
            self.folder = Path(tempfile.mkdtemp(prefix="penelope-tap-"))  # 0700: only this user enters
            self._server = await asyncio.get_running_loop().create_unix_server(
                lambda: Link(taken=self._take), str(self.folder / "tap.sock")
            )
        return str(self.folder / "tap.sock")

    def _take(self, link: Link) -> None:
        if self._link is not None and not self._link.closed:
            self._link.close()  # a driver of a browser that no longer runs
        self._link = link
        self._linked.set()

    async def link(self, timeout_s: float) -> Link:
        """The link of the browser that runs now, waiting up to `timeout_s` for its driver to connect."""
        if self._server is None:
            raise TapUnavailable("The browser was launched without the driver tap.")
        try:
            async with asyncio.timeout(timeout_s):
                while self._link is None or self._link.closed:
                    self._linked.clear()
                    await self._linked.wait()
        except TimeoutError:
            raise TapUnavailable("The browser's driver did not link its tap.") from None
        return self._link

    async def close(self) -> None:
        if self._link is not None:
            self._link.close()
        if self._server is not None:
            self._server.close()
            self._server = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def _peer_pid(sock: socket.socket | None) -> int | None:
    if sock is None:
        return None
    pid, _uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return pid or None
