"""`GET /api/v1/jobs/{job_id}`: poll a job."""

from __future__ import annotations

import re
import time

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from drf_spectacular.utils import OpenApiCallback, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers

from core.api import ApiError, api_view, json_response
from core.db_thread import on_db_thread
from core.schema import (
    JOB_ID_PATTERN,
    PageSuccess,
    described,
    operation,
    ttl_schema,
)
from jobs.models import Job
from jobs.options import CALLBACK_HEADER, MAX_CALLBACK_LENGTH, TTL_HEADER
from jobs.service import find_live_job, job_body

JOB_ID = re.compile(r"[0-9a-f]{16}")


JOB_ID_PARAMETER = OpenApiParameter(
    "job_id", str, OpenApiParameter.PATH, pattern=JOB_ID_PATTERN, description="A job id; another answers 404."
)


class JobAccepted(PageSuccess):
    job_id = serializers.RegexField(JOB_ID_PATTERN)
    status_url = serializers.CharField(help_text="Where to poll it: /api/v1/jobs/{job_id}.")
    ttl = serializers.FloatField(allow_null=True, help_text="X-Result-Ttl, null for a webhook job.")
    callback = serializers.CharField(allow_null=True, help_text="X-Callback-Url, null for a polling job.")


def job_description() -> dict:
    """What jobs add to the plugin route's description (see `JobHook.describe`)."""
    return {
        "parameters": [
            OpenApiParameter(
                TTL_HEADER,
                ttl_schema(),
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


class Delivery(serializers.Serializer):
    attempts = serializers.IntegerField(min_value=0, help_text="POSTs made so far.")
    delivered = serializers.BooleanField()
    error = serializers.CharField(allow_null=True, help_text="Why the last attempt failed, or null.")


class JobPoll(PageSuccess):
    """A job as the poll shows it, and as its webhook POSTs it."""

    job_id = serializers.RegexField(JOB_ID_PATTERN)
    state = serializers.ChoiceField(choices=Job.State.values)
    plugin = serializers.CharField(help_text="`family/action`.")
    started_at = serializers.FloatField(help_text="Epoch seconds.")
    finished_at = serializers.FloatField(allow_null=True, help_text="Epoch seconds, null while it runs.")
    expires_in = serializers.FloatField(min_value=0, allow_null=True, help_text="Seconds it is still held, null while it runs.")
    status = serializers.IntegerField(allow_null=True, help_text="The status the plain call would have answered, null while it runs.")
    result = serializers.DictField(
        allow_null=True, help_text="The body the plain call would have answered (a success or the envelope), null while it runs."
    )
    callback = serializers.CharField(allow_null=True, help_text="The webhook URL, null for a polling job.")
    delivery = Delivery(allow_null=True, help_text="A webhook job's deliveries so far, null for a polling job.")


@described(
    get=operation(
        operation_id="pollJob",
        summary="Poll a job",
        tags=["jobs"],
        parameters=[JOB_ID_PARAMETER],
        answers={200: JobPoll},
        errors={404: "No such job: unknown, delivered or expired."},
    )
)
@api_view("GET")
async def poll(request: HttpRequest, job_id: str) -> HttpResponse:
    now = time.time()
    job = await on_db_thread(find_live_job)(job_id, now) if JOB_ID.fullmatch(job_id) else None
    if job is None:
        raise ApiError(404, "No such job: the id is unknown, or its result was delivered or has expired.")
    return json_response(job_body(job, now))
