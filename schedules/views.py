"""Schedules over HTTP: create and list them, read, change and delete one,
and fire one now. Reads take a read key; the rest needs the full key.
Every field is checked (`ScheduleInput` for the JSON types, then
`rules.clean` for the values) before anything is stored."""

from __future__ import annotations

import copy
import time
from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema

from core.api import ApiError
from core.auth import READ, url_for_log
from core.db_thread import on_db_thread
from core.errors import NoSuchSchedule
from core.rest import ApiView, answer, describe_errors
from core.runtime import runtime_of
from core.schema import BODY_ERRORS, operation
from core.shapes import JOB_ID_PATTERN
from jobs.shapes import JobAccepted
from jobs.starting import JobStart
from schedules import rules
from schedules.selectors import find_schedule, list_schedules
from schedules.services import NO_SUCH_SCHEDULE, create_schedule, delete_schedule, update_schedule
from schedules.shapes import ScheduleInput, ScheduleList, ScheduleShape

SCHEDULE_ID_PARAMETER = OpenApiParameter(
    "schedule_id", str, OpenApiParameter.PATH, pattern=JOB_ID_PATTERN, description="A schedule's id; another answers 404."
)
FIELD_ERRORS = "A field is missing, of the wrong type or not valid (as its job header would be); the sentence names it."


def checked(data: dict[str, Any], *, partial: bool) -> dict[str, Any]:
    """The body's JSON types: the fields sent, or 400 naming the first bad one."""
    serializer = ScheduleInput(data=data, partial=partial)
    if not serializer.is_valid():
        raise ApiError(400, describe_errors(serializer.errors))
    return dict(serializer.validated_data)


async def cleaned(data: dict[str, Any]) -> dict[str, Any]:
    """The whole schedule, its values checked, the callback's host too (WEBHOOK_REFUSE_PRIVATE)."""
    fields = rules.clean(data)
    await rules.check_callback_allowed(fields["callback_url"])
    return fields


def shown(schedule: Any, request: Any) -> Any:
    """A schedule as the asking key may see it: to a read key, its callback
    as the logs show it (no user-info, no query string)."""
    if request.user.role != READ or not schedule.callback_url:
        return schedule
    seen = copy.copy(schedule)
    seen.callback_url = url_for_log(schedule.callback_url)
    return seen


async def existing(schedule_id: str) -> Any:
    schedule = None
    if rules.SCHEDULE_ID.fullmatch(schedule_id):
        schedule = await on_db_thread(find_schedule)(schedule_id=schedule_id)
    if schedule is None:
        raise NoSuchSchedule(NO_SUCH_SCHEDULE)
    return schedule


class ScheduleCollection(ApiView):
    does = {"POST": "creating a schedule"}

    @extend_schema(
        **operation(
            operation_id="listSchedules",
            summary="List the schedules, by name",
            tags=["schedules"],
            answers={200: ScheduleList},
        )
    )
    async def get(self, request: Any) -> HttpResponse:
        schedules = await on_db_thread(list_schedules)()
        seen = [shown(schedule, request) for schedule in schedules]
        return answer(ScheduleList, {"success": True, "page_id": None, "schedules": seen})

    @extend_schema(
        **operation(
            operation_id="createSchedule",
            summary="Create a schedule",
            description=(
                "A cron schedule that starts a job at each of its instants, in its time zone, as a client's start "
                "with the schedule's job headers would. Every field is checked first, the action's parameters "
                "included; nothing is stored when one is refused. At most SCHEDULES_MAX schedules (default 100) are "
                "stored; one more answers 409."
            ),
            tags=["schedules"],
            request=ScheduleInput,
            answers={201: OpenApiResponse(ScheduleShape, "The schedule, with its first `next_fire_at`.")},
            errors={
                400: FIELD_ERRORS, 409: "Another schedule has this name, or SCHEDULES_MAX schedules exist.",
                **dict.fromkeys(BODY_ERRORS, ""),
            },
        )
    )
    async def post(self, request: Any) -> HttpResponse:
        fields = await cleaned(checked(request.data, partial=False))
        schedule = await on_db_thread(create_schedule)(fields=fields, now=time.time())
        return answer(ScheduleShape, schedule, 201)


