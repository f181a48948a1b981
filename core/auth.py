"""Who a request is, and what it may see: the bearer keys and their two
roles, what a read key is not shown, and the admin's own middleware.

The keys have one constant-time check, used by the DRF authentication class
that refuses a request and by the activity gate that decides whether a
request counts as a client's.

Two roles. A full key (PENELOPE_KEY; two, separated by a space, during a
rotation, both working, the first signing X-Penelope-Signature) may do
anything. A read key (PENELOPE_READ_KEYS) may read: polls and long-polls,
the job list, pages, events, metrics, media links, activity, workload and
the schema; a start, a call, a cancel, a lease, a page change or a
schedule's change answers 403, naming what was refused. A dashboard or a
monitor then never holds a key that can point webhooks anywhere.

What a read key is not shown (nor the logs): a URL's credentials, and the
values a plugin marks secret in its results. A webhook or notification URL
may carry its receiver's credentials in its user-info or its query string:
the logs, and a read key's answers, show it by `url_for_log`. A result's
secret values (a cookie's value, a token) are named by paths that a plugin
action declares (`secret=` of `plugins.framework.Family.action`); a read
key's answers show `HIDDEN` in their place (`hide_paths`). Both are plain
functions of what they are given, so the poll, the job list and the event
sockets apply the same rules.

The admin signs in the other way: with Django's session, CSRF,
authentication and messages middleware, which run for the admin alone
(`AdminOnly`). They are sync middleware: each one run on an async request is
a hop to a thread and back. The API (a bearer key, no cookies) needs none of
them, so `AdminOnly` runs the chain in ADMIN_MIDDLEWARE for paths under
ADMIN_PREFIX and hands every other request straight on. CSRF's view check,
which Django runs between URL resolution and the view, is forwarded for
admin paths too. Paths are matched on `path_info`, the path below the root
path: through the waker the admin's `request.path` is
`/w/{persona}/admin/...` (its root path, penelope_site/asgi.py), and URLs
are resolved on `path_info` too, so the chain runs for exactly the requests
the admin's views answer. Running Django middleware outside Django's handler
is a framework seam (core/seams/, `MiddlewareChain`)."""

from __future__ import annotations

import hmac
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from asgiref.sync import markcoroutinefunction
from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import BasePermission

from core.api import REALM
from core.db_thread import admin_request
from core.seams import MiddlewareChain, django_request_of

ADMIN_PREFIX = "/admin/"
KEY_REQUIRED = "A valid key is required: send Authorization: Bearer <PENELOPE_KEY>."
# A read key's 403 for a request whose view does not say what it does.
READ_ONLY = (
    "This key may only read (PENELOPE_READ_KEYS): starting a job, calling a plugin or a primitive, "
    "cancelling or forgetting a job, leases and page changes need the worker's key."
)
FULL, READ = "full", "read"
READ_METHODS = frozenset({"GET", "HEAD"})


def read_only(what: str | None) -> str:
    """A read key's 403 sentence, naming what the request would have done
    (`what`: "creating a schedule"), or every kind of act when unsaid."""
    if what is None:
        return READ_ONLY
    return f"This key may only read (PENELOPE_READ_KEYS): {what} needs the worker's key."


def full_keys() -> list[str]:
    """PENELOPE_KEY's keys: one, or two during a rotation (the first signs)."""
    return settings.PENELOPE_KEY.split()


def signing_key() -> str:
    """The key X-Penelope-Signature is keyed with: PENELOPE_KEY's first."""
    keys = full_keys()
    return keys[0] if keys else ""


def key_role(authorization: str) -> str | None:
    """FULL or READ for an Authorization header's bearer key, else None.
    Every key is compared, each in constant time, whichever matches."""
    scheme, _, given = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return None
    given_bytes = given.strip().encode(errors="replace")
    role = None
    for keys, name in ((settings.PENELOPE_READ_KEYS, READ), (full_keys(), FULL)):
        for key in keys:
            if hmac.compare_digest(given_bytes, key.encode()):
                role = name
    return role


