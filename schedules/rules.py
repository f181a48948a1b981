"""A schedule's rules, as pure functions: what a valid schedule is (one
function for the API and the admin alike), what a fire does while the
previous job still runs, how long a fire may wait for its page, and what
a start-up makes of the fires the worker was stopped for.

Each job-header field is checked by the header's own parser
(jobs/options.py), so a schedule refuses exactly what a client's start
would, in the same words, prefixed by the field's name.
"""

from __future__ import annotations

import asyncio
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings

from browser.pages import validate_page_id
from core.errors import BadJobHeader, InvalidPageId, InvalidSchedule
from core.rest import describe_errors
from core.routes import ANY
from jobs.options import (
    BACKOFF_HEADER,
    MAX_BACKOFF_S,
    MAX_QUEUE_TIMEOUT_S,
    PRIORITY_HEADER,
    QUEUE_TIMEOUT_HEADER,
    RETRY_HEADER,
    parse_callback,
    parse_priority,
    parse_retries,
    parse_ttl,
    plain_seconds,
)
from jobs.webhooks import submit_refusal
from plugins import declared
from plugins.framework import find_action
from schedules import timing
from schedules.models import Schedule

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
SCHEDULE_ID = re.compile(r"[0-9a-f]{16}")
MAX_CATCHUP_S = 31 * 24 * 3600.0

# What a schedule holds, in the order its fields are checked; a field left
# out of a new schedule takes its default (the first four have none).
REQUIRED = ("name", "cron", "page_id", "plugin")
DEFAULTS: dict[str, Any] = {
    "timezone": "UTC",
    "params": {},
    "callback_url": None,
    "result_ttl": None,
    "queue_timeout": None,
    "priority": 0,
    "retry": 0,
    "retry_backoff": 5.0,
    "overlap": Schedule.Overlap.SKIP,
    "catchup_s": 0.0,
    "paused": False,
}
FIELDS = (*REQUIRED[:2], "timezone", *REQUIRED[2:], *list(DEFAULTS)[1:])


def invalid(field: str, why: str) -> InvalidSchedule:
    return InvalidSchedule(field, why)


def as_header(seconds: Any) -> str:
    """A number as a header would carry it (plain decimal), for the header's own parser."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds):
        return "-"  # refused by the parser, in its words
    return format(Decimal(repr(seconds)), "f")


def header_rule(field: str, parse: Any, raw: str) -> Any:
    """`parse(raw)`, its BadJobHeader as this field's refusal."""
    try:
        return parse(raw)
    except BadJobHeader as refused:
        raise invalid(field, refused.message) from None


def clean(data: dict[str, Any]) -> dict[str, Any]:
    """The schedule `data` describes, checked field by field in FIELDS'
    order (the first bad one is refused, InvalidSchedule naming it) and
    completed with the defaults. Nothing is stored here."""
    missing = [field for field in REQUIRED if data.get(field) in (None, "")]
    if missing:
        raise invalid(missing[0], "this field is required.")
    fields = {**DEFAULTS, **{key: value for key, value in data.items() if key in FIELDS}}
    name = fields["name"]
    if not NAME_PATTERN.fullmatch(name):
        raise invalid("name", "1 to 100 characters of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or digit.")
    if SCHEDULE_ID.fullmatch(name):
        raise invalid("name", "16 hexadecimal digits would read as a schedule's id; choose another name.")
    try:
        timing.check_cron(fields["cron"])
    except timing.BadCron as refused:
        raise invalid("cron", f"{refused}.") from None
    try:
        timing.zone(fields["timezone"])
    except KeyError:
        raise invalid("timezone", "not a time zone name the worker knows (an IANA name such as Europe/Paris, or UTC).") from None
    if timing.next_fire_after(fields["cron"], fields["timezone"], 0.0) is None:
        raise invalid("cron", "it never fires.")
    if fields["page_id"] != ANY:
        try:
            validate_page_id(fields["page_id"])
        except InvalidPageId as refused:
            raise invalid("page_id", refused.message) from None
    fields["params"] = clean_plugin(fields["plugin"], fields["params"])
    clean_job_headers(fields)
    if fields["overlap"] not in Schedule.Overlap.values:
        raise invalid("overlap", f"one of {', '.join(Schedule.Overlap.values)}.")
    catchup = fields["catchup_s"]
    if isinstance(catchup, bool) or not isinstance(catchup, int | float) or not 0 <= catchup <= MAX_CATCHUP_S:
        raise invalid("catchup_s", f"a number of seconds from 0 to {MAX_CATCHUP_S:.0f} (31 days).")
    fields["catchup_s"] = float(catchup)
    if not isinstance(fields["paused"], bool):
        raise invalid("paused", "true or false.")
    return fields


