"""The job headers of a plugin call: `X-Callback-Url` or `X-Result-Ttl`, never both.

A header that is malformed, doubled or sent without the others it needs is
refused with `BadJobHeader`, naming it (the API answers 400).

What X-Retry makes of an attempt's end is here too (`transient`,
`back_off_s`, `wait_in_line_s`). An attempt that fails for a reason that
may pass (a time limit, the browser or the site failing, a restart) goes
back to its page's queue after a back-off of `X-Retry-Backoff × 2^(k-1)`
seconds (k the attempt that just ended), within ±20 % so that jobs failing
together do not come back together. Everything else ends the job as it
would without X-Retry. Which failures may pass is the errors' to say
(`transient`, core/errors.py), not their statuses': the attempt's outcome
carries its error's word.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.http import HttpRequest

from core.errors import BadJobHeader
from core.numbers import PLAIN_DECIMAL, WHOLE_NUMBER, seconds
from plugins import debug

if TYPE_CHECKING:
    from jobs.models import Job
    from plugins.running import Outcome

CALLBACK_HEADER = "X-Callback-Url"
NOTIFY_HEADER = "X-Notify-Url"
TTL_HEADER = "X-Result-Ttl"
IDEMPOTENCY_HEADER = "Idempotency-Key"
QUEUE_TIMEOUT_HEADER = "X-Queue-Timeout"
PRIORITY_HEADER = "X-Priority"
RETRY_HEADER = "X-Retry"
BACKOFF_HEADER = "X-Retry-Backoff"
MAX_RETRIES = 10
MAX_BACKOFF_S = 600.0
DEFAULT_BACKOFF_S = 5.0
MAX_QUEUE_TIMEOUT_S = 3600.0
MAX_PRIORITY = 9
MAX_CALLBACK_LENGTH = 2048
MAX_IDEMPOTENCY_KEY = 255


@dataclass(frozen=True)
class JobOptions:
    ttl: float | None = None  # polling: seconds the result is held after the end
    callback: str | None = None  # webhook: where the result is POSTed
    idempotency_key: str | None = None  # a repeat of the same start answers the same 202
    # Queueing (opt-in): how long a start that finds its page busy may wait
    # for it, and its place among the waiting (higher first).
    queue_timeout: float | None = None
    priority: int = 0
    # Retries (opt-in): how many more attempts a transient failure may take,
    # and the first back-off (doubling after each attempt).
    retries: int = 0
    retry_backoff: float = DEFAULT_BACKOFF_S
    # Where the job came from, when not from a client's start: the job it
    # re-runs, the schedule that fired it.
    rerun_of: str | None = None
    schedule_id: str | None = None
    # Where a signed `job.needs_human` notification goes when its plugin asks a person.
    notify: str | None = None
    # X-Debug as sent (None: DEBUG_ARTIFACTS decides when it runs).
    debug: str | None = None

    @classmethod
    def again(cls, job: Job) -> JobOptions:
        """What a re-run of `job` asks: its job headers but its Idempotency-Key."""
        return cls(
            ttl=job.ttl, callback=job.callback, queue_timeout=job.queue_timeout, priority=job.priority,
            retries=job.retries, retry_backoff=job.retry_backoff or DEFAULT_BACKOFF_S, rerun_of=job.id,
            notify=job.notify_url, debug=job.debug,
        )

    def digest(self, page_id: str, route: str, params: dict[str, Any]) -> str:
        """What makes two starts the same request: route, page, parameters and job headers."""
        request = [route, page_id, params, self.ttl, self.callback]
        if self.queue_timeout is not None or self.priority:
            request += [self.queue_timeout, self.priority]
        if self.retries:
            request += [self.retries, self.retry_backoff]
        if self.notify:
            request += [self.notify]
        if self.debug is not None:
            request += [self.debug]
        return hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()

    @property
    def mode(self) -> str:
        return "webhook" if self.callback else "poll"


def parse_options(request: HttpRequest) -> JobOptions | None:
    """The job a request asks for, None for a plain call, or BadJobHeader for
    a bad or doubled header. A repeated header arrives joined with commas and is bad."""
    callback = request.headers.get(CALLBACK_HEADER)
    ttl = request.headers.get(TTL_HEADER)
    if callback is not None and ttl is not None:
        raise BadJobHeader(CALLBACK_HEADER, f"Send {CALLBACK_HEADER} or {TTL_HEADER}, not both: a job is delivered one way.")
    queue_timeout = request.headers.get(QUEUE_TIMEOUT_HEADER)
    priority = request.headers.get(PRIORITY_HEADER)
    retry = request.headers.get(RETRY_HEADER)
    backoff = request.headers.get(BACKOFF_HEADER)
    notify = request.headers.get(NOTIFY_HEADER)
    if ttl is None and callback is None:
        if notify is not None:
            raise BadJobHeader(NOTIFY_HEADER, f"{NOTIFY_HEADER} is a job's: send it with {TTL_HEADER} or {CALLBACK_HEADER}.")
        if queue_timeout is not None or priority is not None:
            header = QUEUE_TIMEOUT_HEADER if queue_timeout is not None else PRIORITY_HEADER
            raise BadJobHeader(
                header, f"{QUEUE_TIMEOUT_HEADER} and {PRIORITY_HEADER} queue a job: send them with {TTL_HEADER} or {CALLBACK_HEADER}."
            )
        if retry is not None or backoff is not None:
            header = RETRY_HEADER if retry is not None else BACKOFF_HEADER
            raise BadJobHeader(header, f"{RETRY_HEADER} and {BACKOFF_HEADER} retry a job: send them with {TTL_HEADER} or {CALLBACK_HEADER}.")
        return None  # a plain call: Idempotency-Key is not read
    if backoff is not None and retry is None:
        raise BadJobHeader(BACKOFF_HEADER, f"{BACKOFF_HEADER} is the back-off of {RETRY_HEADER}: send it with {RETRY_HEADER}.")
    key = request.headers.get(IDEMPOTENCY_HEADER)
    queueing = {
        "idempotency_key": parse_idempotency_key(key) if key is not None else None,
        "queue_timeout": plain_seconds(queue_timeout, most=MAX_QUEUE_TIMEOUT_S, what=QUEUE_TIMEOUT_HEADER)
        if queue_timeout is not None else None,
        "priority": parse_priority(priority) if priority is not None else 0,
        "retries": parse_retries(retry) if retry is not None else 0,
        "retry_backoff": plain_seconds(backoff, most=MAX_BACKOFF_S, what=BACKOFF_HEADER)
        if backoff is not None else DEFAULT_BACKOFF_S,
        "notify": parse_callback(notify, header=NOTIFY_HEADER) if notify is not None else None,
        "debug": debug.parse_mode(request.headers.get(debug.HEADER)),
    }
    if ttl is not None:
        return JobOptions(ttl=parse_ttl(ttl), **queueing)
    return JobOptions(callback=parse_callback(callback), **queueing)


def parse_priority(raw: str) -> int:
    value = raw.strip()
    if len(value) != 1 or not "0" <= value <= str(MAX_PRIORITY):
        raise BadJobHeader(PRIORITY_HEADER, f"{PRIORITY_HEADER} must be a whole number from 0 to {MAX_PRIORITY}.")
    return int(value)


def parse_retries(raw: str) -> int:
    value = raw.strip()
    if not WHOLE_NUMBER.fullmatch(value) or value[0] in "-0" or len(value) > 2 or not 1 <= int(value) <= MAX_RETRIES:
        raise BadJobHeader(RETRY_HEADER, f"{RETRY_HEADER} must be a whole number from 1 to {MAX_RETRIES}: the attempts after the first.")
    return int(value)


# Printable ASCII, space included (the IETF draft's keys are strings).
IDEMPOTENCY_KEY_PATTERN = re.compile(rf"[\x20-\x7e]{{1,{MAX_IDEMPOTENCY_KEY}}}")


def parse_idempotency_key(raw: str) -> str:
    if not IDEMPOTENCY_KEY_PATTERN.fullmatch(raw):
        raise BadJobHeader(IDEMPOTENCY_HEADER, f"{IDEMPOTENCY_HEADER} must be 1 to {MAX_IDEMPOTENCY_KEY} printable ASCII characters.")
    return raw


# Plain decimal seconds (core.numbers, the API's one rule for numbers):
# Python's float() would also take "1_0", "1e3" and non-ASCII digits, which
# no client means. A header's value is read without the spaces around it,
# which HTTP does not count as part of it (RFC 9110, 5.5).
TTL_PATTERN = re.compile(PLAIN_DECIMAL, re.ASCII)


def plain_seconds(raw: str, *, most: float, what: str, header: bool = True) -> float:
    """Plain decimal seconds in (0, most], or BadJobHeader naming `what`; a
    query's value (`header=False`) is read as sent, spaces and all."""
    raw = raw.strip() if header else raw
    value = seconds(raw, most=most, longest=None) if TTL_PATTERN.fullmatch(raw) else None  # unsigned: "-0" is no header's
    if value is None:
        raise BadJobHeader(what, f"{what} must be a number of seconds, more than 0 and at most {most:g}.")
    return value


