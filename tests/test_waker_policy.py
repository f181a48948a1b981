"""The waker's stop-or-recycle decision, a pure function, case by case."""

from __future__ import annotations

import pytest

from core.awake import WAKE_FILE, read_next_wake, write_next_wake
from waker.personas import ALWAYS, SLEEPY
from waker.policy import MAX_RETRY_S, Activity, retry_delay, stop_due


def activity(*, requests=0, jobs=0, webhooks=0, idle_s=0.0) -> Activity:
    return Activity(requests_in_flight=requests, jobs_in_flight=jobs, webhooks_pending=webhooks, idle_seconds=idle_s, read_at=0.0)


IDLE_60 = activity(idle_s=60.0)


@pytest.mark.parametrize(
    "mode, read, quiet, running_for, due",
    [
        # sleepy: stops once idle for its timeout (60 s here)
        (SLEEPY, IDLE_60, True, 300.0, True),
        (SLEEPY, activity(idle_s=59.9), True, 300.0, False),
        # ...counted from when the waker saw it answer, not from the process's own clock
        (SLEEPY, activity(idle_s=500.0), True, 59.0, False),
        # never under work: a request, a running job, a webhook waiting for delivery
        (SLEEPY, activity(requests=1, idle_s=600.0), True, 600.0, False),
        (SLEEPY, activity(jobs=1, idle_s=600.0), True, 600.0, False),
        (SLEEPY, activity(webhooks=1, idle_s=600.0), True, 600.0, False),
        # never while a request through the waker is in flight or began since the read
        (SLEEPY, IDLE_60, False, 300.0, False),
        # never on an activity it could not read
        (SLEEPY, None, True, 300.0, False),
        # always: recycled after recycle_s (3600 s here), idle or not, never under work
        (ALWAYS, activity(idle_s=0.0), True, 3600.0, True),
        (ALWAYS, IDLE_60, True, 3599.0, False),
        (ALWAYS, activity(jobs=1), True, 7200.0, False),
        (ALWAYS, activity(), False, 7200.0, False),
    ],
)
def test_stop_due(mode, read, quiet, running_for, due):
    assert stop_due(
        mode=mode, activity=read, quiet=quiet, running_for=running_for, idle_timeout_s=60.0, recycle_s=3600.0
    ) is due


def test_a_failed_always_start_is_retried_after_a_doubling_delay_up_to_a_minute():
    assert [retry_delay(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert retry_delay(100) == MAX_RETRY_S


@pytest.mark.parametrize(
    "next_wake_at, due",
    [
        (None, True),  # no schedule: idle is idle
        (100.0, True),  # its next fire is past the lead (30 s here): it may sleep and be woken
        (30.0, False),  # a fire due within the lead keeps it up
        (-5.0, False),  # so does one overdue
    ],
)
def test_a_sleepy_worker_is_not_stopped_just_before_its_schedules_fire(next_wake_at, due):
    read = Activity(
        requests_in_flight=0, jobs_in_flight=0, webhooks_pending=0, idle_seconds=600.0, read_at=0.0,
        next_wake_at=next_wake_at,
    )
    assert stop_due(
        mode=SLEEPY, activity=read, quiet=True, running_for=600.0, idle_timeout_s=60.0, recycle_s=3600.0,
        wake_lead_s=30.0,
    ) is due


def test_the_next_wake_is_read_back_from_the_store_as_written(tmp_path):
    assert read_next_wake(tmp_path) is None
    write_next_wake(tmp_path, 1_800_000_000.25)
    assert read_next_wake(tmp_path) == 1_800_000_000.25
    write_next_wake(tmp_path, None)
    assert read_next_wake(tmp_path) is None and not list(tmp_path.iterdir())
    (tmp_path / WAKE_FILE).write_text("garbage")
    assert read_next_wake(tmp_path) is None
