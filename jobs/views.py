"""Jobs over HTTP: `GET /api/v1/jobs/{job_id}` (poll a job), and `JobStart`,
what the plugin route is given (penelope_site/urls.py) to start a call as a job."""

from __future__ import annotations

import re
import time
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from drf_spectacular.utils import OpenApiCallback, OpenApiParameter, OpenApiResponse, extend_schema

from browser.pages import ManagedPage
from core.api import ApiError
from core.db_thread import on_db_thread
from core.rest import ApiView, answer
from core.schema import operation
from core.shapes import JOB_ID_PATTERN
from jobs import service
from jobs.callback_guard import CallbackRefused, CallbackUnresolved, resolve_allowed
from jobs.options import CALLBACK_HEADER, MAX_CALLBACK_LENGTH, TTL_HEADER, JobOptions, parse_options
from jobs.shapes import JobAccepted, JobAt, JobPoll
from plugins.framework import Action

JOB_ID = re.compile(r"[0-9a-f]{16}")


JOB_ID_PARAMETER = OpenApiParameter(
    "job_id", str, OpenApiParameter.PATH, pattern=JOB_ID_PATTERN, description="A job id; another answers 404."
)


def ttl_header_schema() -> dict[str, Any]:
    """X-Result-Ttl as the server reads it: plain decimal seconds, more than 0
    and at most MAX_TTL_S, as a pattern (a header is a string)."""
    return {"type": "string", "pattern": f"^{ttl_pattern(settings.MAX_TTL_S)}$"}


def ttl_pattern(most: float) -> str:
    """A regular expression (no lookaround, so fuzzers can generate from it)
    for the plain decimals in (0, most]. For a whole `most` the range is in
    the pattern; otherwise only the form is."""
    fraction_only = r"0*\.\d*[1-9]\d*"  # 0.5, .05
    if most != int(most) or most < 1:
        return f"(?:0*[1-9]\\d*(?:\\.\\d*)?|{fraction_only})"
    top = str(int(most))
    # Whole numbers from 1 to top - 1: every shorter width, then top's own
    # width with a smaller digit at some place after the same prefix.
    below = [f"[1-9]\\d{{{width - 1}}}" if width > 1 else "[1-9]" for width in range(1, len(top))]
    for at, digit in enumerate(top):
        lowest = 1 if at == 0 else 0
        if int(digit) > lowest:
            rest = len(top) - at - 1
            below.append(top[:at] + f"[{lowest}-{int(digit) - 1}]" + (f"\\d{{{rest}}}" if rest else ""))
    whole = f"0*(?:{'|'.join(below)})(?:\\.\\d*)?|" if below else ""
    return f"(?:{whole}{fraction_only}|0*{top}(?:\\.0*)?)"


def job_description() -> dict:
    """What jobs add to the plugin route's description (see `JobStart.describe`)."""
    return {
        "parameters": [
            OpenApiParameter(
                TTL_HEADER,
                ttl_header_schema(),
                OpenApiParameter.HEADER,
                description=(
                    "Run the call as a polling job: answer 202 at once and hold the result this many seconds "
                    f"after the job ends (at most MAX_TTL_S, {settings.MAX_TTL_S:g}). Not with {CALLBACK_HEADER}."
                ),
            ),
            OpenApiParameter(
                CALLBACK_HEADER,
                {"type": "string", "format": "uri", "maxLength": MAX_CALLBACK_LENGTH},
                OpenApiParameter.HEADER,
                description=(
                    "Run the call as a webhook job: answer 202 at once and POST the job, as its poll shows it, "
                    f"to this absolute http or https URL when it ends. Not with {TTL_HEADER}. With "
                    "WEBHOOK_REFUSE_PRIVATE=1, a URL into loopback, private or link-local networks answers 400."
                ),
            ),
        ],
        "answers": {202: OpenApiResponse(JobAccepted, "A job started: poll it, or wait for its webhook.")},
        "callbacks": [
            OpenApiCallback(
                "jobEnded",
                "{$request.header.X-Callback-Url}",
                extend_schema(
                    summary=f"A webhook job, POSTed to {CALLBACK_HEADER} when it ends",
                    description=(
                        "The job as its poll shows it. Headers: `X-Penelope-Job` (the job id; the same job may "
                        "arrive more than once), `X-Penelope-Attempt` (the WEBHOOK_ATTEMPTS_S slot this POST "
                        "stands for, from 1), `X-Penelope-Signature` (`sha256=` and the hex HMAC-SHA256 of the "
                        "raw body, keyed with PENELOPE_KEY). Any 2xx read to its end delivers the job; no "
                        "connection, a timeout, 429 or 5xx: another attempt at the next slot; anything else: "
                        "given up."
                    ),
                    request=JobPoll,
                    responses={200: OpenApiResponse(description="Delivered (any 2xx).")},
                ),
            )
        ],
        "errors": {
            409: "The page stayed busy for PAGE_WAIT_S; a job start: the page is not idle, at once.",
            503: "The browser is not running, a family's own service is off, or MAX_JOBS jobs are held (job starts).",
        },
    }


