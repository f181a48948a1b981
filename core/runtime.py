"""How a request reaches the worker's runtime.

`serve` builds one runtime (worker/runtime.py: the pages, the job runner,
the request log, the live links…) and the ASGI application
(penelope_site/asgi.py) puts it in the scope of every request and socket it
serves. A view reads the part it needs through `runtime_of`; no app imports
the runtime's class, which sits above them all."""

from __future__ import annotations

from typing import Any

SCOPE_KEY = "penelope.runtime"


class NoRuntime(LookupError):
    """A request that came in through no worker's application (a test's bare request)."""


def runtime_of(holder: Any) -> Any:
    """The runtime of a request (Django's or DRF's) or of a socket's consumer:
    whatever carries the ASGI scope it came in with, or the scope itself. A WSGI request (Django's
    test client, in the admin's tests) carries it in its environ."""
    scope = holder if isinstance(holder, dict) else getattr(holder, "scope", None)
    if scope is None:
        scope = getattr(holder, "META", {})
    try:
        return scope[SCOPE_KEY]
    except KeyError:
        raise NoRuntime("This request came through no worker's application: it has no runtime.") from None


def with_runtime(application: Any, runtime: Any) -> Any:
    """`application`, with `runtime` in the scope of everything it serves."""

    async def serve(scope: dict, receive: Any, send: Any) -> None:
        scope[SCOPE_KEY] = runtime  # the server's own scope for this connection; no copy
        await application(scope, receive, send)

    return serve
