"""Running an ASGI application under daphne on the one asyncio loop that
Twisted drives, with a clean stop: what `serve` and `waker` share."""

from __future__ import annotations

import asyncio
import contextlib
import http
import logging
import os
import re
import secrets
import signal
import socket
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from core.addresses import authority
from core.routes import CDP

if TYPE_CHECKING:
    from core.seams import StreamChoice

log = logging.getLogger("penelope.serving")


def write_new_key(key_file: Path, key: str | None = None) -> str:
    """A new random key (or `key`), kept in `key_file` readable by its owner only."""
    key = key or secrets.token_urlsafe(32)
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key + "\n")
    return key


def say_generated(stdout, setting: str, key_file: Path) -> None:
    """Say that a secret was generated and where it is kept, never its value:
    a worker's output goes to `kubectl logs` and every log shipper."""
    stdout.write(
        f"Generated {setting}: it is kept in {key_file} (readable by its owner only); "
        f"read it with: cat {key_file}\n"
    )
    stdout.flush()


class PortInUse(RuntimeError):
    """The port to serve on is taken; the message names how to pick another."""


def check_port_free(host: str, port: int, *, setting: str) -> None:
    """Raise PortInUse when `host:port` cannot be bound now: checked before
    anything slow starts (the browser takes seconds), so a busy port is said
    at once. The setting and `--port` are named in the message."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Twisted binds
        try:
            probe.bind((host, port))
        except OSError as error:
            raise PortInUse(
                f"Could not listen on {authority(host, port)}: {error.strerror or error}. Stop what holds it, or choose "
                f"another port with {setting}={port + 1} or --port {port + 1}."
            ) from None


# Statuses the worker may send that the IANA registry does not name, with
# their origin's phrase: nginx's 499, a cancelled job's status (core/api.py).
UNREGISTERED_PHRASES = {499: "Client Closed Request"}


# The standard reason phrase of each status, as Python's `http.HTTPStatus` has
# it (`b"Too Many Requests"`, `b"Locked"`), and the unregistered ones the
# worker sends. `reason_phrase(status)` answers None for any other status
# (Twisted's table then answers). A table made once: daphne asks on every answer.
REASON_PHRASES = {status.value: status.phrase.encode() for status in http.HTTPStatus} | {
    code: phrase.encode() for code, phrase in UNREGISTERED_PHRASES.items()
}
reason_phrase = REASON_PHRASES.get


def event_loop() -> asyncio.AbstractEventLoop:
    """The loop everything runs on. Importing daphne installs Twisted's asyncio
    reactor, so this must come before anything else imports the reactor."""
    import daphne.server  # noqa: F401 - installs the reactor
    from twisted.internet import reactor

    from core.seams import asyncio_loop_of  # after the reactor is installed: the seams import Twisted

    loop = asyncio_loop_of(reactor)
    asyncio.set_event_loop(loop)
    return loop


def stop_serving() -> None:
    """Stop `run_daphne` as a first SIGTERM would: `on_stop` runs, then it returns."""
    from twisted.internet import error, reactor

    if reactor.running:
        log.info("stopping (asked by the worker itself)")
        with contextlib.suppress(error.ReactorNotRunning):  # a stop already under way
            reactor.stop()


# A CDP client's messages (screenshots, page contents, a file's bytes), on the
# worker's /cdp/<token> and the waker's /w/{persona}/cdp/<token>: 64 MiB,
# enough for a full-page screenshot of a long page, and a bound on what one
# message of a client holds in memory (daphne keeps a message whole until the
# application takes it). Every other socket keeps daphne's 1 MiB.
CDP_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
CDP_SOCKET_PATH = re.compile(rf"(/w/[^/]+)?/{CDP}/[^/]+")


def socket_message_limit(path: str) -> int | None:
    return CDP_MAX_MESSAGE_BYTES if CDP_SOCKET_PATH.fullmatch(path) else None


def run_daphne(
    application,
    *,
    host: str,
    port: int,
    on_ready: Callable[[], object],
    on_stop: Callable[[], Awaitable[object]],
    server_name: str = "worker",
    page_of: Callable[[str], str | None] | None = None,
    streams: Mapping[str, StreamChoice] | None = None,
    socket_close_wait_s: float | None = None,
    socket_open_wait_s: float = 5.0,
) -> bool:
    """Serve until the first SIGTERM/SIGINT (or `stop_serving`), then await
    `on_stop` before the loop ends; a second signal exits at once. `on_ready`
    runs once the port is bound. Request bodies are bounded as they arrive
    (core/bounded_http.py); each status goes out with its standard reason
    phrase (`reason_phrase`). A CDP socket's close waits `socket_close_wait_s`
    for its client's (core/seams, piece 16). A socket's handshake is answered
    within `socket_open_wait_s` (daphne's `websocket_handshake_timeout`), or the
    connection is dropped: a CDP client's waits for its page's turn. Answers
    whether the port could be bound."""
    import daphne.server
    from twisted.internet import defer, reactor
    from twisted.internet.error import ReactorNotRunning

    loop = event_loop()
    from core import bounded_http  # after the reactor is installed: it imports Twisted's web
    from core.seams import name_statuses, size_socket_messages  # after the reactor too: the seams import Twisted

    bounded_http.install(server_name, page_of, streams)
    name_statuses(reason_phrase)  # daphne writes Twisted's phrase, which is "Unknown Status" for a 429
    size_socket_messages(socket_message_limit, socket_close_wait_s)  # a CDP client's screenshots pass daphne's 1 MiB
    server = daphne.server.Server(
        application=application,
        endpoints=[f"tcp:port={port}:interface={host}"],
        signal_handlers=False,
        verbosity=0,
        websocket_handshake_timeout=socket_open_wait_s,
        ready_callable=on_ready,
    )
    stopping: list[int] = []

    def request_stop(signum: int) -> None:
        if stopping:
            log.warning("second signal: exiting now")
            os._exit(1)
        stopping.append(signum)
        log.info("stopping (signal %s)", signum)
        with contextlib.suppress(ReactorNotRunning):  # the worker may be stopping by itself already
            reactor.stop()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, request_stop, signum)
    reactor.addSystemEventTrigger("before", "shutdown", lambda: defer.Deferred.fromFuture(loop.create_task(on_stop())))
    server.run()
    return bool(server.listening_addresses)
