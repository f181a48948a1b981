"""When schedules fire (schedules/timing.py), in-process and without a
clock: every instant is one the test chooses, daylight-saving days in two
time zones included."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from schedules import timing

PARIS, NEW_YORK = "Europe/Paris", "America/New_York"


def at(wall: str, zone: str, fold: int = 0) -> float:
    """Epoch seconds of a wall-clock time in `zone` (`fold=1`: the second pass of a repeated hour)."""
    return datetime.fromisoformat(wall).replace(tzinfo=ZoneInfo(zone), fold=fold).timestamp()


def wall(instant: float, zone: str) -> str:
    """An instant as the zone's clock shows it, with its offset."""
    return datetime.fromtimestamp(instant, ZoneInfo(zone)).isoformat()


def fires(cron: str, zone: str, after: float, count: int) -> list[str]:
    found, instant = [], after
    for _ in range(count):
        instant = timing.next_fire_after(cron, zone, instant)
        found.append(wall(instant, zone))
    return found


def test_a_daily_time_the_clock_skips_fires_once_at_the_first_minute_that_exists():
    # Paris skips 02:00-03:00 on 2026-03-29, New York on 2026-03-08.
    assert fires("30 2 * * *", PARIS, at("2026-03-28T12:00", PARIS), 3) == [
        "2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00",
    ]
    assert fires("30 2 * * *", NEW_YORK, at("2026-03-07T12:00", NEW_YORK), 3) == [
        "2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00",
    ]


def test_a_daily_time_the_clock_repeats_fires_once_on_its_first_pass():
    # Paris repeats 02:00-03:00 on 2026-10-25, New York 01:00-02:00 on 2026-11-01.
    assert fires("30 2 * * *", PARIS, at("2026-10-24T12:00", PARIS), 2) == [
        "2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00",
    ]
    assert fires("30 1 * * *", NEW_YORK, at("2026-10-31T12:00", NEW_YORK), 2) == [
        "2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00",
    ]


def test_an_instant_in_the_second_pass_of_a_repeated_hour_never_fires_the_first_pass_again():
    """Read as a wall-clock time, 01:10 on the second pass is before 01:30 on
    the first, which has already happened: the next fire is the next day."""
    second_pass = at("2026-11-01T01:10", NEW_YORK, fold=1)
    assert wall(timing.next_fire_after("30 1 * * *", NEW_YORK, second_pass), NEW_YORK) == "2026-11-02T01:30:00-05:00"
    assert timing.next_fire_after("30 1 * * *", NEW_YORK, second_pass) > second_pass


def test_an_hourly_schedule_fires_each_real_hour_through_both_transitions():
    assert fires("15 * * * *", NEW_YORK, at("2026-11-01T00:20", NEW_YORK), 3) == [
        "2026-11-01T01:15:00-04:00", "2026-11-01T01:15:00-05:00", "2026-11-01T02:15:00-05:00",
    ]
    assert fires("15 * * * *", PARIS, at("2026-03-29T01:20", PARIS), 2) == [
        "2026-03-29T03:15:00+02:00", "2026-03-29T04:15:00+02:00",
    ]


def test_six_fields_put_the_seconds_first():
    start = at("2026-05-04T10:00:00", "UTC")
    assert fires("*/20 * * * * *", "UTC", start, 4) == [
        "2026-05-04T10:00:20+00:00", "2026-05-04T10:00:40+00:00", "2026-05-04T10:01:00+00:00", "2026-05-04T10:01:20+00:00",
    ]
    # Every second, strictly after the instant given, whatever its fraction.
    assert timing.next_fire_after("* * * * * *", "UTC", start + 0.25) == start + 1
    assert timing.next_fire_after("* * * * * *", "UTC", start) == start + 1


def test_next_after_follows_the_zone_and_the_weekdays():
    friday_evening = at("2026-05-08T18:00", PARIS)
    assert wall(timing.next_fire_after("0 9 * * 1-5", PARIS, friday_evening), PARIS) == "2026-05-11T09:00:00+02:00"
    assert wall(timing.next_fire_after("0 9 * * 1-5", NEW_YORK, friday_evening), NEW_YORK) == "2026-05-11T09:00:00-04:00"


def test_fires_between_two_instants_include_both_ends_and_are_bounded():
    first = at("2026-05-04T10:00:00", "UTC")
    assert timing.fires_between("* * * * * *", "UTC", first, first + 4) == [first + n for n in range(5)]
    assert timing.fires_between("* * * * * *", "UTC", first, first + 4, limit=2) == [first, first + 1]
    assert timing.fires_between("0 * * * *", "UTC", first, first + 3599.9) == [first]
    assert timing.latest_fire_at_or_before("0 * * * *", "UTC", first + 7300) == first + 7200


@pytest.mark.parametrize(
    ("expression", "said"),
    [
        ("0 9 * *", "5 fields"),
        ("61 * * * *", "Bad minute"),
        ("0 25 * * *", "Bad hour"),
        ("0 0 30 2 *", "Bad day-of-month"),
        ("a b c d e", "Bad minute"),
        ("* " * 120, "at most 200 characters"),
    ],
)
def test_cronsim_refusals_are_its_own_words(expression: str, said: str):
    with pytest.raises(timing.BadCron, match=said):
        timing.check_cron(expression)


def test_zones_are_the_databases_names_only():
    assert timing.zone("Europe/Paris") == ZoneInfo("Europe/Paris")
    for unknown in ("Mars/Olympus", "../../etc/passwd", "", "europe/paris"):
        with pytest.raises(KeyError):
            timing.zone(unknown)
