"""Jobs over HTTP: poll (and long-poll), cancel, forget and list jobs, and
`JobStart`, what the plugin route is given (penelope_site/urls.py) to start
a call as a job."""

from __future__ import annotations

import base64
import functools
import json
import re
import time
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from drf_spectacular.utils import OpenApiCallback, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers

from browser.pages import PAGE_ID_PATTERN, ManagedPage
from core.api import ApiError
from core.errors import NoSuchJob
from core.rest import ApiView, answer, validated
from core.schema import operation
from core.shapes import JOB_ID_PATTERN
from jobs.callback_guard import CallbackRefused, CallbackUnresolved, resolve_allowed
from jobs.models import Job
from jobs.options import (
    CALLBACK_HEADER,
    IDEMPOTENCY_HEADER,
    MAX_CALLBACK_LENGTH,
    MAX_IDEMPOTENCY_KEY,
    MAX_PRIORITY,
    MAX_QUEUE_TIMEOUT_S,
    PRIORITY_HEADER,
    QUEUE_TIMEOUT_HEADER,
    TTL_HEADER,
    JobOptions,
    parse_options,
    plain_seconds,
)
from jobs.runner import JobRunner
from jobs.selectors import LIST_LIMIT, MAX_LIST_LIMIT
from jobs.services import NO_SUCH_JOB
from jobs.shapes import JobAccepted, JobAt, JobList, JobPoll, queue_place
from jobs.waiting import MAX_WAIT_S
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


# Idempotency-Key as the server reads it: printable ASCII (jobs.options), and
# HTTP drops the spaces around a header's value, so none at either end.
IDEMPOTENCY_KEY_SCHEMA_PATTERN = f"^[!-~](?:[ -~]{{0,{MAX_IDEMPOTENCY_KEY - 2}}}[!-~])?$"


def callback_schema() -> dict[str, Any]:
    """X-Callback-Url: http or https, printable ASCII with no space (a header
    is ASCII; an international host goes in its xn-- form), at most
    MAX_CALLBACK_LENGTH; that it has a host the webhook can be sent to, the
    description says (`jobs.options.parse_callback`)."""
    authority = "[!\"$-.0-:;-=>@-~]"  # printable ASCII but space, / ? and #
    # No `format: uri`: RFC 3986 refuses characters (`|`, `{`) the server takes.
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_CALLBACK_LENGTH,
        "pattern": f"^[hH][tT][tT][pP][sS]?://{authority}+(?:[/?#][!-~]*)?$",
    }


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
                    f"after the job ends (at most MAX_TTL_S, {settings.MAX_TTL_S:g}). Not with {CALLBACK_HEADER} "
                    "(both: 400)."
                ),
            ),
            OpenApiParameter(
                CALLBACK_HEADER,
                callback_schema(),
                OpenApiParameter.HEADER,
                description=(
                    "Run the call as a webhook job: answer 202 at once and POST the job, as its poll shows it, "
                    f"to this absolute http or https URL with a host, at most {MAX_CALLBACK_LENGTH} characters, "
                    f"when it ends. Not with {TTL_HEADER} (both: 400). With "
                    "WEBHOOK_REFUSE_PRIVATE=1, a URL into loopback, private or link-local networks answers 400."
                ),
            ),
            OpenApiParameter(
                IDEMPOTENCY_HEADER,
                # The pattern holds for job starts. A plain call ignores the
                # header, whatever its value: a rule between headers, which
                # OpenAPI 3.0 cannot state, so the description says it.
                {"type": "string", "minLength": 1, "maxLength": MAX_IDEMPOTENCY_KEY, "pattern": IDEMPOTENCY_KEY_SCHEMA_PATTERN},
                OpenApiParameter.HEADER,
                description=(
                    f"With a job header ({TTL_HEADER} or {CALLBACK_HEADER}): 1 to {MAX_IDEMPOTENCY_KEY} printable "
                    "ASCII characters (else 400). A repeat "
                    "of this start (same route, page, parameters and job headers) while its job is held answers the "
                    "same 202 and starts nothing; the same key with another request answers 422, and a repeat while "
                    "the first start is still being stored 409. A plain call (no job header) ignores the header, "
                    "whatever its value."
                ),
            ),
            OpenApiParameter(
                QUEUE_TIMEOUT_HEADER,
                {"type": "string", "pattern": f"^{ttl_pattern(MAX_QUEUE_TIMEOUT_S)}$"},
                OpenApiParameter.HEADER,
                description=(
                    "With a job header: a start that finds its page busy waits for it this many seconds (more than "
                    f"0, at most {MAX_QUEUE_TIMEOUT_S:g}, decimals allowed) instead of answering 409: the 202 says "
                    "`state: queued` and its place. A queued job that has not started by then ends `timed_out` with "
                    f"status 409. At most QUEUE_MAX jobs wait per page (one more: 429 with Retry-After). On a plain "
                    "call: 400."
                ),
            ),
            OpenApiParameter(
                PRIORITY_HEADER,
                {"type": "string", "pattern": f"^[0-{MAX_PRIORITY}]$"},
                OpenApiParameter.HEADER,
                description=(
                    f"A queued job's priority, 0 (the default) to {MAX_PRIORITY}: a higher one takes the page first; "
                    "equal ones (plain calls waiting count as 0) keep their arrival order. On a plain call: 400."
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
                        "raw body, keyed with PENELOPE_KEY), and the Standard Webhooks headers `webhook-id` (the "
                        "job id), `webhook-timestamp` (Unix seconds of the attempt) and `webhook-signature` (`v1,` "
                        "and the base64 HMAC-SHA256 of `id.timestamp.body`, keyed with WEBHOOK_SECRET; two, "
                        "space-separated, during a rotation). Any 2xx read to its end delivers the job; no "
                        "connection, a timeout, 429 or 5xx: another attempt at the next slot; anything else: "
                        "given up."
                    ),
                    request=JobPoll,
                    responses={200: OpenApiResponse(description="Delivered (any 2xx).")},
                ),
            )
        ],
        "errors": {
            409: (
                "The page stayed busy for PAGE_WAIT_S; a job start: the page is not idle, at once, or a repeat of its "
                "Idempotency-Key is still being stored."
            ),
            422: "The body is not valid JSON, or an Idempotency-Key was sent with a different request.",
            429: "A job start with X-Queue-Timeout: QUEUE_MAX jobs wait for the page already (see Retry-After).",
            503: "The browser is not running, a family's own service is off, or MAX_JOBS jobs are held (job starts).",
        },
    }


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
    return None if raw is None else plain_seconds(raw, most=MAX_WAIT_S, what="wait")


