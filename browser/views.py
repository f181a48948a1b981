"""Routes for pages and leases."""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers

from browser.pages import validate_page_id
from browser.purge import purge_idle_pages
from browser.registry import pages_of
from browser.schema import PAGE_ID, PAGE_ID_SCHEMA_PATTERN
from core.api import ApiError
from core.numbers import Seconds
from core.rest import ApiView, answer, known_only, validated
from core.schema import BODY_ERRORS, operation, x_lease
from core.shapes import JOB_ID_PATTERN, LEASE_ID_PATTERN, PageSuccess, Success, TrueField


class OpenPageParams(serializers.Serializer):
    page_id = serializers.CharField(max_length=1000, trim_whitespace=False)

    def validate_page_id(self, page_id: str) -> str:
        if not isinstance(self.initial_data.get("page_id"), str):
            raise serializers.ValidationError("a page id is a string.")
        return page_id


class LeaseParams(serializers.Serializer):
    ttl = Seconds(
        most=settings.MAX_TTL_S,
        message=f"a lease's ttl is more than 0 and at most {settings.MAX_TTL_S:g} seconds.",
        help_text="Seconds, more than 0 and at most MAX_TTL_S; decimals allowed.",
    )


FORCE_VALUES = {"true": True, "false": False, "1": True, "0": False}


class ReleaseLeaseQuery(serializers.Serializer):
    force = serializers.ChoiceField(
        choices=list(FORCE_VALUES),
        required=False,
        default="false",
        error_messages={"invalid_choice": "force is true or false (or 1 or 0)."},
    )

    def validate_force(self, force: str) -> bool:
        return FORCE_VALUES[force]


FORCE_PARAMETER = OpenApiParameter(
    "force",
    {"type": "string", "enum": list(FORCE_VALUES), "default": "false"},
    OpenApiParameter.QUERY,
    description=(
        "`true` (or `1`): break the lease without its id; X-Lease is then not needed and ignored if sent. "
        "`false` (or `0`, or absent): release the lease in X-Lease. Any other value answers 400."
    ),
)


# --- the answers' shapes, for the schema -------------------------------------------


class Reopened(serializers.Serializer):
    cause = serializers.ChoiceField(
        choices=["page_crashed", "browser_stopped", "memory", "calls"],
        help_text=(
            "`page_crashed` (its renderer), `browser_stopped` (the browser exited and was launched again), "
            "`memory` or `calls` (the browser was recycled at BROWSER_MAX_MB or BROWSER_RECYCLE_AFTER_CALLS)."
        ),
    )
    at = serializers.FloatField(help_text="Epoch seconds.")
    lost_url = serializers.CharField(allow_null=True, help_text="Where the old tab was; the new one starts blank.")


class PageState(serializers.Serializer):
    page_id = serializers.CharField()
    busy = serializers.BooleanField(help_text="A call or a job runs on it now.")
    waiting = serializers.IntegerField(min_value=0, help_text="Calls queued for it.")
    job_id = serializers.RegexField(JOB_ID_PATTERN, allow_null=True, help_text="The job running on it, or null.")
    leased = serializers.BooleanField()
    lease_expires_in = serializers.FloatField(
        min_value=0, allow_null=True, help_text="Seconds left on the lease (its full TTL while a call runs under it), or null."
    )
    url = serializers.CharField(allow_blank=True, help_text="The tab's address (empty while its tab is not open).")
    tab = serializers.ChoiceField(
        choices=["open", "crashed", "closed"],
        help_text=(
            "`open`; `crashed`: its renderer crashed, and a new tab is opened under its name before its next call; "
            "`closed`: the browser is being launched again (or an action closed its tab), and a new tab comes "
            "with it or with the next call."
        ),
    )
    reopened = Reopened(
        allow_null=True,
        help_text="The last time its tab was replaced (null: never): a client compares `at` with its last call.",
    )


class PageAnswer(PageSuccess, PageState):
    pass


class PageList(Success):
    max_pages = serializers.IntegerField(help_text="MAX_PAGES.")
    pages = PageState(many=True)


