"""Jobs over HTTP: poll (and long-poll), cancel, re-run, forget and list
jobs. Starting one is jobs/starting.py."""

from __future__ import annotations

import base64
import json
import re
import time
from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers

from browser.pages import PAGE_ID_PATTERN
from core.auth import READ
from core.errors import NoSuchJob
from core.numbers import WholeNumber, decimal
from core.rest import ApiView, answer, validated
from core.schema import operation, x_lease
from core.shapes import JOB_ID_PATTERN
from jobs.models import Job
from jobs.options import plain_seconds
from jobs.selectors import LIST_LIMIT, MAX_LIST_LIMIT
from jobs.services import NO_SUCH_JOB
from jobs.shapes import JobAccepted, JobAt, JobList, JobPoll
from jobs.starting import JobStart, runner_of, ttl_pattern
from jobs.waiting import MAX_WAIT_S

JOB_ID = re.compile(r"[0-9a-f]{16}")


JOB_ID_PARAMETER = OpenApiParameter(
    "job_id", str, OpenApiParameter.PATH, pattern=JOB_ID_PATTERN, description="A job id; another answers 404."
)


WAIT_PARAMETER = OpenApiParameter(
    "wait",
    {"type": "string", "pattern": f"^{ttl_pattern(MAX_WAIT_S)}$"},
    OpenApiParameter.QUERY,
    description=(
        f"A long-poll: answer as soon as the job ends, or after this many seconds (more than 0, at most "
        f"{MAX_WAIT_S:g}, decimals allowed) with the job still running, exactly as a poll."
    ),
)


def wait_seconds(request: Any) -> float | None:
    raw = request.query_params.get("wait")
    return None if raw is None else plain_seconds(raw, most=MAX_WAIT_S, what="wait", header=False)


def check_job_id(job_id: str) -> None:
    if not JOB_ID.fullmatch(job_id):
        raise NoSuchJob(NO_SUCH_JOB)


class JobDetail(ApiView):
    does = {"DELETE": "forgetting a job"}

    @extend_schema(
        **operation(
            operation_id="pollJob",
            summary="Poll a job",
            tags=["jobs"],
            parameters=[JOB_ID_PARAMETER, WAIT_PARAMETER],
            answers={200: JobPoll},
            errors={
                400: "`wait` is not a number of seconds in (0, 60].",
                404: "No such job: unknown, delivered or expired.",
                503: (
                    "MAX_WAITERS long-polls are waiting already; for a read key, MAX_WAITERS less the tenth (at least "
                    "one) kept for the full key."
                ),
            },
        )
    )
    async def get(self, request: Any, job_id: str) -> HttpResponse:
        wait_s = wait_seconds(request)
        check_job_id(job_id)
        job = await (runner_of(request).poll(job_id) if wait_s is None else runner_of(request).wait(job_id, wait_s, request.user.role))
        # The clock read after the row: a job that ended while the row was
        # being read shows at most its whole TTL left, never more.
        return answer(JobPoll, JobAt(job, time.time(), acts=request.user.role != READ))

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
        check_job_id(job_id)
        await runner_of(request).forget(job_id)
        return HttpResponse(status=204)


class JobCancel(ApiView):
    does = {"POST": "cancelling a job"}

    @extend_schema(
        **operation(
            operation_id="cancelJob",
            summary="Cancel a running job",
            description=(
                "Stops the job's plugin and releases its page (a lease it ran under is kept, its TTL restarts). "
                "Answers once the plugin has stopped, at most CANCEL_GRACE_S (5 s) later: past that the page's "
                "tab is closed and opened again under the same name. The job ends `cancelled` with status 499 "
                "and is held, polled or delivered like any ended job."
            ),
            tags=["jobs"],
            parameters=[JOB_ID_PARAMETER],
            request=None,  # no body
            answers={200: OpenApiResponse(JobPoll, "The cancelled job, as a poll shows it.")},
            errors={
                404: "No such job: unknown, delivered or expired.",
                409: "The job has already ended (the sentence names its state).",
            },
        )
    )
    async def post(self, request: Any, job_id: str) -> HttpResponse:
        check_job_id(job_id)
        job = await runner_of(request).cancel(job_id)
        return answer(JobPoll, JobAt(job, time.time()))


