"""A schedule as clients send it and see it. The input shape checks JSON
types strictly (a number is not a string, `true` is not 1) and describes
the body in the OpenAPI document; what the values may be is
`schedules.rules.clean`'s, which the admin uses too."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from browser.pages import PAGE_ID_PATTERN
from core.numbers import decimal, whole_number_problem
from core.shapes import JOB_ID_PATTERN, PageSuccess, Success, Text
from jobs.options import DEFAULT_BACKOFF_S, MAX_BACKOFF_S, MAX_QUEUE_TIMEOUT_S, MAX_RETRIES
from schedules import rules, timing
from schedules.models import Schedule

# --- strict JSON types ----------------------------------------------------------------------


@extend_schema_field({"type": "integer"})
class WholeNumber(serializers.Field):
    """A JSON integer: not a boolean, a string or a float, and of at most 50
    digits (`core.numbers.whole_number_problem`)."""

    def to_internal_value(self, data: Any) -> int:
        if type(data) is not int or whole_number_problem(data):
            raise serializers.ValidationError("must be a whole number.")
        return data

    def to_representation(self, value: int) -> int:
        return value


@extend_schema_field({"type": "number"})
class Seconds(serializers.Field):
    """A JSON number: not a boolean or a string (`core.numbers.decimal`)."""

    def to_internal_value(self, data: Any) -> float:
        # A JSON number only (not a string), finite: 1e400 is no number, and
        # an integer of hundreds of digits none a float holds (core.numbers).
        number = decimal(data) if isinstance(data, int | float) else None
        if number is None:
            raise serializers.ValidationError("must be a number of seconds.")
        return number

    def to_representation(self, value: float) -> float:
        return value


@extend_schema_field({"type": "boolean"})
class Boolean(serializers.Field):
    """JSON's `true` or `false`, nothing else."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            raise serializers.ValidationError("must be true or false.")
        return data

    def to_representation(self, value: bool) -> bool:
        return value


