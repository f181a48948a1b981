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
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path

from core.procfs import command_line, parent_pid

log = logging.getLogger("penelope.browser")

HOOK = Path(__file__).with_name("tap.cjs")
SOCKET_ENV = "PENELOPE_CDP_TAP"
DRIVER_COMMAND = "run-driver"  # in the command line of Playwright's driver (`node cli.js run-driver`)


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

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
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
        self.on_close()

    def send(self, text: str) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(text.encode() + b"\0")

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
