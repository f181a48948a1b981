"""The ASGI application daphne serves: HTTP through Django (the API, the
admin, the demo site), WebSockets through channels (the event stream, the
live view of a page, CDP clients). `serve` builds it around its runtime, which every
request and socket finds in its scope (core/runtime.py)."""

import os
import re

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "penelope_site.settings")

import django  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

django.setup(set_prefix=False)  # first: the handler and the consumers read settings and apps

from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path, re_path  # noqa: E402

from cdp.sockets import cdp_socket  # noqa: E402
from core.auth import ADMIN_PREFIX  # noqa: E402
from core.runtime import with_runtime  # noqa: E402
from core.seams import ThreadlessApiHandler  # noqa: E402
from jobs.sockets import EventStream  # noqa: E402
from live.sockets import LiveSocket  # noqa: E402


class NoSocket(AsyncWebsocketConsumer):
    """Any other WebSocket path: refused at the handshake."""

    async def connect(self) -> None:
        await self.close()


# A root path of plain segments (`/w/alice`): never `//host`, which a
# redirect written under it would take to another site.
ROOT_PATH = re.compile(r"(?:/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)+")


def root_path_for_the_admin_only(application: object) -> object:
    """`application`, with the ASGI root_path kept for admin pages alone.

    Daphne sets root_path from a `Daphne-Root-Path` request header, and Django
    takes it as SCRIPT_NAME: the prefix of every URL it writes (reverse(),
    redirects, static URLs); URLs resolve on `path_info`, the scope's path
    less the root path. The waker asks for `/w/{persona}/admin/...` with
    `/w/{persona}` as the root path (waker/admin_forward.py). Any client that
    reaches the worker can send the header too, so it is not trusted for
    anything that matters: it is kept only for an admin page whose path
    begins with it, a root path of plain segments, where all it changes is
    the URLs written into that client's own answer (the admin's sign-in,
    CSRF check and permissions do not read it). Everywhere else (the API,
    whose routes, accounting and request log read the path as it came; the
    static files; live pages; sockets) it is dropped, so a request is
    routed, counted and logged as it was without it."""

    async def serve(scope: dict, receive: object, send: object) -> None:
        root_path = scope.get("root_path")
        if root_path and not (
            scope["type"] == "http"
            and ROOT_PATH.fullmatch(root_path)
            and scope["path"].startswith(root_path + ADMIN_PREFIX)
        ):
            scope["root_path"] = ""  # daphne's scope for this request alone; no copy
        await application(scope, receive, send)

    return serve


def build_application(runtime: object) -> object:
    """The worker's application, serving `runtime`."""
    routes = ProtocolTypeRouter(
        {
            # The admin's CSS and scripts come from the apps themselves; no collectstatic.
            # An API request gets no thread of its own and no hop to one before its
            # view (docs/design/SEAMS.md says what it replaces of Django, and what it saves).
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
    return with_runtime(root_path_for_the_admin_only(routes), runtime)
