"""The webhook schedule's slot arithmetic, on unsaved Job objects."""

from __future__ import annotations

import pytest

from jobs.models import Job


@pytest.fixture(autouse=True)
def schedule(settings):
    settings.WEBHOOK_ATTEMPTS_S = [0, 60, 300, 600]


def job(**fields) -> Job:
    return Job(id="0" * 16, mode="webhook", finished_at=1000.0, **fields)


@pytest.mark.parametrize(
    "last_slot, now, expected",
    [
        (-1, 1000.0, 0),  # the first attempt at the end
        (0, 1060.0, 1),  # on time
        (0, 1400.0, 2),  # slots 2 and 3 missed while down: one attempt, numbered 3
        (0, 1700.0, 3),  # everything missed: the last slot
        (1, 1200.0, 2),  # claimed early (not due): the next slot
    ],
)
def test_the_slot_due_is_the_latest_one_due(last_slot, now, expected):
    assert job(last_slot=last_slot).slot_due(now) == expected


def test_a_claim_without_an_outcome_resends_its_own_slot_not_the_next():
    crashed_mid_post = job(last_slot=0, claim_owner="1234-deadbeef0000")
    assert crashed_mid_post.slot_due(1020.0) == 0
    assert crashed_mid_post.slot_due(1061.0) == 1