def clean_plugin(plugin: str, params: Any) -> dict[str, Any]:
    """The plugin must be an action of this worker, and `params` what it
    takes (its own serializer: `Action.validate`). The parameters are kept
    as sent; each fire validates them again, as a start would."""
    family, _, action = plugin.partition("/")
    found = find_action(family, action) if action else None
    if found is None:
        raise invalid("plugin", f"no plugin action {plugin[:200]} on this worker (family/action).")
    if not isinstance(params, dict):
        raise invalid("params", "a JSON object of the action's parameters.")
    if found.params is not None:
        serializer = found.params(data=params)
        if not serializer.is_valid():
            # Named by its path: `params.seconds`, `params.wait_for.state`.
            message = describe_errors(serializer.errors, "params")
            raise InvalidSchedule("params", message.split(": ", 1)[-1], message)
    # What the fire's own validation (`Action.validate`) refuses besides.
    refused = declared.refusal(found.params, params, route=found.route, extra=found.extra_params)
    if refused is not None:  # a parameter it does not declare, an integer not written as one
        raise invalid("params", refused)
    return params


def clean_job_headers(fields: dict[str, Any]) -> None:
    """callback_url | result_ttl, queue_timeout, priority, retry and
    retry_backoff, as their headers (X-Callback-Url, X-Result-Ttl, ...)."""
    callback, ttl = fields["callback_url"], fields["result_ttl"]
    if (callback is None) == (ttl is None):
        raise invalid(
            "callback_url" if callback is not None else "result_ttl",
            "give callback_url (a webhook) or result_ttl (polling), exactly one: a fired job is delivered one way.",
        )
    if callback is not None:
        fields["callback_url"] = header_rule("callback_url", parse_callback, callback if isinstance(callback, str) else "")
    else:
        fields["result_ttl"] = header_rule("result_ttl", parse_ttl, as_header(ttl))
    if fields["queue_timeout"] is not None:
        fields["queue_timeout"] = header_rule(
            "queue_timeout",
            lambda raw: plain_seconds(raw, most=MAX_QUEUE_TIMEOUT_S, what=QUEUE_TIMEOUT_HEADER),
            as_header(fields["queue_timeout"]),
        )
    priority = fields["priority"]
    fields["priority"] = header_rule(
        "priority", parse_priority, str(priority) if type(priority) is int else f"{PRIORITY_HEADER}?"
    )
    retry = fields["retry"]
    if retry != 0 or type(retry) is not int:
        fields["retry"] = header_rule("retry", parse_retries, str(retry) if type(retry) is int else f"{RETRY_HEADER}?")
    fields["retry_backoff"] = header_rule(
        "retry_backoff",
        lambda raw: plain_seconds(raw, most=MAX_BACKOFF_S, what=BACKOFF_HEADER),
        as_header(fields["retry_backoff"]),
    )


async def check_callback_allowed(url: str | None) -> None:
    """WEBHOOK_REFUSE_PRIVATE: the callback's host must not resolve into the
    host's own networks, as for X-Callback-Url on a start."""
    if url is not None and (refused := await submit_refusal(url)):
        raise invalid("callback_url", refused)


def check_callback_allowed_sync(url: str | None) -> None:
    """`check_callback_allowed` for sync code with no event loop of its own (the admin's form)."""
    if url is not None and settings.WEBHOOK_REFUSE_PRIVATE:
        asyncio.run(check_callback_allowed(url))


# --- what a fire does -------------------------------------------------------------------------

START, SKIP, CANCEL_THEN_START = "start", "skip", "cancel_then_start"


def overlap_decision(overlap: str, previous_live: bool) -> str:
    """What a fire does, given whether the schedule's previous job is still
    queued or running: start, skip, or cancel that job and then start."""
    if not previous_live or overlap == Schedule.Overlap.QUEUE:
        return START
    return SKIP if overlap == Schedule.Overlap.SKIP else CANCEL_THEN_START


def fire_queue_timeout(queue_timeout: float | None, fire_at: float, next_fire_at: float | None) -> float:
    """How long a fire's job may wait for a busy page: the schedule's own
    queue_timeout, else until its next fire (a wait past it would only meet
    the next job), at most MAX_QUEUE_TIMEOUT_S and at least a second."""
    if queue_timeout is not None:
        return queue_timeout
    if next_fire_at is None:
        return MAX_QUEUE_TIMEOUT_S
    return min(MAX_QUEUE_TIMEOUT_S, max(1.0, next_fire_at - fire_at))


@dataclass(frozen=True)
class CatchUp:
    """What a start makes of a schedule whose instant passed while the worker was stopped."""

    fire_at: float | None  # the latest missed fire, fired now; None: nothing fires
    missed: int  # the other missed fires (all of them, when none fires)
    next_fire_at: float | None  # the first instant after now


def catch_up(*, cron: str, zone: str, due: float, now: float, catchup_s: float) -> CatchUp:
    """The fires from `due` (the stored next instant) to `now`: the latest
    fires at once if it is less than `catchup_s` old, the others are missed."""
    missed = timing.fires_between(cron, zone, due, now)
    latest = missed[-1] if missed else None
    count = len(missed)
    if count == timing.MAX_COUNTED_FIRES:
        latest = timing.latest_fire_at_or_before(cron, zone, now) or latest
    following = timing.next_fire_after(cron, zone, now)
    if latest is not None and now - latest < catchup_s:
        return CatchUp(fire_at=latest, missed=count - 1, next_fire_at=following)
    return CatchUp(fire_at=None, missed=count, next_fire_at=following)