class OpenPageBody(serializers.Serializer):
    page_id = serializers.RegexField(PAGE_ID_SCHEMA_PATTERN, help_text="The new page's id; another answers 400.")


class PageClosed(PageSuccess):
    closed = TrueField()


class LeaseTaken(PageSuccess):
    lease = serializers.RegexField(LEASE_ID_PATTERN, help_text="The lease id: send it in X-Lease.")
    ttl = serializers.FloatField()
    expires_in = serializers.FloatField(min_value=0)


class LeaseReleased(PageSuccess):
    released = TrueField()


# The release route's one 200 shape: a plain release answers LeaseReleased's
# fields, so the two added here are optional in the schema (a oneOf of the two
# shapes would match a forced answer twice: neither forbids other fields).
class LeaseBroken(LeaseReleased):
    """A release; with `force=true`, a broken lease: `forced` and `lease_age_s` too."""

    forced = TrueField(required=False, help_text="Only with force=true: the lease was broken without its id.")
    lease_age_s = serializers.FloatField(
        required=False, min_value=0, help_text="Only with force=true: seconds since the lease was taken, to 0.1 s."
    )


class SkippedPage(serializers.Serializer):
    page_id = serializers.CharField()
    reason = serializers.ChoiceField(choices=["busy", "job", "leased", "closed", "error"])


class PurgeReport(Success):
    purged = serializers.ListField(child=serializers.CharField())
    skipped = SkippedPage(many=True)
    browser_caches_cleared = serializers.BooleanField()
    memory_before = serializers.DictField(child=serializers.IntegerField(), help_text="`rss_bytes`: the browser's resident memory.")
    memory_after = serializers.DictField(child=serializers.IntegerField())
    freed_bytes = serializers.IntegerField(help_text="Negative when a page grew meanwhile.")
    duration_ms = serializers.FloatField(min_value=0)


class Pages(ApiView):
    does = {"POST": "opening a page"}

    @extend_schema(
        **operation(
            operation_id="listPages",
            summary="List the open pages",
            tags=["pages"],
            answers={200: PageList},
        )
    )
    async def get(self, request: Any) -> HttpResponse:
        pages = [page.state() for page in pages_of(request).pages.values()]
        return answer(PageList, {"success": True, "page_id": None, "max_pages": settings.MAX_PAGES, "pages": pages})

    @extend_schema(
        **operation(
            operation_id="openPage",
            summary="Open a page (a new tab)",
            tags=["pages"],
            request=OpenPageBody,
            answers={201: PageAnswer},
            errors={
                400: "`page_id` missing, malformed or reserved.",
                409: "The page is already open, or MAX_PAGES pages are open.",
                **dict.fromkeys(BODY_ERRORS, ""),
                503: "",
            },
        )
    )
    async def post(self, request: Any) -> HttpResponse:
        page_id = validated(OpenPageParams, known_only(OpenPageParams, request.data, self.does["POST"]))["page_id"]
        page = await pages_of(request).open(page_id)
        return answer(PageAnswer, {"success": True, **page.state()}, 201)


class PageDetail(ApiView):
    does = {"DELETE": "closing a page"}

    @extend_schema(
        **operation(
            operation_id="getPage",
            summary="One page's state",
            tags=["pages"],
            parameters=[PAGE_ID],
            answers={200: PageAnswer},
            errors={400: "", 404: "The page is not open."},
        )
    )
    async def get(self, request: Any, page_id: str) -> HttpResponse:
        validate_page_id(page_id)
        return answer(PageAnswer, {"success": True, **pages_of(request).get(page_id).state()})

    @extend_schema(
        **operation(
            operation_id="closePage",
            summary="Close a page",
            tags=["pages"],
            parameters=[PAGE_ID, x_lease()],
            answers={200: PageClosed},
            errors={
                400: "",
                404: "The page is not open.",
                409: "The page is main (it stays open), or a call or job runs on it or waits for it.",
                423: "",
            },
        )
    )
    async def delete(self, request: Any, page_id: str) -> HttpResponse:
        validate_page_id(page_id)
        await pages_of(request).close(page_id, request.headers.get("X-Lease"))
        return answer(PageClosed, {"success": True, "page_id": page_id, "closed": True})


