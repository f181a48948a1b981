"""The demo site's sign-in, which stops at a checkpoint a script cannot pass
alone: a code "sent to the inbox", shown on a separate page of the site.

It is what `demo/sign-in` asks a person for (`ctx.ask_human`): the person
reads the code on the inbox page in their own browser and types it into the
checkpoint on the worker's page, through its live view.

The pending codes live in this process's memory, at most MAX_PENDING (the
oldest dropped), each for CODE_TTL_S and MAX_TRIES wrong tries; a right
code is used up and sets a cookie that says who is signed in.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

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


pending: OrderedDict[str, Pending] = OrderedDict()


def current(handle: str) -> Pending | None:
    held = pending.get(handle)
    if held is not None and time.time() >= held.expires_at:
        del pending[handle]
        return None
    return held


def send_code(handle: str) -> None:
    pending.pop(handle, None)
    pending[handle] = Pending(code=f"{secrets.randbelow(10**6):06d}", expires_at=time.time() + CODE_TTL_S)
    while len(pending) > MAX_PENDING:
        pending.popitem(last=False)


@demo_view(methods=("GET", "HEAD", "POST"))
async def sign_in(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return page("sign_in.html", {})
    handle = request.POST.get("handle", "").strip().lower()
    if not accounts.exists(handle):
        return page("sign_in.html", {"handle": handle, "error": "No account has that handle."}, status=404)
    send_code(handle)
    return HttpResponseRedirect(reverse("demo:check-point", args=[handle]), status=303)


@demo_view(methods=("GET", "HEAD", "POST"))
async def check_point(request: HttpRequest, handle: str) -> HttpResponse:
    held = current(handle) if accounts.exists(handle) else None
    if held is None:
        return page("check_point.html", {"handle": handle, "expired": True}, status=404)
    if request.method != "POST":
        return page("check_point.html", {"handle": handle})
    if not secrets.compare_digest(request.POST.get("code", "").strip().encode(), held.code.encode()):
        held.wrong += 1
        if held.wrong >= MAX_TRIES:
            del pending[handle]
            return page("check_point.html", {"handle": handle, "expired": True}, status=403)
        return page("check_point.html", {"handle": handle, "error": "That code is not right."}, status=403)
    del pending[handle]
    signed_in = HttpResponseRedirect(reverse("demo:signed-in"), status=303)
    signed_in.set_cookie(COOKIE, handle, path="/demo/", httponly=True, samesite="Lax")
    return signed_in


@demo_view()
async def mail_inbox(request: HttpRequest, handle: str) -> HttpResponse:
    if not accounts.exists(handle):
        return page("mail_inbox.html", {"handle": handle, "missing": True}, status=404)
    held = current(handle)
    return page("mail_inbox.html", {"handle": handle, "code": held.code if held else None})


@demo_view()
async def signed_in(request: HttpRequest) -> HttpResponse:
    handle = request.COOKIES.get(COOKIE, "")
    if not accounts.exists(handle):
        return HttpResponseRedirect(reverse("demo:sign-in"), status=303)
    return page("signed_in.html", {"handle": handle})
