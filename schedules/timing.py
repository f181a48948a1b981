"""When a schedule fires: cron expressions read by cronsim, in a time zone
read by the standard library's zoneinfo. Pure functions of their arguments
(no clock, no store), so a test gives them any instant it likes.

Why cronsim: it follows Debian cron's rules, daylight-saving days included
(a 5-field expression at a fixed hour and minute fires once on the day the
clock skips that time, at the first minute that exists, and once on the day
it repeats, on its first pass), takes an optional seconds field first (a
6-field expression, which these rules leave alone: it fires on real
instants), is typed, has no dependencies and is kept by the author of
Healthchecks, which runs it on millions of checks.

Instants are epoch seconds (floats), as everywhere in the store.
"""

from __future__ import annotations

import functools
import zoneinfo
from datetime import UTC, datetime, tzinfo

from cronsim import CronSim, CronSimError

MAX_CRON_LENGTH = 200
# The most fires counted one by one between two instants; past it the
# latest is found from the far end, and the count stops there.
MAX_COUNTED_FIRES = 100_000


class BadCron(ValueError):
    """The expression is not one cronsim reads, or never fires."""


@functools.cache
def known_zones() -> frozenset[str]:
    """The zone names the system's (or the tzdata package's) database holds."""
    return frozenset(zoneinfo.available_timezones()) | {"UTC"}


def zone(name: str) -> tzinfo:
    """The time zone `name`; UTC as the datetime module's own (cronsim skips
    its daylight-saving handling for it). KeyError for an unknown name."""
    if name == "UTC":
        return UTC
    if name not in known_zones():
        raise KeyError(name)
    return zoneinfo.ZoneInfo(name)


def check_cron(expression: str) -> None:
    """BadCron with cronsim's own words when it refuses `expression`."""
    if len(expression) > MAX_CRON_LENGTH:
        raise BadCron(f"at most {MAX_CRON_LENGTH} characters")
    if len(expression.split()) not in (5, 6):
        raise BadCron("5 fields (minute hour day month weekday), or 6 with the seconds first")
    try:
        CronSim(expression, datetime.now(UTC))
    except CronSimError as refused:
        raise BadCron(str(refused)) from None
    except (ValueError, IndexError, KeyError) as refused:  # input cronsim did not foresee
        raise BadCron(f"not a cron expression ({refused})") from None


def _fires(expression: str, zone_name: str, after: float) -> CronSim:
    local = datetime.fromtimestamp(after, zone(zone_name))
    return CronSim(expression, local)


def next_fire_after(expression: str, zone_name: str, after: float) -> float | None:
    """The first fire strictly after `after`; None when there is none within
    cronsim's horizon (50 years)."""
    fires = _fires(expression, zone_name, after)
    try:
        while True:
            at = next(fires).timestamp()
            # A wall-clock time read in a repeated hour can land before `after`
            # (cronsim's Debian rule takes the first pass): the next one, then.
            if at > after:
                return at
    except StopIteration:
        return None


def fires_between(expression: str, zone_name: str, first: float, until: float, limit: int = MAX_COUNTED_FIRES) -> list[float]:
    """The fires from `first` (itself a fire) to `until`, both included, at
    most `limit` of them: the earliest ones."""
    found: list[float] = []
    at: float | None = first
    while at is not None and at <= until and len(found) < limit:
        found.append(at)
        at = next_fire_after(expression, zone_name, at)
    return found


def latest_fire_at_or_before(expression: str, zone_name: str, until: float) -> float | None:
    """The last fire at or before `until` (cronsim iterating backwards)."""
    fires = CronSim(expression, datetime.fromtimestamp(until + 1, zone(zone_name)), reverse=True)
    try:
        while True:
            at = next(fires).timestamp()
            if at <= until:
                return at
    except StopIteration:
        return None