class Lease(ApiView):
    does = {"POST": "taking or renewing a lease", "DELETE": "releasing a lease"}

    @extend_schema(
        **operation(
            operation_id="takeLease",
            summary="Take a lease on a page, or renew one's own",
            tags=["leases"],
            parameters=[PAGE_ID, x_lease("To renew: the lease held. Without it, a new lease on an unleased page.")],
            request=LeaseParams,
            answers={
                201: OpenApiResponse(LeaseTaken, "A new lease."),
                200: OpenApiResponse(LeaseTaken, "The lease in X-Lease, renewed with the new ttl."),
            },
            errors={
                400: "`ttl` missing or out of range, or a bad page id.",
                404: "The page is not open.",
                423: "",
                **dict.fromkeys(BODY_ERRORS, ""),
            },
        )
    )
    async def post(self, request: Any, page_id: str) -> HttpResponse:
        validate_page_id(page_id)  # first: `any` is refused for what it is, whatever the body lacks
        lease_id = request.headers.get("X-Lease")
        ttl = validated(LeaseParams, known_only(LeaseParams, request.data, self.does["POST"]))["ttl"]
        pages = pages_of(request)
        taken = pages.broker.take_lease(pages.get(page_id), ttl, lease_id)
        renewed = bool(lease_id)  # the holder sent its own lease: same id, new TTL
        return answer(
            LeaseTaken,
            {"success": True, "page_id": page_id, "lease": taken.id, "ttl": taken.ttl,
             "expires_in": round(taken.expires_in(time.monotonic()), 3)},
            200 if renewed else 201,
        )

    @extend_schema(
        **operation(
            operation_id="releaseLease",
            summary="Release a page's lease, or break it",
            description=(
                "Releases the lease in X-Lease. With `force=true` (an operator's tool for a lease whose id was "
                "lost) it releases the page's lease without its id, and the answer adds `\"forced\": true` and "
                "`lease_age_s`, the seconds since the lease was taken (to 0.1 s); the worker logs the break at "
                "WARNING. A call or job running under a broken lease runs on to its end, and the page is then "
                "free for any caller. Without `force`, or with `force=false`, nothing changes from a plain release."
            ),
            tags=["leases"],
            parameters=[PAGE_ID, FORCE_PARAMETER, x_lease("The lease to release; not needed with force=true.")],
            answers={
                200: OpenApiResponse(
                    LeaseBroken, "Released; with force=true, broken, and `forced` and `lease_age_s` are there too."
                )
            },
            errors={
                400: "A bad page id, or `force` is not true, false, 1 or 0.",
                404: "The page is not open.",
                423: "No X-Lease, another lease's id (without force), or no lease to release.",
            },
        )
    )
    async def delete(self, request: Any, page_id: str) -> HttpResponse:
        validate_page_id(page_id)
        # A plain dict, not the QueryDict: DRF reads an empty form value as absent, and `?force=` is refused.
        force = validated(ReleaseLeaseQuery, request.query_params.dict())["force"]
        pages = pages_of(request)
        released = pages.broker.release_lease(pages.get(page_id), request.headers.get("X-Lease"), force=force)
        body = {"success": True, "page_id": page_id, "released": True}
        if not force:
            return answer(LeaseReleased, body)
        return answer(LeaseBroken, {**body, "forced": True, "lease_age_s": round(released.age, 1)})


class Purge(ApiView):
    does = {"POST": "freeing the idle pages' memory"}

    @extend_schema(
        **operation(
            operation_id="purgeMemory",
            summary="Free memory on every idle page now",
            description="Free memory on every idle page now; the same as the `purge` loop.",
            tags=["pages"],
            request=None,
            answers={200: PurgeReport},
            errors={503: ""},
        )
    )
    async def post(self, request: Any) -> HttpResponse:
        known_only(None, request.data, self.does["POST"])
        pages = pages_of(request)
        if pages.browser is None:
            raise ApiError(503, "The browser is not running.")
        report = await purge_idle_pages(pages)
        return answer(PurgeReport, {"success": True, "page_id": None, **report.as_dict()})
