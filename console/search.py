"""A search of the fleet's jobs, from a query string: the console's jobs page
and `GET /api/v1/fleet/jobs` read it alike, and refuse alike what they
cannot use (an unknown parameter, a bad state, a time that is no time)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from rest_framework import serializers

from console.fleet import Fleet
from console.readings import JOB_STATES, MAX_SEARCH_LIMIT, SEARCH_LIMIT, JobSearch


class SearchInvalid(ValueError):
    """The sentence says which parameter and why."""


class Moment(serializers.Field):
    """Epoch seconds, or an ISO 8601 time (UTC unless it says otherwise)."""

    default_error_messages = {"invalid": "epoch seconds or an ISO 8601 time such as 2026-12-06T08:00."}

    def to_internal_value(self, data: Any) -> float:
        text = str(data).strip()
        try:
            return float(text)
        except ValueError:
            pass
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            self.fail("invalid")
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


class SearchQuery(serializers.Serializer):
    job_id = serializers.RegexField(r"^[A-Za-z0-9_-]{1,64}$", required=False, help_text="One job, by its id.")
    plugin = serializers.RegexField(r"^[^/]+/[^/]+$", max_length=200, required=False, help_text="family/action")
    state = serializers.ChoiceField(choices=JOB_STATES, required=False)
    since = Moment(required=False, help_text="Accepted at or after.")
    until = Moment(required=False, help_text="Accepted before.")
    persona = serializers.CharField(max_length=2000, required=False, help_text="Persona names, comma-separated.")
    limit = serializers.IntegerField(min_value=1, max_value=MAX_SEARCH_LIMIT, default=SEARCH_LIMIT)


def parsed(query: dict[str, str], fleet: Fleet) -> tuple[JobSearch, list[str]]:
    """The search and the personas it covers (every one unless named);
    SearchInvalid when a parameter cannot be used."""
    unknown = sorted(set(query) - set(SearchQuery().fields))
    if unknown:
        raise SearchInvalid(f"Unknown parameter '{unknown[0][:64]}': use {', '.join(SearchQuery().fields)}.")
    given = {name: value for name, value in query.items() if value.strip()}  # a form's empty fields
    checked = SearchQuery(data=given)
    if not checked.is_valid():
        field, messages = next(iter(checked.errors.items()))
        raise SearchInvalid(f"Invalid parameter '{field}': {messages[0]}")
    values = dict(checked.validated_data)
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