class ScheduleDetail(ApiView):
    does = {"PATCH": "changing a schedule", "DELETE": "deleting a schedule"}

    @extend_schema(
        **operation(
            operation_id="getSchedule",
            summary="One schedule",
            tags=["schedules"],
            parameters=[SCHEDULE_ID_PARAMETER],
            answers={200: ScheduleShape},
            errors={404: "No such schedule."},
        )
    )
    async def get(self, request: Any, schedule_id: str) -> HttpResponse:
        return answer(ScheduleShape, shown(await existing(schedule_id), request))

    @extend_schema(
        **operation(
            operation_id="changeSchedule",
            summary="Change a schedule",
            description=(
                "The fields sent replace the schedule's; the result is checked as a new schedule would be "
                "(nothing is stored when a field is refused). Its next fire stays unless its cron, time zone or pause "
                "changed; then it is the first instant from now. "
                "Send `null` to clear callback_url, result_ttl or queue_timeout. Its counters stay."
            ),
            tags=["schedules"],
            parameters=[SCHEDULE_ID_PARAMETER],
            request=ScheduleInput,
            answers={200: ScheduleShape},
            errors={
                400: FIELD_ERRORS, 404: "No such schedule.", 409: "Another schedule has this name.",
                **dict.fromkeys(BODY_ERRORS, ""),
            },
        )
    )
    async def patch(self, request: Any, schedule_id: str) -> HttpResponse:
        changes = checked(request.data, partial=True)
        schedule = await existing(schedule_id)
        fields = await cleaned({**{name: getattr(schedule, name) for name in rules.FIELDS}, **changes})
        updated = await on_db_thread(update_schedule)(schedule_id=schedule.id, fields=fields, now=time.time())
        return answer(ScheduleShape, updated)

    @extend_schema(
        **operation(
            operation_id="deleteSchedule",
            summary="Delete a schedule",
            description="It fires no more; the jobs it started stay, and still name it (`schedule_id`).",
            tags=["schedules"],
            parameters=[SCHEDULE_ID_PARAMETER],
            answers={204: OpenApiResponse(description="Deleted; no body.")},
            errors={404: "No such schedule."},
        )
    )
    async def delete(self, request: Any, schedule_id: str) -> HttpResponse:
        schedule = await existing(schedule_id)
        await on_db_thread(delete_schedule)(schedule_id=schedule.id)
        return HttpResponse(status=204)


class ScheduleTrigger(ApiView):
    jobs = JobStart()
    does = {"POST": "firing a schedule"}

    @extend_schema(
        **operation(
            operation_id="triggerSchedule",
            summary="Fire a schedule now",
            description=(
                "Starts the schedule's job now, paused or not, with its overlap (`skip` while its previous job "
                "waits or runs: 409, counted `skipped`); its next fire stays as it was. Answers the job's 202, as a "
                "job start does. A refused start answers its status and is counted `refused`."
            ),
            tags=["schedules"],
            parameters=[SCHEDULE_ID_PARAMETER],
            request=None,
            answers={202: OpenApiResponse(JobAccepted, "The job started (or queued for its page).")},
            errors={
                400: "The action's parameters are no longer valid for it.",
                404: "No such schedule; or its page is not open, or its action is gone.",
                409: "Its previous job still waits or runs, and its overlap is `skip`.",
                423: "Its page is leased.",
                429: "Its page's queue is full (QUEUE_MAX).",
                503: "The browser is not running, or MAX_JOBS jobs are held.",
            },
        )
    )
    async def post(self, request: Any, schedule_id: str) -> HttpResponse:
        schedule = await existing(schedule_id)
        job, _ = await runtime_of(request).schedules.trigger(schedule)
        return self.jobs.accepted(request, job)
