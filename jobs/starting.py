"""Starting a job over HTTP: the job headers as the OpenAPI document
describes them, and `JobStart`, what the plugin route is given
(penelope_site/urls.py) to run a call as a job on the runner of the worker
that serves the request, and answer its 202. A re-run (jobs/views.py)
answers the same 202."""

from __future__ import annotations

import functools
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from drf_spectacular.utils import OpenApiCallback, OpenApiParameter, OpenApiResponse, extend_schema

from browser.pages import ManagedPage
from core.errors import BadJobHeader
from core.rest import answer
from core.runtime import runtime_of
from jobs.models import Job
from jobs.options import (
    BACKOFF_HEADER,
    CALLBACK_HEADER,
    DEFAULT_BACKOFF_S,
    IDEMPOTENCY_HEADER,
    MAX_BACKOFF_S,
    MAX_CALLBACK_LENGTH,
    MAX_IDEMPOTENCY_KEY,
    MAX_PRIORITY,
    MAX_QUEUE_TIMEOUT_S,
    MAX_RETRIES,
    NOTIFY_HEADER,
    PRIORITY_HEADER,
    QUEUE_TIMEOUT_HEADER,
    RETRY_HEADER,
    TTL_HEADER,
    JobOptions,
    parse_options,
)
from jobs.runner import JobRunner
from jobs.shapes import JobAccepted, JobPoll, queue_place
from jobs.webhooks import submit_refusal
from plugins.framework import Action


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
            OpenApiParameter(
                RETRY_HEADER,
                {"type": "string", "pattern": f"^(?:[1-9]|{MAX_RETRIES})$"},
                OpenApiParameter.HEADER,
                description=(
                    f"With a job header: up to this many more attempts (1 to {MAX_RETRIES}) when an attempt ends "
                    "transient (408, 502, 503, 504, a plugin's own `retry=True`, or a restart of the worker under it): "
                    "the job goes back to its page's queue after its back-off instead of ending. The poll shows "
                    "`attempt`, `attempts` and `next_attempt_at`; the job's status and result are its last attempt's, "
                    "and only its end is delivered. On a plain call: 400."
                ),
            ),
            OpenApiParameter(
                BACKOFF_HEADER,
                {"type": "string", "pattern": f"^{ttl_pattern(MAX_BACKOFF_S)}$"},
                OpenApiParameter.HEADER,
                description=(
                    f"With {RETRY_HEADER}: the first back-off in seconds (more than 0, at most {MAX_BACKOFF_S:g}, "
                    f"default {DEFAULT_BACKOFF_S:g}), doubled after each attempt, within 20 % either way. Without "
                    f"{RETRY_HEADER}: 400."
                ),
            ),
            OpenApiParameter(
                NOTIFY_HEADER,
                callback_schema(),
                OpenApiParameter.HEADER,
                description=(
                    "With a job header: when the job's plugin asks a person for help (`ctx.ask_human`), POST a "
                    "Standard Webhooks notification of type `job.needs_human` here, signed like a webhook job's "
                    f"end. The same rules as {CALLBACK_HEADER}; on a plain call: 400. The job's end is delivered "
                    "as before."
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
            503: "The browser is not running, a family's own service is off, or MAX_JOBS jobs are held (job starts; see Retry-After).",
        },
    }


def runner_of(request: Any) -> JobRunner:
    """The job runner of the worker that serves `request` (core/runtime.py)."""
    return runtime_of(request).jobs


class JobStart:
    """What the plugin route is given to run a call as a job: it reads the
    job headers, starts the job on the job runner of the request's worker
    and answers 202 (see `plugins.views.JobStarter`). It holds no state."""

    @functools.cached_property
    def jobs_url(self) -> str:
        """`/api/v1/jobs`, under which each job is polled: looked up at the
        first start (the URLconf that builds this is not loaded yet), not at
        every start."""
        return reverse("jobs")

    async def options(self, request: HttpRequest) -> JobOptions | None:
        options = parse_options(request)
        if options is not None and options.callback and (refused := await submit_refusal(options.callback)):
            raise BadJobHeader(CALLBACK_HEADER, refused)
        if options is not None and options.notify and (refused := await submit_refusal(options.notify, NOTIFY_HEADER)):
            raise BadJobHeader(NOTIFY_HEADER, refused)
        return options

    async def start(
        self, request: HttpRequest, *, page: ManagedPage | None, action: Action, params: dict[str, Any],
        lease_id: str | None, options: JobOptions,
    ) -> HttpResponse:
        job = await runner_of(request).submit(page=page, action=action, params=params, lease_id=lease_id, options=options)
        return self.accepted(request, job)

    def accepted(self, request: HttpRequest, job: Job) -> HttpResponse:
        """The 202 of a job just started: where to poll it; with
        X-Queue-Timeout, whether it waits; for a re-run, the job it re-runs."""
        job = runner_of(request).shown(job)
        body = {
            "success": True,
            "page_id": job.page_id,
            "job_id": job.id,
            "status_url": f"{self.jobs_url}/{job.id}",
            "ttl": job.ttl,
            "callback": job.callback,
        }
        if job.queue_timeout is not None:
            body["state"] = Job.State.QUEUED if job.state == Job.State.QUEUED else Job.State.RUNNING
            body["queue"] = queue_place(job)
        if job.rerun_of is not None:
            body["rerun_of"] = job.rerun_of
        return answer(JobAccepted, body, 202)

    def describe(self) -> dict[str, Any]:
        return job_description()
