"""The ASGI application daphne serves: HTTP through Django (the API, the
admin, the demo site), WebSockets through channels (the event stream)."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "penelope_site.settings")

import django  # noqa: E402
from asgiref.sync import sync_to_async  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402
from django.core import signals  # noqa: E402
from django.core.handlers.asgi import ASGIHandler  # noqa: E402
from django.db import close_old_connections, reset_queries  # noqa: E402

django.setup(set_prefix=False)  # first: the handler and the consumers read settings and apps


class Handler(ASGIHandler):
    """Django's ASGI handler, without a thread of its own for each API request.

    Django opens a `ThreadSensitiveContext` per request, so that the request's
    sync code (its signals, closing its response, a sync view) runs on a
    thread of its own, started for that request. The API's views are async
    and reach the database only through the worker's database thread
    (core/db_thread.py), so an API request's few sync steps run on asgiref's
    one shared thread instead; starting a thread was a tenth of the event
    loop's time in a job's round trip (docs/BENCHMARKS.md). The admin, whose
    views are sync, keeps Django's way.
    """

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"].startswith("/api/"):
            await self.handle(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)


async def request_started(sender, scope=None, **kwargs) -> None:
    """Django's own request_started receivers, for the requests that may use
    the database from their thread (the admin's): an API request has no
    connection in any request thread to close, and skipping them spares it a
    hop to a thread before its view runs."""
    if scope is not None and scope.get("path", "").startswith("/api/"):
        return
    await sync_to_async(reset_queries)()
    await sync_to_async(close_old_connections)()


signals.request_started.disconnect(reset_queries)
signals.request_started.disconnect(close_old_connections)
signals.request_started.connect(request_started, weak=False)

http_application = Handler()

from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path, re_path  # noqa: E402

from core.sockets import EventStream  # noqa: E402


class NoSocket(AsyncWebsocketConsumer):
    """Any other WebSocket path: refused at the handshake."""

    async def connect(self) -> None:
        await self.close()


application = ProtocolTypeRouter(
    {
        # The admin's CSS and scripts come from the apps themselves; no collectstatic.
        "http": ASGIStaticFilesHandler(http_application),
        "websocket": URLRouter([path("api/v1/events", EventStream.as_asgi()), re_path(r"", NoSocket.as_asgi())]),
    }
)