class ParamsObject(serializers.DictField):
    """A JSON object, kept as sent (the action's serializer checks it)."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise serializers.ValidationError("must be a JSON object of the action's parameters.")
        return data


# --- what a client sends --------------------------------------------------------------------


class ScheduleInput(serializers.Serializer):
    """A new schedule (POST), or the fields a PATCH changes."""

    name = Text(
        max_length=100, pattern=rules.NAME_PATTERN.pattern,
        help_text="Unique: 1 to 100 characters of A-Z, a-z, 0-9, '.', '_' and '-' (not 16 hex digits, an id's form).",
    )
    cron = Text(
        max_length=timing.MAX_CRON_LENGTH,
        help_text=(
            "A Debian cron expression, 5 fields (`0 9 * * 1-5`: minute hour day month weekday), or 6 with the "
            "seconds first (`*/10 * * * * *`). Read by cronsim; its error is the 400's sentence."
        ),
    )
    timezone = Text(max_length=64, required=False, help_text="An IANA time zone (`Europe/Paris`); default `UTC`.")
    page_id = Text(
        max_length=32, pattern=PAGE_ID_PATTERN.pattern,
        help_text="The page each fire's job runs on (a page id, which must be open when it fires), or `any`.",
    )
    plugin = Text(max_length=200, pattern="[^/]+/[^/]+", help_text="The action, `family/action`.")
    params = ParamsObject(required=False, help_text="The action's parameters, checked by the action at once and at each fire.")
    callback_url = Text(
        max_length=2048, required=False, allow_null=True,
        help_text="X-Callback-Url of each fire's job (a webhook job). Exactly one of callback_url and result_ttl.",
    )
    result_ttl = Seconds(
        required=False, allow_null=True,
        help_text="X-Result-Ttl of each fire's job (a polling job): more than 0, at most MAX_TTL_S.",
    )
    queue_timeout = Seconds(
        required=False, allow_null=True,
        help_text=(
            f"X-Queue-Timeout: how long a fire's job waits for a busy page (more than 0, at most {MAX_QUEUE_TIMEOUT_S:g}). "
            f"Default (null): until the schedule's next fire, at most {MAX_QUEUE_TIMEOUT_S:g} s, at least 1 s."
        ),
    )
    priority = WholeNumber(required=False, help_text="X-Priority, 0 (default) to 9.")
    retry = WholeNumber(required=False, help_text=f"X-Retry: 0 (default, none) or 1 to {MAX_RETRIES} more attempts.")
    retry_backoff = Seconds(
        required=False, help_text=f"X-Retry-Backoff with retry: more than 0, at most {MAX_BACKOFF_S:g}; default {DEFAULT_BACKOFF_S:g}."
    )
    overlap = serializers.ChoiceField(
        choices=Schedule.Overlap.values, required=False,
        help_text=(
            "While the previous job still waits or runs: `skip` (default; the fire is counted `skipped`), "
            "`queue` (start anyway; it waits its turn), `cancel_running` (cancel it, then start)."
        ),
    )
    catchup_s = Seconds(
        required=False,
        help_text=(
            "At the worker's start, the latest fire missed while it was stopped still fires if it is less than this "
            f"old (0 to {rules.MAX_CATCHUP_S:.0f}; default 0: none). The others are counted `missed`."
        ),
    )
    paused = Boolean(required=False, help_text="A paused schedule does not fire (default false).")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(self.initial_data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({unknown[0][:100]: "not a field of a schedule."})
        return attrs


# --- what a client sees ---------------------------------------------------------------------


class ScheduleBody(serializers.Serializer):
    schedule_id = serializers.RegexField(JOB_ID_PATTERN)
    name = serializers.CharField()
    cron = serializers.CharField()
    timezone = serializers.CharField()
    page_id = serializers.CharField(help_text="A page id, or `any`.")
    plugin = serializers.CharField(help_text="`family/action`.")
    params = serializers.DictField()
    callback_url = serializers.CharField(
        allow_null=True, help_text="To a read key, without its user-info and with `…` for its query string.",
    )
    result_ttl = serializers.FloatField(allow_null=True)
    queue_timeout = serializers.FloatField(allow_null=True, help_text="null: until the next fire, at most an hour.")
    priority = serializers.IntegerField(min_value=0, max_value=9)
    retry = serializers.IntegerField(min_value=0, max_value=MAX_RETRIES)
    retry_backoff = serializers.FloatField()
    overlap = serializers.ChoiceField(choices=Schedule.Overlap.values)
    catchup_s = serializers.FloatField(min_value=0)
    paused = serializers.BooleanField()
    next_fire_at = serializers.FloatField(allow_null=True, help_text="Epoch seconds of the next fire; null while paused.")
    last_fired_at = serializers.FloatField(allow_null=True, help_text="Epoch seconds: the instant of the last fire that started a job.")
    last_job_id = serializers.CharField(allow_null=True, help_text="The job the last fire started.")
    fired = serializers.IntegerField(min_value=0, help_text="Fires that started a job.")
    skipped = serializers.IntegerField(min_value=0, help_text="Fires skipped: the previous job still ran (overlap skip).")
    missed = serializers.IntegerField(min_value=0, help_text="Fires missed while the worker was stopped.")
    refused = serializers.IntegerField(min_value=0, help_text="Fires whose job start was refused (see last_error).")
    last_error = serializers.CharField(allow_null=True, help_text="Why the last refused fire was refused.")
    last_refused_at = serializers.FloatField(allow_null=True, help_text="Epoch seconds: when the last refused fire was refused.")
    created_at = serializers.FloatField()
    updated_at = serializers.FloatField()

    def to_representation(self, schedule: Schedule) -> dict[str, Any]:
        return {
            "schedule_id": schedule.id,
            **{name: getattr(schedule, name) for name in rules.FIELDS},
            "next_fire_at": None if schedule.paused else schedule.next_fire_at,
            **{
                name: getattr(schedule, name)
                for name in (
                    "last_fired_at", "last_job_id", "fired", "skipped", "missed", "refused", "last_error", "last_refused_at",
                )
            },
            "created_at": schedule.created_at,
            "updated_at": schedule.updated_at,
        }


class ScheduleShape(PageSuccess, ScheduleBody):
    """One schedule; `page_id` is its page (or `any`)."""

    def to_representation(self, schedule: Schedule) -> dict[str, Any]:
        return {"success": True, **ScheduleBody.to_representation(self, schedule)}


class ScheduleList(Success):
    schedules = ScheduleBody(many=True, help_text="By name.")