def check_job_id(job_id: str) -> None:
    if not JOB_ID.fullmatch(job_id):
        raise NoSuchJob(NO_SUCH_JOB)


class JobDetail(ApiView):
    runner: JobRunner | None = None  # set by the URL configuration

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
                503: "MAX_WAITERS long-polls are waiting already.",
            },
        )
    )
    async def get(self, request: Any, job_id: str) -> HttpResponse:
        wait_s = wait_seconds(request)
        check_job_id(job_id)
        job = await (self.runner.poll(job_id) if wait_s is None else self.runner.wait(job_id, wait_s))
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
        check_job_id(job_id)
        await self.runner.forget(job_id)
        return HttpResponse(status=204)


class JobCancel(ApiView):
    runner: JobRunner | None = None  # set by the URL configuration

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
        job = await self.runner.cancel(job_id)
        return answer(JobPoll, JobAt(job, time.time()))


class JobListQuery(serializers.Serializer):
    state = serializers.ChoiceField(choices=Job.State.values, required=False, help_text="Only jobs in this state.")
    page_id = serializers.RegexField(f"^{PAGE_ID_PATTERN.pattern}$", max_length=32, required=False, help_text="Only jobs of this page.")
    plugin = serializers.RegexField(r"^[^/]+/[^/]+$", max_length=200, required=False, help_text="Only jobs of this `family/action`.")
    schedule = serializers.RegexField(JOB_ID_PATTERN, required=False, help_text="Only jobs this schedule fired (its id).")
    limit = serializers.IntegerField(
        min_value=1, max_value=MAX_LIST_LIMIT, default=LIST_LIMIT, help_text="Jobs per answer."
    )
    cursor = serializers.CharField(max_length=200, required=False, help_text="The `next` of the previous answer.")

    def validate_cursor(self, cursor: str) -> tuple[float, str]:
        try:
            started_at, job_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
            if not isinstance(started_at, float | int) or isinstance(started_at, bool) or not JOB_ID.fullmatch(job_id):
                raise ValueError
        except (ValueError, TypeError):
            raise serializers.ValidationError("not a cursor this worker gave; send the `next` of an answer.") from None
        return float(started_at), job_id


def encode_cursor(after: tuple[float, str] | None) -> str | None:
    if after is None:
        return None
    return base64.urlsafe_b64encode(json.dumps(list(after)).encode()).decode().rstrip("=")


class JobListView(ApiView):
    runner: JobRunner | None = None  # set by the URL configuration

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
        jobs, next_after = await self.runner.jobs(**query, after=after)
        now = time.time()
        body = {"success": True, "page_id": None, "jobs": [JobAt(job, now) for job in jobs], "next": encode_cursor(next_after)}
        return answer(JobList, body)


class JobStart:
    """What the plugin route is given to run a call as a job: it reads the
    job headers, starts the job on the job runner and answers 202 (see
    `plugins.views.JobStarter`)."""

    def __init__(self, runner: JobRunner) -> None:
        self.runner = runner

    @functools.cached_property
    def jobs_url(self) -> str:
        """`/api/v1/jobs`, under which each job is polled: looked up at the
        first start (the URLconf that builds this is not loaded yet), not at
        every start."""
        return reverse("jobs")

    async def options(self, request: HttpRequest) -> JobOptions | None:
        options = parse_options(request)
        if options is not None and options.callback and settings.WEBHOOK_REFUSE_PRIVATE:
            try:
                await resolve_allowed(options.callback)
            except (CallbackRefused, CallbackUnresolved) as refused:
                raise ApiError(400, f"X-Callback-Url is refused: {refused} (WEBHOOK_REFUSE_PRIVATE).") from None
        return options

    async def start(
        self, *, page: ManagedPage | None, action: Action, params: dict[str, Any], lease_id: str | None,
        options: JobOptions,
    ) -> HttpResponse:
        job = await self.runner.submit(page=page, action=action, params=params, lease_id=lease_id, options=options)
        return self.accepted(job, options)

    def accepted(self, job: Job, options: JobOptions) -> HttpResponse:
        """The 202 of a job start (a schedule's trigger answers it too)."""
        job = self.runner.shown(job)
        accepted = {
            "success": True,
            "page_id": job.page_id,
            "job_id": job.id,
            "status_url": f"{self.jobs_url}/{job.id}",
            "ttl": job.ttl,
            "callback": job.callback,
        }
        if options.queue_timeout is not None:
            accepted["state"] = Job.State.QUEUED if job.state == Job.State.QUEUED else Job.State.RUNNING
            accepted["queue"] = queue_place(job)
        return answer(JobAccepted, accepted, 202)

    def describe(self) -> dict[str, Any]:
        return job_description()