class JobRerun(ApiView):
    starter = JobStart()
    does = {"POST": "re-running a job"}

    @extend_schema(
        **operation(
            operation_id="rerunJob",
            summary="Start an ended job again",
            description=(
                "Starts a new job with the ended job's route, page (or `any`), parameters and job headers "
                "(X-Result-Ttl or X-Callback-Url, X-Queue-Timeout, X-Priority, X-Retry, X-Retry-Backoff, X-Notify-Url; not its "
                "Idempotency-Key), exactly as a client's start would: its page busy answers 409 (or it queues, "
                "with X-Queue-Timeout), MAX_JOBS 503. The ended job must still be held. Send X-Lease to run on a "
                "page leased to you."
            ),
            tags=["jobs"],
            parameters=[JOB_ID_PARAMETER, x_lease()],
            request=None,  # no body
            answers={202: OpenApiResponse(JobAccepted, "The new job, which names the job it re-runs (`rerun_of`).")},
            errors={
                404: "No such job (unknown, delivered or expired), its page is not open, or its plugin is gone.",
                409: "The job is still queued or running, or its page is busy.",
                423: "The page is leased to another flow.",
                429: "With X-Queue-Timeout: QUEUE_MAX jobs wait for the page already.",
                503: "The browser is not running, or MAX_JOBS jobs are held.",
            },
        )
    )
    async def post(self, request: Any, job_id: str) -> HttpResponse:
        check_job_id(job_id)
        job = await runner_of(request).rerun(job_id, lease_id=request.headers.get("X-Lease"))
        return self.starter.accepted(request, job)


class JobListQuery(serializers.Serializer):
    state = serializers.ChoiceField(choices=Job.State.values, required=False, help_text="Only jobs in this state.")
    page_id = serializers.RegexField(f"^{PAGE_ID_PATTERN.pattern}$", max_length=32, required=False, help_text="Only jobs of this page.")
    plugin = serializers.RegexField(r"^[^/]+/[^/]+$", max_length=200, required=False, help_text="Only jobs of this `family/action`.")
    schedule = serializers.RegexField(JOB_ID_PATTERN, required=False, help_text="Only jobs this schedule fired (its id).")
    limit = WholeNumber(
        min_value=1, max_value=MAX_LIST_LIMIT, default=LIST_LIMIT, help_text="Jobs per answer."
    )
    cursor = serializers.CharField(max_length=200, required=False, help_text="The `next` of the previous answer.")

    def validate_cursor(self, cursor: str) -> tuple[float, str]:
        try:
            sent_at, job_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
            # A JSON number only, finite (core.numbers): `1e400` is none, and
            # an integer of hundreds of digits no float holds.
            accepted_at = decimal(sent_at) if isinstance(sent_at, float | int) else None
            if accepted_at is None or not JOB_ID.fullmatch(job_id):
                raise ValueError
        except (ValueError, TypeError):
            raise serializers.ValidationError("not a cursor this worker gave; send the `next` of an answer.") from None
        return accepted_at, job_id


def encode_cursor(after: tuple[float, str] | None) -> str | None:
    if after is None:
        return None
    return base64.urlsafe_b64encode(json.dumps(list(after)).encode()).decode().rstrip("=")


class JobListView(ApiView):

    @extend_schema(
        **operation(
            operation_id="listJobs",
            summary="List the jobs held, newest first",
            description=(
                "Running jobs and ended ones still held (not yet read out past their TTL, delivered or given up), "
                "newest first, each as its poll shows it without `result`. Page through with `cursor`."
            ),
            tags=["jobs"],
            parameters=[JobListQuery],
            answers={200: JobList},
            errors={400: "A filter, `limit` or `cursor` is not valid; the sentence names it."},
        )
    )
    async def get(self, request: Any) -> HttpResponse:
        # A plain dict: DRF reads a QueryDict as a form, where a blank value counts as absent.
        query = dict(validated(JobListQuery, dict(request.query_params.items())))
        after = query.pop("cursor", None)
        if "schedule" in query:
            query["schedule_id"] = query.pop("schedule")
        jobs, next_after = await runner_of(request).jobs(**query, after=after)
        now = time.time()
        body = {"success": True, "page_id": None, "jobs": [JobAt(job, now, acts=request.user.role != READ) for job in jobs], "next": encode_cursor(next_after)}
        return answer(JobList, body)