def parse_ttl(raw: str) -> float:
    return plain_seconds(raw, most=settings.MAX_TTL_S, what=TTL_HEADER)


def parse_callback(raw: str, *, header: str = CALLBACK_HEADER) -> str:
    url = raw.strip()
    bad = BadJobHeader(header, f"{header} must be an absolute http or https URL with a host.")
    if not url or len(url) > MAX_CALLBACK_LENGTH or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise bad
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        raise bad from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise bad
    try:
        httpx.URL(url).host.encode("idna")  # the URL must be one the webhook can be sent to
    except (httpx.InvalidURL, UnicodeError, ValueError):
        raise bad from None
    return url


# The spread of a retry's back-off, either way.
JITTER = 0.2


def transient(outcome: Outcome) -> bool:
    """Whether the attempt's end is worth another: it failed, and its error
    may pass (a PluginError's `retry=` is its word)."""
    return bool(outcome.transient) and outcome.status != 200


def back_off_s(first_s: float, ended_attempt: int, *, rng: random.Random | None = None) -> float:
    """Seconds before the attempt after `ended_attempt` (from 1) goes back in line."""
    spread = (rng or random).uniform(1 - JITTER, 1 + JITTER)
    return first_s * 2 ** (ended_attempt - 1) * spread


def wait_in_line_s(queue_timeout: float | None) -> float:
    """How long a retry may wait for its page once back in line: the job's
    X-Queue-Timeout, or the longest a queued job may wait when it sent none
    (it was accepted already: a busy page delays it rather than ends it)."""
    return queue_timeout if queue_timeout is not None else MAX_QUEUE_TIMEOUT_S
