"""Django's session, CSRF, authentication and messages middleware for the
admin alone.

They are sync middleware: each one run on an async request is a hop to a
thread and back. The API (a bearer key, no cookies) needs none of them, so
`AdminOnly` runs the chain in ADMIN_MIDDLEWARE for paths under ADMIN_PREFIX
and hands every other request straight on. CSRF's view check, which Django
runs between URL resolution and the view, is forwarded for admin paths too.
Paths are matched on `path_info`, the path below the root path: through the
waker the admin's `request.path` is `/w/{persona}/admin/...` (its root path,
penelope_site/asgi.py), and URLs are resolved on `path_info` too, so the
chain runs for exactly the requests the admin's views answer.
Running Django middleware outside Django's handler is a framework seam
(core/seams/, `MiddlewareChain`).
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import markcoroutinefunction
from django.conf import settings
from django.http import HttpRequest, HttpResponseBase

from core.db_thread import admin_request
from core.seams import MiddlewareChain

ADMIN_PREFIX = "/admin/"


class AdminOnly:
    async_capable = True
    sync_capable = False

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response
        self.admin = MiddlewareChain(settings.ADMIN_MIDDLEWARE, get_response)
        markcoroutinefunction(self)

    async def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if request.path_info.startswith(ADMIN_PREFIX):
            marked = admin_request.set(True)  # its database connections are expected (core/db_thread.py)
            try:
                return await self.admin(request)
            finally:
                admin_request.reset(marked)
        return await self.get_response(request)

    async def process_view(self, request: HttpRequest, view: Any, args: tuple, kwargs: dict) -> HttpResponseBase | None:
        if not request.path_info.startswith(ADMIN_PREFIX):
            return None
        return await self.admin.process_view(request, view, args, kwargs)
