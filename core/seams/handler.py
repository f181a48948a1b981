"""Seams in Django's request handling: its ASGI handler (piece 1),
request_started's receivers (2), a middleware chain outside its handler (5)
and a hook on a response's close (9). core/seams/__init__.py says what each
replaces or relies on, and why."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from asgiref.sync import sync_to_async
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.db import close_old_connections, reset_queries
from django.http import HttpRequest, HttpResponseBase
from django.urls import set_script_prefix
from django.utils.module_loading import import_string

# The paths whose requests run without a thread of their own: the API's views
# are async and reach the database through core/db_thread.py only.
THREADLESS_PREFIX = "/api/"


# --- 1. Django's ASGI handler ------------------------------------------------------------


class ThreadlessApiHandler(ASGIHandler):
    """Django's ASGI handler; an /api/ request runs in daphne's own task,
    with no thread of its own and no hop to one (`handle_api`). The admin,
    whose views are sync, keeps Django's way."""

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http" and scope["path"].startswith(THREADLESS_PREFIX):
            await self.handle_api(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)

    async def handle_api(self, scope: dict, receive: Callable, send: Callable) -> None:
        """What Django's `handle` does for a request, in one task: the body,
        the request, the middleware and view, the answer, its close. A client
        that disconnects before its answer is sent cancels the view, as with
        Django. Not sent: `request_started`, whose one receiver returns at once
        for /api/ (piece 2)."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            body_file.close()
            await self.send_response(error_response, send)
            error_response.close()
            return
        this_task = asyncio.current_task()
        watcher = asyncio.get_running_loop().create_task(_cancel_on_disconnect(receive, this_task))
        response = None
        try:
            response = await self.run_get_response(request)
            await self.send_response(response, send)
        except asyncio.CancelledError:
            # Swallowed only when the client's disconnect was the one cancel:
            # the server's own (its stop) goes on up, even beside a disconnect.
            if not (watcher.done() and not watcher.cancelled() and watcher.result()) or this_task.uncancel():
                raise
        finally:
            watcher.cancel()
            body_file.close()
        if response is None:
            await signals.request_finished.asend(sender=self.__class__)
        else:
            response.close()  # its receivers do no I/O on the loop (piece 2)


async def _cancel_on_disconnect(receive: Callable, task: asyncio.Task) -> bool:
    """Cancel `task` when the client disconnects (the only message left once
    the body is read); answers whether it did."""
    if (await receive())["type"] != "http.disconnect":
        return False
    task.cancel()
    return True


# --- 2. request_started's receivers -----------------------------------------------------


async def request_started_outside_api(sender: Any, scope: dict | None = None, **kwargs: Any) -> None:
    """Django's own request_started receivers, for the requests that may use
    the database from their thread (the admin's): an API request has no
    connection in a request thread to reset or close."""
    if scope is not None and scope.get("path", "").startswith(THREADLESS_PREFIX):
        return
    await sync_to_async(_reset_and_close)()


def _reset_and_close() -> None:
    reset_queries()
    close_old_connections()


def close_old_connections_off_loop(**kwargs: Any) -> None:
    """Django's request_finished receiver `close_old_connections`, except on
    the event loop's thread: an API request's answer is closed there, and the
    loop's thread holds no request's connection (the API's go through
    core/db_thread.py), while touching one there would be async-unsafe."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # a thread of its own (the admin's request): Django's way
        close_old_connections(**kwargs)


def keep_request_started_off_api() -> None:
    """Swap Django's sync request_started receivers for the async one above,
    and request_finished's `close_old_connections` for the one that skips
    the loop's thread (once, before the server runs)."""
    signals.request_started.disconnect(reset_queries)
    signals.request_started.disconnect(close_old_connections)
    signals.request_started.connect(request_started_outside_api, weak=False)
    signals.request_finished.disconnect(close_old_connections)
    signals.request_finished.connect(close_old_connections_off_loop, weak=False)


# --- 5. a middleware chain outside Django's handler --------------------------------------


class MiddlewareChain:
    """Django middleware (dotted paths, outermost first) around `get_response`,
    for an async middleware that runs them for some requests only. Each class
    must be async-capable (MiddlewareMixin is); a hook other than the
    request/response call and `process_view` would not run (Django's admin
    middleware has none)."""

    def __init__(self, names: Sequence[str], get_response: Callable) -> None:
        chain = get_response
        view_checks: list[Callable] = []
        for name in reversed(names):
            chain = import_string(name)(chain)
            if hasattr(chain, "process_view"):
                view_checks.insert(0, chain.process_view)
        self.chain = chain
        self.view_checks = view_checks

    async def __call__(self, request: HttpRequest) -> HttpResponseBase:
        return await self.chain(request)

    async def process_view(self, request: HttpRequest, view: Any, args: tuple, kwargs: dict) -> HttpResponseBase | None:
        """The chain's `process_view` hooks in order, as Django's handler runs
        them between URL resolution and the view; the first answer wins."""
        for check in self.view_checks:
            response = await sync_to_async(check)(request, view, args, kwargs)
            if response is not None:
                return response
        return None


# --- 9. a response's close -----------------------------------------------------------------


def close_with(response: HttpResponseBase, callback: Callable[[], object]) -> None:
    """Have `callback` run when `response` is closed, which Django's handler
    (and `handle_api`) always does once the answer is sent or abandoned, even
    for a stream that never started. It joins the response's own closers
    (`_resource_closers`, how `FileResponse` closes its file), which `close()`
    runs once each, swallowing their errors."""
    response._resource_closers.append(callback)
