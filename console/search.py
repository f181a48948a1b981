"""A search of the fleet's jobs, from a query string: the console's jobs page
and `GET /api/v1/fleet/jobs` read it alike, and refuse alike what they
cannot use (an unknown parameter, a bad state, a time that is no time). A
worker's own search of its store (`GET /api/v1/overview/jobs`,
activity/overview.py) takes the same parameters but `persona`, by the same
rules (`job_search`)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rest_framework import serializers

from console.persona_store import MAX_SEARCH_LIMIT, SEARCH_LIMIT, JobSearch
from core import numbers
from core.numbers import WholeNumber
from jobs.store_reads import JOB_STATES

if TYPE_CHECKING:  # the fleet imports the waker, which a worker reading its own store has no use for
    from console.fleet import Fleet


class SearchInvalid(ValueError):
    """The sentence says which parameter and why."""


MOMENT_WRITTEN = (
    "Epoch seconds in plain decimal (`1796544000`, `1796544000.5`), or an ISO 8601 time in ASCII "
    "(`2026-12-06T08:00`; UTC unless it says otherwise), from the year 1 to 9999: `nan`, `inf`, `1e400`, "
    "full-width digits and spaces around it answer 400."
)


class Moment(numbers.Moment):
    """A time (core.numbers.moment). Its OpenAPI shape is the worker's to say
    (activity/overview.py): the waker imports no drf-spectacular."""


class SearchQuery(serializers.Serializer):
    job_id = serializers.RegexField(r"^[A-Za-z0-9_-]{1,64}$", required=False, help_text="One job, by its id.")
    plugin = serializers.RegexField(r"^[^/]+/[^/]+$", max_length=200, required=False, help_text="family/action")
    state = serializers.ChoiceField(choices=JOB_STATES, required=False)
    since = Moment(required=False, help_text=f"Accepted at or after. {MOMENT_WRITTEN}")
    until = Moment(required=False, help_text=f"Accepted before. {MOMENT_WRITTEN}")
    persona = serializers.CharField(max_length=2000, required=False, help_text="Persona names, comma-separated.")
    limit = WholeNumber(min_value=1, max_value=MAX_SEARCH_LIMIT, default=SEARCH_LIMIT, help_text="Jobs at most.")


class StoreSearchQuery(SearchQuery):
    """A worker's search of its own store: no persona to choose."""

    persona = None


def known_only(query: dict[str, str], shape: type[SearchQuery]) -> None:
    """SearchInvalid for the first parameter `shape` does not take."""
    names = list(shape().fields)
    unknown = sorted(set(query) - set(names))
    if unknown:
        raise SearchInvalid(f"Unknown parameter '{unknown[0][:64]}': use {', '.join(names)}.")


def checked(query: dict[str, str], shape: type[SearchQuery]) -> dict[str, Any]:
    """The query's values as `shape` reads them; SearchInvalid naming the first bad one."""
    known_only(query, shape)
    reading = shape(data=query)
    if not reading.is_valid():
        field, messages = next(iter(reading.errors.items()))
        raise SearchInvalid(f"Invalid parameter '{field}': {messages[0]}")
    return dict(reading.validated_data)


def job_search(query: dict[str, str]) -> JobSearch:
    """A worker's search of its store; a blank value is a bad one (no form sends it)."""
    return JobSearch(**checked(query, StoreSearchQuery))


def parsed(query: dict[str, str], fleet: Fleet) -> tuple[JobSearch, list[str]]:
    """The search and the personas it covers (every one unless named);
    SearchInvalid when a parameter cannot be used."""
    known_only(query, SearchQuery)
    values = checked({name: value for name, value in query.items() if value.strip()}, SearchQuery)  # a form's empty fields
    known = fleet.names()
    personas = known
    if "persona" in values:
        personas = [name.strip() for name in values.pop("persona").split(",") if name.strip()]
        missing = [name for name in personas if name not in known]
        if missing:
            raise SearchInvalid(f"Invalid parameter 'persona': no persona {missing[0][:64]}.")
    return JobSearch(**values), personas


async def searched(query: dict[str, str], fleet: Fleet) -> dict[str, Any]:
    """The search's answer, as the API sends it and the page prints it."""
    search, personas = parsed(query, fleet)
    began = time.perf_counter()
    hits, sources = await fleet.search(search, personas)
    return {
        "jobs": hits,
        "count": len(hits),
        "limit": search.limit,
        "personas": sources,
        "took_ms": round((time.perf_counter() - began) * 1000, 1),
    }