class JobDetail(ApiView):
    @extend_schema(
        **operation(
            operation_id="pollJob",
            summary="Poll a job",
            tags=["jobs"],
            parameters=[JOB_ID_PARAMETER],
            answers={200: JobPoll},
            errors={404: "No such job: unknown, delivered or expired."},
        )
    )
    async def get(self, request: Any, job_id: str) -> HttpResponse:
        job = await on_db_thread(service.find_live_job)(job_id, time.time()) if JOB_ID.fullmatch(job_id) else None
        if job is None:
            raise ApiError(404, service.NO_SUCH_JOB)
        # The clock read after the row: a job that ended while the row was
        # being read shows at most its whole TTL left, never more.
        return answer(JobPoll, JobAt(job, time.time()))

    @extend_schema(
        **operation(
            operation_id="forgetJob",
            summary="Forget an ended job now, with its files",
            description=(
                "For a client that has read its result: the job and its media files are deleted at once, "
                "which frees its place under MAX_JOBS and its disk. A running job is refused (409)."
            ),
            tags=["jobs"],
            parameters=[JOB_ID_PARAMETER],
            answers={204: OpenApiResponse(description="Forgotten; no body.")},
            errors={404: "No such job: unknown, delivered or expired.", 409: "The job is still running."},
        )
    )
    async def delete(self, request: Any, job_id: str) -> HttpResponse:
        if not JOB_ID.fullmatch(job_id):
            raise ApiError(404, service.NO_SUCH_JOB)
        await on_db_thread(service.forget_job)(job_id, time.time())
        return HttpResponse(status=204)


class JobStart:
    """What the plugin route is given to run a call as a job: it reads the
    job headers, starts the job and answers 202 (see `plugins.views.JobStarter`)."""

    async def options(self, request: HttpRequest) -> JobOptions | None:
        options = parse_options(request)
        if options is not None and options.callback and settings.WEBHOOK_REFUSE_PRIVATE:
            try:
                await resolve_allowed(options.callback)
            except (CallbackRefused, CallbackUnresolved) as refused:
                raise ApiError(400, f"X-Callback-Url is refused: {refused} (WEBHOOK_REFUSE_PRIVATE).") from None
        return options

    async def start(
        self, *, page: ManagedPage, action: Action, params: dict[str, Any], lease_id: str | None, options: JobOptions
    ) -> HttpResponse:
        job = await service.submit(page=page, action=action, params=params, lease_id=lease_id, options=options)
        accepted = {
            "success": True,
            "page_id": job.page_id,
            "job_id": job.id,
            "status_url": reverse("job", kwargs={"job_id": job.id}),
            "ttl": job.ttl,
            "callback": job.callback,
        }
        return answer(JobAccepted, accepted, 202)

    def describe(self) -> dict[str, Any]:
        return job_description()