def request_role(request: HttpRequest) -> str | None:
    """`key_role` of a request's Authorization header, checked once a request
    (the activity gate and DRF's authentication both ask)."""
    try:
        return request._penelope_key_role
    except AttributeError:
        role = request._penelope_key_role = key_role(request.META.get("HTTP_AUTHORIZATION", ""))
        return role


def key_matches(request: HttpRequest) -> bool:
    """Whether the request carries one of the worker's keys, full or read,
    compared in constant time. A worker without a key accepts none."""
    return request_role(request) is not None


def authorization_matches(authorization: str) -> bool:
    """`key_matches` for an Authorization header's value (an event socket's handshake)."""
    return key_role(authorization) is not None


class KeyHolder:
    """Whoever holds one of the worker's keys, and its role. It stands where
    DRF expects a user; there are no accounts on the API."""

    is_authenticated = True

    def __init__(self, role: str) -> None:
        self.role = role

    def __repr__(self) -> str:
        return f"KeyHolder({self.role})"


HOLDERS = {FULL: KeyHolder(FULL), READ: KeyHolder(READ)}


class BearerKey(BaseAuthentication):
    """A key in `Authorization: Bearer`. Without one the request is not
    authenticated (None), and `HasKey` answers 401 with `REALM`."""

    def authenticate(self, request: Any) -> tuple[KeyHolder, str] | None:
        role = request_role(django_request_of(request))
        return (HOLDERS[role], "bearer") if role else None

    def authenticate_header(self, request: Any) -> str:
        return REALM


class HasKey(BasePermission):
    """A key, and a full one for anything but a read: a read key may GET any
    route but a plugin call (`acts = True` on the view: a GET runs it). Its
    403 names what the request would have done, as the view says it
    (`what_it_does`, core/rest.py)."""

    message = KEY_REQUIRED

    def has_permission(self, request: Any, view: Any) -> bool:
        if request.auth is None:
            return False
        if request.user.role == READ and (request.method not in READ_METHODS or getattr(view, "acts", False)):
            what_it_does = getattr(view, "what_it_does", None)
            raise PermissionDenied(read_only(what_it_does(request) if what_it_does is not None else None))
        return True


# --- what a read key is not shown -------------------------------------------------------

# What a read key sees in place of a secret value, and in place of a URL's query string.
HIDDEN = "…"
# A path's segment that stands for every item of a list, or every value of an object.
EVERY = "*"

SecretPath = tuple[str, ...]


def url_for_log(url: str) -> str:
    """A callback URL as logs (and read keys) show it: without its user-info
    and its query string, which may carry a receiver's credentials (`…?…`
    says one was there), nor its fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, HIDDEN if parts.query else "", ""))


def secret_path(path: str) -> SecretPath:
    """A dotted path into a result (`token`, `session.token`,
    `cookies.*.value`), as the segments `hide_paths` follows. `*` is every
    item of a list or every value of an object. A mistake is the plugin
    author's, told when the family loads."""
    segments = tuple(path.split(".")) if isinstance(path, str) else ()
    if not segments or not all(segments):
        raise TypeError(f"A secret path is a dotted path into the result, like 'cookies.*.value'; got {path!r}.")
    return segments


def hide_paths(value: Any, paths: tuple[SecretPath, ...]) -> Any:
    """`value` with what each path names replaced by `HIDDEN`; `value` itself
    is left as it was (the parts on a path are copied). A path that names
    nothing in this value (an error's envelope, an item without the key)
    hides nothing."""
    for path in paths:
        value = _hide(value, path)
    return value


def _hide(value: Any, path: SecretPath) -> Any:
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        names = list(value) if head == EVERY else [head] if head in value else []
        if not names:
            return value
        copied = dict(value)
        for name in names:
            copied[name] = _hide(copied[name], rest) if rest else HIDDEN
        return copied
    if isinstance(value, list) and head == EVERY:
        return [_hide(item, rest) if rest else HIDDEN for item in value]
    return value


# --- the admin's own middleware ----------------------------------------------------------


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
