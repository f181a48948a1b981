"""Changes of the schedules: synchronous, each one statement or one
transaction. A refusal is a domain error (core/errors.py); the fields come
checked by `schedules.rules.clean`, and `next_fire_at` is worked out here,
from the clock the caller gives.

After each change `schedules_changed` is sent, so the worker's firing loop
(schedules/firing.py) wakes at once, whether the change came from the API,
on the database thread, or from the admin, on one of Django's threads. A
command in another process cannot reach it: the loop reads the store every
SCHEDULE_CHECK_S too.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.dispatch import Signal

from core.errors import NoSuchSchedule, ScheduleNameTaken, TooManySchedules
from schedules import timing
from schedules.models import Schedule

# Sent (with no arguments) after any change of a schedule.
schedules_changed = Signal()

NO_SUCH_SCHEDULE = "No such schedule: the id (or name) is unknown."


def name_taken(name: str) -> ScheduleNameTaken:
    return ScheduleNameTaken(f"A schedule named {name} exists already; names are unique.")


def next_after(fields: dict[str, Any], now: float) -> float | None:
    return timing.next_fire_after(fields["cron"], fields["timezone"], now)


def too_many() -> TooManySchedules:
    return TooManySchedules(f"All {settings.SCHEDULES_MAX} schedules exist (SCHEDULES_MAX); delete one first.")


def create_schedule(*, fields: dict[str, Any], now: float) -> Schedule:
    """Store a new schedule (`fields` as `rules.clean` answers them); its
    first fire is the first instant after `now`. TooManySchedules when
    SCHEDULES_MAX are stored.

    The count and the insert are one step: the store's transactions begin
    IMMEDIATE (settings.DATABASES), so this one holds SQLite's write lock from
    the count to the commit, and no other create, from this process's
    database thread, an admin thread or another process, counts in between."""
    schedule = Schedule(
        id=secrets.token_hex(8), **fields, next_fire_at=next_after(fields, now), created_at=now, updated_at=now,
    )
    try:
        with transaction.atomic():
            if Schedule.objects.count() >= settings.SCHEDULES_MAX:
                raise too_many()
            if Schedule.objects.filter(name=fields["name"]).exists():
                raise name_taken(fields["name"])
            schedule.save(force_insert=True)
    except IntegrityError:
        raise name_taken(fields["name"]) from None
    schedules_changed.send(sender=Schedule)
    return schedule


def update_schedule(*, schedule_id: str, fields: dict[str, Any], now: float) -> Schedule:
    """Replace the schedule's settings with `fields` (the whole schedule, as
    `rules.clean` answers it). Its next fire stays when its cron, time zone
    and pause do (an edit just after an instant must not drop that instant's
    fire before the loop claims it); else it is worked out again from now.
    Its counters and its last fire stay."""
    try:
        with transaction.atomic():
            schedule = Schedule.objects.with_id(schedule_id)
            if schedule is None:
                raise NoSuchSchedule(NO_SUCH_SCHEDULE)
            if Schedule.objects.filter(name=fields["name"]).exclude(id=schedule_id).exists():
                raise name_taken(fields["name"])
            timing_kept = all(getattr(schedule, name) == fields[name] for name in ("cron", "timezone", "paused"))
            for name, value in fields.items():
                setattr(schedule, name, value)
            if not timing_kept or schedule.next_fire_at is None:
                schedule.next_fire_at = next_after(fields, now)
            schedule.updated_at = now
            schedule.save()
    except IntegrityError:
        raise name_taken(fields["name"]) from None
    schedules_changed.send(sender=Schedule)
    return schedule


def delete_schedule(*, schedule_id: str) -> None:
    """Delete the schedule; the jobs it fired stay, with its id."""
    deleted, _ = Schedule.objects.filter(id=schedule_id).delete()
    if not deleted:
        raise NoSuchSchedule(NO_SUCH_SCHEDULE)
    schedules_changed.send(sender=Schedule)


def set_paused(*, name_or_id: str, paused: bool, now: float) -> Schedule:
    """Pause a schedule, or resume it: a resumed schedule fires next at its
    first instant after now (the fires while it was paused are not missed:
    nobody meant them)."""
    with transaction.atomic():
        schedule = Schedule.objects.named_or_id(name_or_id)
        if schedule is None:
            raise NoSuchSchedule(NO_SUCH_SCHEDULE)
        changes: dict[str, Any] = {"paused": paused, "updated_at": now}
        if not paused and schedule.paused:
            changes["next_fire_at"] = timing.next_fire_after(schedule.cron, schedule.timezone, now)
        Schedule.objects.filter(id=schedule.id).update(**changes)
    for name, value in changes.items():
        setattr(schedule, name, value)
    schedules_changed.send(sender=Schedule)
    return schedule


def request_fire(*, name_or_id: str, now: float) -> Schedule:
    """Ask the worker's loop to fire the schedule at its next check (from a
    command, in another process than the worker's)."""
    schedule = Schedule.objects.named_or_id(name_or_id)
    if schedule is None:
        raise NoSuchSchedule(NO_SUCH_SCHEDULE)
    Schedule.objects.filter(id=schedule.id).update(fire_requested_at=now)
    schedule.fire_requested_at = now
    schedules_changed.send(sender=Schedule)
    return schedule
