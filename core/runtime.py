"""The worker's runtime as the apps reach it: through a request, and
through its tasks.

`serve` builds one runtime (worker/runtime.py: the pages, the job runner,
the request log, the live links…) and the ASGI application
(penelope_site/asgi.py) puts it in the scope of every request and socket it
serves. A view reads the part it needs through `runtime_of`; no app imports
the runtime's class, which sits above them all.

`Tasks.spawn` runs background tasks on the worker's event loop, none of
which dies silently. It keeps each task referenced until it ends (the loop
itself holds only weak references) and logs its exception, naming what the
task was about (a job, a page, a webhook attempt): a task that fails where
nobody awaits it otherwise leaves only asyncio's "Task exception was never
retrieved", long after, with nothing to say what was lost. The runtime owns
one `Tasks` and hands it to what spawns; an object built on its own (a
test's, a command's) makes its own."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from core.errors import Refusal

SCOPE_KEY = "penelope.runtime"

log = logging.getLogger("penelope.tasks")


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


class Tasks:
    def __init__(self) -> None:
        self.running: set[asyncio.Task] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], *, about: str) -> asyncio.Task:
        """Run `coro` as a task of its own; `about` names what it concerns ("job 5b1d…")."""
        task = asyncio.get_running_loop().create_task(coro, name=about)
        self.running.add(task)
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task) -> None:
        self.running.discard(task)
        if task.cancelled():
            return
        error = task.exception()  # retrieved here, so asyncio never reports it unread
        if error is None or isinstance(error, Refusal):
            return  # an answer (a refusal is one), for whoever awaits it
        log.error("background task for %s failed", task.get_name(), exc_info=error)
