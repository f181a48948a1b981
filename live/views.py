"""`POST|DELETE /api/v1/{page_id}/live` (links) and `GET /live/<token>` (the page)."""

from __future__ import annotations

import secrets
import time
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from drf_spectacular.utils import extend_schema
from rest_framework import serializers

from browser.pages import validate_page_id
from browser.registry import pages_of
from browser.schema import PAGE_ID
from core.api import ApiError
from core.numbers import Seconds
from core.rest import ApiView, answer, known_only, validated
from core.runtime import runtime_of
from core.schema import BODY_ERRORS, operation, x_lease
from core.shapes import PageSuccess
from live.links import MAX_LINKS_PER_PAGE

MAX_LINK_TTL_S = 3600.0
DEFAULT_LINK_TTL_S = 900.0


class LiveParams(serializers.Serializer):
    ttl = Seconds(
        most=MAX_LINK_TTL_S, message=f"a live link's ttl is more than 0 and at most {MAX_LINK_TTL_S:g} seconds.",
        required=False, default=DEFAULT_LINK_TTL_S,
        help_text=f"Seconds the link works, more than 0 and at most {MAX_LINK_TTL_S:g}; default {DEFAULT_LINK_TTL_S:g}.",
    )
    control = serializers.BooleanField(
        required=False, default=False, help_text="true: the link's holder may click and type on the page; false: watch only."
    )

    def validate_control(self, control: bool) -> bool:
        if not isinstance(self.initial_data.get("control", False), bool):
            raise serializers.ValidationError("control is true or false.")
        return control


class LiveLinkMade(PageSuccess):
    url = serializers.CharField(help_text="`/live/<token>` on this worker: the page a person opens. The token is the credential.")
    expires_at = serializers.FloatField(help_text="Epoch seconds.")
    control = serializers.BooleanField()


class LiveLinksRevoked(PageSuccess):
    revoked = serializers.IntegerField(min_value=0, help_text="How many links were revoked.")


class PageLive(ApiView):
    does = {"POST": "making a live link", "DELETE": "revoking live links"}

    @extend_schema(
        **operation(
            operation_id="makeLiveLink",
            summary="Make a link to watch a page live, or to drive it",
            description=(
                "A one-time link to the page's live view. Anyone holding it can watch (and, with `control`, click "
                "and type on) this page until it expires, it is revoked, or the page closes; it never carries the "
                "key. A control link on a leased page needs the lease in X-Lease. Links live in memory: a restart "
                "revokes them. A read key makes none (403), so all of a page's links are the full key's."
            ),
            tags=["live"],
            parameters=[PAGE_ID, x_lease("For a control link on a leased page: its lease.")],
            request=LiveParams,
            answers={201: LiveLinkMade},
            errors={
                400: "`ttl` or `control` out of range, or a bad page id.",
                404: "The page is not open.",
                423: "A control link on a leased page without its lease.",
                429: f"The page holds {MAX_LINKS_PER_PAGE} links already.",
                **dict.fromkeys(BODY_ERRORS, ""),
            },
        )
    )
    async def post(self, request: Any, page_id: str) -> HttpResponse:
        params = validated(LiveParams, known_only(LiveParams, request.data, self.does["POST"]))
        validate_page_id(page_id)
        page = pages_of(request).get(page_id)
        lease = page.check_lease(request.headers.get("X-Lease")) if params["control"] else None
        made = runtime_of(request).links.create(page, ttl=params["ttl"], control=params["control"], lease=lease)
        if made is None:
            raise ApiError(429, f"Page {page_id} holds {MAX_LINKS_PER_PAGE} live links; revoke them or let some expire.", page_id)
        token, link = made
        body = {"success": True, "page_id": page_id, "url": f"/live/{token}",
                "expires_at": round(link.expires_at, 3), "control": link.control}
        return answer(LiveLinkMade, body, 201)

    @extend_schema(
        **operation(
            operation_id="revokeLiveLinks",
            summary="Revoke every live link of a page",
            description="Every link of the page stops working at once, and its open viewers are disconnected.",
            tags=["live"],
            parameters=[PAGE_ID],
            answers={200: LiveLinksRevoked},
            errors={400: "", 404: "The page is not open."},
        )
    )
    async def delete(self, request: Any, page_id: str) -> HttpResponse:
        validate_page_id(page_id)
        pages_of(request).get(page_id)
        revoked = runtime_of(request).links.revoke_page(page_id)
        return answer(LiveLinksRevoked, {"success": True, "page_id": page_id, "revoked": revoked})


def not_found() -> HttpResponse:
    return HttpResponse("Not found.", status=404, content_type="text/plain", headers={"Cache-Control": "no-store"})


async def live_page(request: HttpRequest, token: str) -> HttpResponse:
    """The live view: one HTML page with its script and style inline, under a
    Content-Security-Policy that allows nothing else (no other origin, no
    frame around it, no form, no plugin)."""
    if request.method not in ("GET", "HEAD"):
        return HttpResponse("Only GET is allowed here.", status=405, headers={"Allow": "GET, HEAD"})
    link = runtime_of(request).links.find(token)
    if link is None:
        return not_found()
    nonce = secrets.token_urlsafe(16)
    html = render_to_string(
        "live/page.html",
        {"nonce": nonce, "page_id": link.page_id, "control": link.control, "expires_in": max(0, link.expires_at - time.time())},
    )
    policy = (
        f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; img-src blob:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
    return HttpResponse(html, content_type="text/html; charset=utf-8", headers={
        "Content-Security-Policy": policy,
        "Cache-Control": "no-store",
        "Referrer-Policy": "no-referrer",
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
    })
