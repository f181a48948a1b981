"""The demo site's pages: an index, profiles and an infinitely scrolling
following list, with the JSON endpoint that list's script calls; a CSV export
of that list (a download, for `web/download`) and a profile-photo form (a
file input, for `web/upload`).

They need no key (they are not under /api/v1) and no database. The whole site
answers 404 when `PENELOPE_DEMO` is off; the setting is read on each request,
so a test can switch it with `override_settings`.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

from demo_site import accounts

# The accounts the index page introduces; `ghost` shows a missing account.
FEATURED = ("alice", "bob", "carol", "dave", "erin")
PAGE_SIZE = 10
DEFAULT_DELAY_MS = 250
MAX_DELAY_MS = 10_000
MAX_COUNT = 100

DemoView = Callable[..., Awaitable[HttpResponse]]


class BadQuery(Exception):
    """A query parameter out of its range: answered with 400."""


def demo_view(view: DemoView | None = None, *, methods: tuple[str, ...] = ("GET", "HEAD")) -> Any:
    """Serve the view only while the demo site is on, for `methods` only
    (GET and HEAD unless said); answer 400 for a bad query parameter. Used
    bare (`@demo_view`) or with its methods (`@demo_view(methods=...)`)."""

    def wrap(view: DemoView) -> DemoView:
        @functools.wraps(view)
        async def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not settings.PENELOPE_DEMO:
                raise Http404("The demo site is off.")
            if request.method not in methods:
                shown = [method for method in methods if method != "HEAD"]
                said = f"Only {' and '.join(shown)} {'is' if len(shown) == 1 else 'are'} allowed here."
                return HttpResponse(said, status=405, headers={"Allow": ", ".join(methods)})
            try:
                return await view(request, *args, **kwargs)
            except BadQuery as error:
                return HttpResponse(str(error), status=400, content_type="text/plain; charset=utf-8")

        return wrapper

    return wrap(view) if view is not None else wrap


def query_int(request: HttpRequest, name: str, *, default: int, low: int, high: int) -> int:
    raw = request.GET.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadQuery(f"{name} must be a whole number.") from None
    if not low <= value <= high:
        raise BadQuery(f"{name} must be between {low} and {high}.")
    return value


def page(template: str, context: dict[str, Any], status: int = 200) -> HttpResponse:
    # No request is passed: the demo pages need no context processors (and so
    # never touch the session or the database from this async view).
    return HttpResponse(render_to_string(f"demo_site/{template}", context), status=status)


def missing(handle: str) -> HttpResponse:
    shown = handle if accounts.valid_handle(handle) else None
    return page("missing.html", {"handle": shown}, status=404)


@demo_view
async def index(request: HttpRequest) -> HttpResponse:
    featured = [accounts.account(handle) for handle in FEATURED]
    return page("index.html", {"featured": [a for a in featured if a is not None], "missing_handle": "ghost"})


@demo_view
async def profile(request: HttpRequest, handle: str) -> HttpResponse:
    account = accounts.account(handle)
    if account is None:
        return missing(handle)
    return page("profile.html", {"account": account})


@demo_view
async def following_page(request: HttpRequest, handle: str) -> HttpResponse:
    """The first ten entries; the page's script loads ten more, after
    `delay_ms`, each time a scroll reaches the bottom."""
    account = accounts.account(handle)
    if account is None:
        return missing(handle)
    delay_ms = query_int(request, "delay_ms", default=DEFAULT_DELAY_MS, low=0, high=MAX_DELAY_MS)
    entries = entries_of(account, 0, PAGE_SIZE)
    return page(
        "following.html",
        {"account": account, "entries": entries, "delay_ms": delay_ms, "page_size": PAGE_SIZE},
    )


@demo_view
async def following_json(request: HttpRequest, handle: str) -> HttpResponse:
    """`{"handle", "total", "offset", "entries": [{"handle", "name"}], "next_offset"}`;
    `next_offset` is null at the end of the list."""
    account = accounts.account(handle)
    if account is None:
        return JsonResponse({"error": f"Account {handle[:40]} does not exist."}, status=404)
    offset = query_int(request, "offset", default=0, low=0, high=accounts.MAX_FOLLOWING)
    count = query_int(request, "count", default=PAGE_SIZE, low=1, high=MAX_COUNT)
    entries = entries_of(account, offset, count)
    end = offset + len(entries)
    return JsonResponse(
        {
            "handle": account.handle,
            "total": account.following,
            "offset": offset,
            "entries": entries,
            "next_offset": end if end < account.following else None,
        }
    )


@demo_view
async def following_csv(request: HttpRequest, handle: str) -> HttpResponse:
    """The whole following list as a CSV file, served as a download."""
    account = accounts.account(handle)
    if account is None:
        return missing(handle)
    rows = ["handle,name"] + [f"{h},{accounts.display_name(h)}" for h in accounts.following(account, 0, account.following)]
    response = HttpResponse("\n".join(rows) + "\n", content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{account.handle}-following.csv"'
    return response


@demo_view
async def photo(request: HttpRequest, handle: str) -> HttpResponse:
    """A profile-photo form: its file input shows the chosen file's name, size
    and SHA-256, computed in the page from the bytes the browser hands it."""
    account = accounts.account(handle)
    if account is None:
        return missing(handle)
    return page("photo.html", {"account": account})


def entries_of(account: accounts.Account, offset: int, count: int) -> list[dict[str, str]]:
    return [
        {"handle": handle, "name": accounts.display_name(handle)}
        for handle in accounts.following(account, offset, count)
    ]
