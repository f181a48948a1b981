"""Seams in Playwright (piece 15; core/seams/__init__.py says what it relies
on, and why)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def download_file_of(download: Any) -> Path:
    """The file a running download is written to, from its start: Playwright
    gives it (`Download.path()`) only once the download has finished, but its
    artifact knows it from the first byte, in the folder the browser was
    launched with (`downloads_path`)."""
    return Path(download._impl_obj._artifact._initializer["absolutePath"])


def send_cdp(session: Any, method: str, params: dict[str, Any]) -> Any:
    """Send a CDP message on a Playwright `CDPSession` now, as an internal
    call: the future of its result. `CDPSession.send` is a coroutine that
    sends once it runs, and goes through Playwright's API-call wrapper
    (its zone, its parameter validation, its instrumentation) on the way;
    the connection's own `send_message_to_server` sends at once, with the
    same message."""
    impl = session._impl_obj
    return impl._connection.send_message_to_server(
        impl, "send", {"method": method, "params": params}, {"internal": True, "timeout": 0}
    )


def on_cdp_events(session: Any, handler: Any) -> None:
    """Call `handler({"method", "params"})` with every event of a Playwright
    `CDPSession`, from its implementation object: the public `on` wraps a
    handler in one that reads its signature (`inspect.signature`) at every
    call, to know how many arguments to pass."""
    session._impl_obj.on("event", handler)
