"""The demo site's sign-in, which stops at a checkpoint a script cannot pass
alone: a code "sent to the inbox", shown on a separate page of the site.

It is what `demo/sign-in` asks a person for (`ctx.ask_human`): the person
reads the code on the inbox page in their own browser and types it into the
checkpoint on the worker's page, through its live view.

One account (`accounts.SECURE_HANDLE`) signs in instead on
`/demo/sign-in/password/` with its password and a one-time code from an
authenticator, checked against the site's own clock: what `demo/sign-in`
passes without a person, from one of the persona's credentials.

The pending codes live in the worker's memory (its runtime's `demo_codes`),
at most MAX_PENDING (the oldest dropped), each for CODE_TTL_S and MAX_TRIES
wrong tries; a right code is used up and sets a cookie that says who is
signed in.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

import pyotp
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from core.runtime import runtime_of
from demo_site import accounts
from demo_site.views import demo_view, page

MAX_PENDING = 1000
CODE_TTL_S = 600
MAX_TRIES = 5
COOKIE = "demo_signed_in"


@dataclass
class Pending:
    code: str
    expires_at: float
    wrong: int = 0


class SignInCodes:
    """The codes sent and not used yet, by handle, oldest first."""

    def __init__(self) -> None:
        self.pending: OrderedDict[str, Pending] = OrderedDict()

    def current(self, handle: str) -> Pending | None:
        held = self.pending.get(handle)
        if held is not None and time.time() >= held.expires_at:
            del self.pending[handle]
            return None
        return held

    def send_code(self, handle: str) -> None:
        self.pending.pop(handle, None)
        self.pending[handle] = Pending(code=f"{secrets.randbelow(10**6):06d}", expires_at=time.time() + CODE_TTL_S)
        while len(self.pending) > MAX_PENDING:
            self.pending.popitem(last=False)


def codes_of(request: HttpRequest) -> SignInCodes:
    return runtime_of(request).demo_codes


@demo_view(methods=("GET", "HEAD", "POST"))
async def sign_in(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return page("sign_in.html", {})
    handle = request.POST.get("handle", "").strip().lower()
    if not accounts.exists(handle):
        return page("sign_in.html", {"handle": handle, "error": "No account has that handle."}, status=404)
    codes_of(request).send_code(handle)
    return HttpResponseRedirect(reverse("demo:check-point", args=[handle]), status=303)


@demo_view(methods=("GET", "HEAD", "POST"))
async def check_point(request: HttpRequest, handle: str) -> HttpResponse:
    codes = codes_of(request)
    held = codes.current(handle) if accounts.exists(handle) else None
    if held is None:
        return page("check_point.html", {"handle": handle, "expired": True}, status=404)
    if request.method != "POST":
        return page("check_point.html", {"handle": handle})
    if not secrets.compare_digest(request.POST.get("code", "").strip().encode(), held.code.encode()):
        held.wrong += 1
        if held.wrong >= MAX_TRIES:
            del codes.pending[handle]
            return page("check_point.html", {"handle": handle, "expired": True}, status=403)
        return page("check_point.html", {"handle": handle, "error": "That code is not right."}, status=403)
    del codes.pending[handle]
    signed_in = HttpResponseRedirect(reverse("demo:signed-in"), status=303)
    signed_in.set_cookie(COOKIE, handle, path="/demo/", httponly=True, samesite="Lax")
    return signed_in


@demo_view(methods=("GET", "HEAD", "POST"))
async def password_sign_in(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return page("password_sign_in.html", {})
    handle = request.POST.get("username", "").strip().lower()
    password_right = secrets.compare_digest(
        request.POST.get("password", "").encode(), accounts.SECURE_PASSWORD.encode()
    ) and handle == accounts.SECURE_HANDLE
    code_right = pyotp.TOTP(accounts.SECURE_TOTP_SECRET).verify(request.POST.get("code", "").strip(), valid_window=1)
    if not (password_right and code_right):
        error = "That password is not right." if not password_right else "That code is not right, or no longer."
        return page("password_sign_in.html", {"username": handle, "error": error}, status=403)
    signed_in = HttpResponseRedirect(reverse("demo:signed-in"), status=303)
    signed_in.set_cookie(COOKIE, handle, path="/demo/", httponly=True, samesite="Lax")
    return signed_in


@demo_view()
async def mail_inbox(request: HttpRequest, handle: str) -> HttpResponse:
    if not accounts.exists(handle):
        return page("mail_inbox.html", {"handle": handle, "missing": True}, status=404)
    held = codes_of(request).current(handle)
    return page("mail_inbox.html", {"handle": handle, "code": held.code if held else None})


@demo_view()
async def signed_in(request: HttpRequest) -> HttpResponse:
    handle = request.COOKIES.get(COOKIE, "")
    if not accounts.exists(handle):
        return HttpResponseRedirect(reverse("demo:sign-in"), status=303)
    return page("signed_in.html", {"handle": handle})
