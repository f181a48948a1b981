"""`POST|DELETE /api/v1/{page_id}/cdp`: tokens for a CDP client on a leased page."""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers

from browser.pages import validate_page_id
from browser.registry import pages_of
from browser.schema import PAGE_ID
from cdp.grants import MAX_GRANTS_PER_PAGE
from core.api import ApiError
from core.errors import LeaseRequired
from core.numbers import Seconds
from core.rest import ApiView, answer, known_only, validated
from core.runtime import runtime_of
from core.schema import BODY_ERRORS, operation, x_lease
from core.shapes import PageSuccess


class CdpParams(serializers.Serializer):
    # At most MAX_TTL_S here and in the document, the longest a lease runs;
    # at most the lease's remaining time in the view.
    ttl = Seconds(
        most=settings.MAX_TTL_S,
        message="a CDP token's ttl is a number of seconds, more than 0 and at most the lease's remaining time.",
        required=False,
        help_text="Seconds the token works, more than 0 and at most the lease's remaining time (the default).",
    )


class CdpTokenMade(PageSuccess):
    url = serializers.CharField(
        help_text="`/cdp/<token>` on this worker: connect to ws://HOST:PORT/cdp/<token>. The token is the credential."
    )
    expires_at = serializers.FloatField(help_text="Epoch seconds; never later than the lease's end.")


class CdpTokensEnded(PageSuccess):
    ended = serializers.IntegerField(min_value=0, help_text="How many tokens ended (their connections closed).")


class PageCdp(ApiView):
    does = {"POST": "making a CDP token", "DELETE": "ending CDP tokens"}

    @extend_schema(
        **operation(
            operation_id="makeCdpToken",
            summary="Make a token for your own Playwright or Puppeteer to drive a leased page",
            description=(
                "A one-connection token to drive this page over the Chrome DevTools Protocol, under the caller's "
                "lease: `chromium.connect_over_cdp(\"ws://HOST:PORT/cdp/<token>\")` in Playwright, "
                "`puppeteer.connect({browserWSEndpoint})` in Puppeteer. The client sees this page and the tabs it "
                "opens, no other page of the persona's browser; what it may not do is refused, and the permissions "
                "it grants are undone when it disconnects. It may read, set and wipe every cookie and the site data "
                "of the persona, as the full key may (docs/guides/BRING_YOUR_OWN_SCRIPT.md, \"What a script may "
                "change\"). The token works once, until it expires, the lease ends, a "
                "DELETE ends it, or the worker restarts; it is never logged."
            ),
            tags=["cdp"],
            parameters=[PAGE_ID, x_lease("The caller's lease on the page: required.")],
            request=CdpParams,
            answers={201: CdpTokenMade},
            errors={
                400: "`ttl` not a positive number, or past the lease's remaining time, or a bad page id.",
                404: "The page is not open.",
                423: "The page is not leased, or X-Lease is not its lease.",
                429: f"The page holds {MAX_GRANTS_PER_PAGE} tokens already.",
                **dict.fromkeys(BODY_ERRORS, ""),
            },
        )
    )
    async def post(self, request: Any, page_id: str) -> HttpResponse:
        params = validated(CdpParams, known_only(CdpParams, request.data, self.does["POST"]))
        validate_page_id(page_id)
        page = pages_of(request).get(page_id)
        lease = page.check_lease(request.headers.get("X-Lease"))
        if lease is None:
            raise LeaseRequired(
                f"A CDP client drives a leased page only: take a lease on page {page_id} first "
                f"(POST /api/v1/{page_id}/lease) and send it in X-Lease.",
                page_id,
            )
        remaining = lease.expires_in(time.monotonic())
        ttl = params.get("ttl", remaining)
        if ttl > remaining:
            raise ApiError(
                400, f"Invalid parameter 'ttl': at most the lease's remaining {remaining:.1f} seconds; renew the lease first.",
                page_id,
            )
        made = runtime_of(request).cdp.grants.create(page, lease, ttl)
        if made is None:
            raise ApiError(429, f"Page {page_id} holds {MAX_GRANTS_PER_PAGE} CDP tokens; end them or let some expire.", page_id)
        token, grant = made
        body = {"success": True, "page_id": page_id, "url": f"/cdp/{token}", "expires_at": round(grant.expires_at, 3)}
        return answer(CdpTokenMade, body, 201)

    @extend_schema(
        **operation(
            operation_id="endCdpTokens",
            summary="End every CDP token of a page, closing their connections",
            tags=["cdp"],
            parameters=[PAGE_ID, x_lease("The page's lease, when it is leased.")],
            answers={200: CdpTokensEnded},
            errors={400: "", 404: "The page is not open.", 423: "The page is leased and X-Lease is not its lease."},
        )
    )
    async def delete(self, request: Any, page_id: str) -> HttpResponse:
        validate_page_id(page_id)
        page = pages_of(request).get(page_id)
        page.check_lease(request.headers.get("X-Lease"))
        ended = runtime_of(request).cdp.grants.end_page(page_id, "The tokens were ended (DELETE).")
        return answer(CdpTokensEnded, {"success": True, "page_id": page_id, "ended": ended})
