"""A persona's Django admin through the waker: `/w/{persona}/admin/...`, and
the static files its pages load, `/w/{persona}/static/...`, forwarded by
waker/proxy.py as it forwards the API, with two differences. No key: the
admin signs in its own users (the Django users of the worker's store). And
no wake: a request without a key never starts a worker (as with a live
link), so a worker that is not running answers `Asleep`, a page that says
where it is started.

The worker writes the prefix into the URLs of its pages itself (links, form
actions, redirects, static files): the waker asks for the admin page at its
full path, `/w/{persona}/admin/...`, and names the prefix in the
`Daphne-Root-Path` request header, which daphne gives Django as the ASGI
root_path, its SCRIPT_NAME (penelope_site/asgi.py keeps it for admin pages
alone). On the way back the waker moves each cookie's Path under the
persona's prefix (nginx's `proxy_cookie_path`), so two personas' admins on
one waker keep their own session and CSRF cookies. The client's Host goes
to the worker too, so the CSRF check of a sign-in over plain HTTP finds the
browser's Origin to be the host the worker was asked on.
"""

from __future__ import annotations

import html
import re

from waker.asgi_parts import Send, WakerRefusal
from waker.persona_worker import RUNNING, PersonaWorker

# The worker's admin (penelope_site/urls.py), and where the worker serves its
# static files (STATIC_URL "static/" under the root, penelope_site/asgi.py).
ADMIN_PREFIX = "/admin/"
STATIC_PREFIX = "/static/"
# What the admin's pages send: links and searches, and its forms (sign-in,
# sign-out, a schedule's change, an action); any other method answers 405 here.
ADMIN_METHODS = ("GET", "HEAD", "POST")
STATIC_METHODS = ("GET", "HEAD")
ROOT_PATH_HEADER = b"daphne-root-path"
# A Set-Cookie's Path attribute (RFC 6265, 5.2.4): one that is not a path
# is ignored by the browser, so it is left alone here too.
COOKIE_PATH = re.compile(rb";\s*path\s*=\s*(/[^;]*)", re.IGNORECASE)


def is_admin_path(path: str) -> bool:
    """Whether `path` (below `/w/{persona}`, decoded) is the admin's or its static files'."""
    return path.startswith(ADMIN_PREFIX) or path.startswith(STATIC_PREFIX)


class Asleep(WakerRefusal):
    """A keyless request for the admin of a worker that is not running: 503,
    and a short page for the person who followed the link."""

    def __init__(self, worker: PersonaWorker):
        name, state = worker.persona.name, worker.state
        super().__init__(
            503,
            f"Persona {name} is asleep (its worker is {state}), and its admin never wakes it: start it from "
            f"the console, /console/p/{name}/, or with POST /api/v1/personas/{name}/start, then reload this page.",
        )
        self.name, self.state = name, state

    async def answer(self, send: Send) -> None:
        name, state = html.escape(self.name), html.escape(self.state)
        body = (
            f'<!doctype html>\n<meta charset="utf-8">\n<title>{name} is asleep</title>\n'
            f"<p>Persona {name} is asleep (its worker is {state}), and its admin never wakes it.</p>\n"
            f'<p>Start it from the console, <a href="/console/p/{name}/">/console/p/{name}/</a>, or with '
            f"<code>POST /api/v1/personas/{name}/start</code> (the waker's key), then reload this page.</p>\n"
        ).encode()
        headers = [
            (b"content-type", b"text/html; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", b"no-store"),
        ]
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})


def refuse_unless_running(worker: PersonaWorker) -> None:
    """Asleep unless the worker runs: nothing here starts one."""
    if worker.state != RUNNING:
        raise Asleep(worker)


def check(worker: PersonaWorker, method: str, path: str) -> None:
    """WakerRefusal (405) for a method the admin does not send, Asleep (503) for
    a worker that is not running; before anything is forwarded."""
    allowed = ADMIN_METHODS if path.startswith(ADMIN_PREFIX) else STATIC_METHODS
    if method not in allowed:
        raise WakerRefusal(
            405, f"Method {method} is not allowed here; use {' or '.join(allowed)}.", allow=", ".join(allowed)
        )
    refuse_unless_running(worker)


def root_path(mount: str, path: str) -> str:
    """The root path the worker is to write into an admin page's URLs:
    `mount` (`/w/{persona}`), which the worker's path then begins with too,
    as the ASGI spec has it and Django 5.2 reads it (`ASGIRequest.path` is
    the scope's path, `path_info` that path less the root path). Empty for a
    static file: it writes no URL, and the worker serves it from its own path."""
    return mount if path.startswith(ADMIN_PREFIX) else ""


def request_headers(
    forwarded: list[tuple[bytes, bytes]], client_headers: list[tuple[bytes, bytes]], root_path: str
) -> list[tuple[bytes, bytes]]:
    """The headers for the worker: those forwarded anyway, the client's own
    Host (for the CSRF check, which compares it with the Origin), and, for
    an admin page, its root path. A `Daphne-Root-Path` the client sent never
    gets here: the waker's own daphne took it (into the waker's scope, which
    the proxy does not read)."""
    headers = forwarded + [(key, value) for key, value in client_headers if key == b"host"][:1]
    if root_path:
        headers.append((ROOT_PATH_HEADER, root_path.encode()))
    return headers


def cookies_under(headers: list[tuple[bytes, bytes]], mount: str) -> list[tuple[bytes, bytes]]:
    """The answer's headers with each Set-Cookie's Path under `mount`
    (`/w/{persona}`): `Path=/` becomes `Path=/w/{persona}/`."""
    prefix = mount.encode()
    return [
        (key, COOKIE_PATH.sub(lambda found: b"; Path=" + prefix + found.group(1).rstrip(), value))
        if key == b"set-cookie"
        else (key, value)
        for key, value in headers
    ]
