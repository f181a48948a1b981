"""Reads of the schedules: synchronous, one query each. The worker calls
them on its database thread; the commands and the tests call them as they are."""

from __future__ import annotations

from schedules.models import Schedule


def find_schedule(*, schedule_id: str) -> Schedule | None:
    return Schedule.objects.with_id(schedule_id)


def find_named(*, name_or_id: str) -> Schedule | None:
    return Schedule.objects.named_or_id(name_or_id)


def list_schedules() -> list[Schedule]:
    return list(Schedule.objects.listed())


def due_schedules(*, now: float) -> list[Schedule]:
    """The fires due now, earliest first: unpaused schedules at or past their
    instant, and any a command asked to fire."""
    return list(Schedule.objects.due(now))


def active_schedules() -> list[Schedule]:
    return list(Schedule.objects.active())


def earliest_fire_at() -> float | None:
    """The first instant an unpaused schedule fires at; None without one."""
    return Schedule.objects.earliest_fire_at()
