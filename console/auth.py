"""Who may look at the console: a person signed in with the waker's key (a
session cookie), or a script sending it as `Authorization: Bearer`.

The cookie holds a random session id signed with a key derived from the
waker's key, and the time it was signed: it is `HttpOnly` (no script reads
it), `SameSite=Strict` (no other site's page sends it) and expires after
CONSOLE_SESSION_S. Changing the waker's key signs everybody out. A form
that changes something carries a token derived from the session (`csrf`),
checked before the change; a Bearer request is no browser's, and needs none.
A wrong key, by form or by Bearer, waits its turn for its refusal, by the
rule of every route that takes a key (core/wrong_keys.py).

The cookie is `Secure` when the request came over HTTPS: to the waker
itself, or to a TLS-terminating proxy that says so in the header
PROXY_SSL_HEADER names (Django's SECURE_PROXY_SSL_HEADER, which
`request.is_secure()` reads). No such header is trusted unless it is set:
any client can send one.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.core import signing
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from core.api import status_of
from core.wrong_keys import KeyFlood, WrongKeys, address_of
from waker.api import WAKER_KEY_REQUIRED, bearer_matches

COOKIE = "penelope_console"
COOKIE_PATH = "/console/"
SALT = "penelope.console.session"


@dataclass(frozen=True)
class Visitor:
    """Who is asking: a session's id, or None for a Bearer script."""

    session: str | None
    address: str

    @property
    def who(self) -> str:
        """As the audit line names them: never the key, never the whole session id."""
        return f"session {self.session[:8]}" if self.session else "bearer"

    @property
    def csrf(self) -> str:
        return csrf_token(self.session) if self.session else ""


def derived(purpose: str) -> str:
    return hmac.new(settings.WAKER_KEY.encode(), f"penelope console {purpose}".encode(), hashlib.sha256).hexdigest()


def signer() -> signing.TimestampSigner:
    return signing.TimestampSigner(key=derived("session"), salt=SALT)


def csrf_token(session: str) -> str:
    return hmac.new(derived("csrf").encode(), session.encode(), hashlib.sha256).hexdigest()


def key_matches(given: str) -> bool:
    return bool(settings.WAKER_KEY) and hmac.compare_digest(given.strip().encode(), settings.WAKER_KEY.encode())


def session_of(request: HttpRequest) -> str | None:
    cookie = request.COOKIES.get(COOKIE)
    if not cookie:
        return None
    try:
        return signer().unsign(cookie, max_age=settings.CONSOLE_SESSION_S)
    except signing.BadSignature:  # a forged, stale or old-key cookie
        return None


def sign_in(response: HttpResponse, request: HttpRequest) -> HttpResponse:
    """Give `response` a new session's cookie."""
    response.set_cookie(
        COOKIE,
        signer().sign(secrets.token_hex(16)),
        max_age=int(settings.CONSOLE_SESSION_S),
        path=COOKIE_PATH,
        secure=request.is_secure(),
        httponly=True,
        samesite="Strict",
    )
    return response


def sign_out(response: HttpResponse) -> HttpResponse:
    response.delete_cookie(COOKIE, path=COOKIE_PATH, samesite="Strict")
    return response


def csrf_ok(request: HttpRequest, visitor: Visitor) -> bool:
    """A Bearer request, or a form that carries its session's token."""
    if visitor.session is None:
        return True
    return hmac.compare_digest(request.POST.get("csrf", "").encode(), visitor.csrf.encode())


Page = Callable[..., Awaitable[HttpResponse]]


def console_page(
    guard: Callable[[], WrongKeys], *, refused: Callable[[HttpRequest, int, str], HttpResponse], bearer_only: bool = False
) -> Callable[[Page], Page]:
    """Wrap a console view: a session or the Bearer key, else the sign-in
    page (a browser) or 401 (a script with a wrong key, after its turn; or
    with none, on the API: `bearer_only`), or 429 (an address whose wrong
    keys wait too many turns). The view gets the `Visitor` after the request."""

    def decorate(view: Page) -> Page:
        @functools.wraps(view)
        async def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            address = address_of(request)
            authorization = request.headers.get("Authorization")
            if authorization is None and bearer_only:
                return refused(request, 401, WAKER_KEY_REQUIRED)
            if authorization is not None:
                try:
                    right = await guard().check(address, lambda: bearer_matches(authorization, settings.WAKER_KEY))
                except KeyFlood as flood:
                    return too_many(refused(request, status_of(flood), flood.message), flood)
                if not right:
                    return refused(request, 401, WAKER_KEY_REQUIRED)
                return await view(request, Visitor(None, address), *args, **kwargs)
            session = session_of(request)
            if session is None:
                if request.method != "GET":
                    return refused(request, 403, "Sign in first: this session has ended.")
                return HttpResponseRedirect("/console/sign-in?" + urlencode({"next": request.get_full_path()}))
            return await view(request, Visitor(session, address), *args, **kwargs)

        return wrapper

    return decorate


def too_many(response: HttpResponse, flood: KeyFlood) -> HttpResponse:
    """`response` (a flood's 429) with its Retry-After."""
    response["Retry-After"] = str(flood.retry_after_s)
    return response


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a console path only, never another site."""
    if target and target.startswith(COOKIE_PATH) and "//" not in target and "\\" not in target:
        return target
    return COOKIE_PATH
