"""The ASGI application daphne serves: HTTP through Django (the API, the
admin, the demo site), WebSockets through channels (the event stream, the
live view of a page, CDP clients). `serve` builds it around its runtime, which every
request and socket finds in its scope (core/runtime.py)."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "penelope_site.settings")

import django  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

django.setup(set_prefix=False)  # first: the handler and the consumers read settings and apps

from core.seams import ThreadlessApiHandler, keep_request_started_off_api  # noqa: E402

# An API request gets no thread of its own and no hop to one before its view
# (core/seams/ says what each replaces of Django, and what it saves).
keep_request_started_off_api()

from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path, re_path  # noqa: E402

from cdp.sockets import cdp_socket  # noqa: E402
from core.runtime import with_runtime  # noqa: E402
from jobs.sockets import EventStream  # noqa: E402
from live.sockets import LiveSocket  # noqa: E402


class NoSocket(AsyncWebsocketConsumer):
    """Any other WebSocket path: refused at the handshake."""

    async def connect(self) -> None:
        await self.close()


def build_application(runtime: object) -> object:
    """The worker's application, serving `runtime`."""
    routes = ProtocolTypeRouter(
        {
            # The admin's CSS and scripts come from the apps themselves; no collectstatic.
            "http": ASGIStaticFilesHandler(ThreadlessApiHandler()),
            "websocket": URLRouter(
                [
                    path("api/v1/events", EventStream.as_asgi()),
                    path("live/<str:token>/ws", LiveSocket.as_asgi()),
                    path("cdp/<str:token>", cdp_socket),
                    re_path(r"", NoSocket.as_asgi()),
                ]
            ),
        }
    )
    return with_runtime(routes, runtime)
