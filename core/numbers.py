"""Numbers as the API takes them, in a query string, a header or a JSON
body: whole numbers, seconds and times, one rule each, for the worker's
routes and actions and for the console's search, which also runs on the
waker (no worker settings: this module reads none).

Python reads more than a client means: `int()` and `float()` take `"1_0"`,
`" 10 "`, full-width digits (`"１０"`) and, for `float()`, `"1e1"`, `"nan"`,
`"inf"` and `"1e400"` (infinite). A number sent as a string is written here
in ASCII digits only: a minus sign first at most, a decimal point for
seconds, nothing around it. A JSON number is taken as JSON writes it, but
`true` and `false` are no numbers and an infinite one (`1e400`) is no
number either. Each parser returns None, or a problem as the end of a
sentence, and the caller names the parameter (`Invalid parameter 'ttl': …`):
a header's (jobs/options.py) keeps the answers the jobs guide gives.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

from rest_framework import serializers

# A whole number as a query string (or a JSON string) writes one: ASCII
# digits, a minus sign at most. DRF's IntegerField also takes "1_000",
# "100.0", " 7" and full-width digits ("１００"): Python's int() reads them.
WHOLE_NUMBER = re.compile(r"-?[0-9]+", re.ASCII)
MAX_WHOLE_NUMBER_DIGITS = 50
# Plain decimal: digits with a decimal point at most (no exponent, no sign,
# no `_`, ASCII digits only). X-Result-Ttl and the other job headers read it
# (jobs/options.py); a body's or a query's number may have a minus sign first.
PLAIN_DECIMAL = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
DECIMAL = re.compile(f"-?{PLAIN_DECIMAL}", re.ASCII)
MAX_DECIMAL_CHARACTERS = 50
NOT_A_NUMBER = (
    "a number is required, in the ASCII digits 0-9 with a decimal point at most (no exponent, `_` or spaces)."
)
# Epoch seconds a time may be: those a datetime holds (years 1 to 9999).
EARLIEST = datetime(1, 1, 1, tzinfo=UTC).timestamp()
LATEST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()
# An ISO 8601 time as datetime.fromisoformat reads it, in printable ASCII
# only: a year of four digits first (`2026-12-06`, `2026-12-06T08:00:00+01:00`,
# `20261206`, `2026-W49`). The document states it (MOMENT_PATTERN).
ISO_TIME = r"[0-9]{4}[0-9W-][0-9WTZ:.,+ -]*"
MOMENT = re.compile(f"-?{PLAIN_DECIMAL}|{ISO_TIME}", re.ASCII)
MOMENT_PATTERN = f"^(?:-?{PLAIN_DECIMAL}|{ISO_TIME})$"


def whole_number_problem(value: Any) -> str | None:
    """What keeps `value` from being a whole number as the API takes one
    (a JSON integer, or a string of ASCII digits), as the end of a sentence;
    None when it is one. JSON's `1e2` and `100.0` are numbers with a fraction
    or an exponent, and `true` a boolean: each is refused by name."""
    if isinstance(value, bool):
        return "a whole number is required, not true or false."
    if isinstance(value, float):
        return "a whole number is required, written without a fraction or an exponent (100, not 100.0 or 1e2)."
    if isinstance(value, str) and not (len(value) <= MAX_WHOLE_NUMBER_DIGITS and WHOLE_NUMBER.fullmatch(value)):
        return "a whole number is required, in the ASCII digits 0-9 (a minus sign first at most)."
    if isinstance(value, int) and not -(10**MAX_WHOLE_NUMBER_DIGITS) < value < 10**MAX_WHOLE_NUMBER_DIGITS:
        return f"a whole number is required, of at most {MAX_WHOLE_NUMBER_DIGITS} digits."
    return None


def decimal(value: Any, *, longest: int | None = MAX_DECIMAL_CHARACTERS) -> float | None:
    """`value` as a finite number, or None: a JSON number (not a boolean, not
    infinite), or a string of plain decimal (`DECIMAL`) of at most `longest`
    characters (None: any, for a job header, which its own limit bounds and
    whose answers the jobs guide fixes)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        if (longest is not None and len(value) > longest) or not DECIMAL.fullmatch(value):
            return None
        number = float(value)
    elif isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # a JSON integer of hundreds of digits
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def seconds(value: Any, *, most: float | None = None, longest: int | None = MAX_DECIMAL_CHARACTERS) -> float | None:
    """`value` as seconds more than 0 (and at most `most`), or None."""
    number = decimal(value, longest=longest)
    if number is None or number <= 0 or (most is not None and number > most):
        return None
    return number


def moment(value: Any) -> float | None:
    """`value` as epoch seconds, or None: epoch seconds (plain decimal, a
    minus sign at most) or an ISO 8601 time (UTC unless it says otherwise),
    between the years 1 and 9999."""
    if not isinstance(value, str) or len(value) > MAX_DECIMAL_CHARACTERS or not MOMENT.fullmatch(value):
        return None
    number = decimal(value)
    if number is None:
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            return None
        number = (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
    return number if EARLIEST <= number <= LATEST else None


# --- as DRF fields ------------------------------------------------------------------------


class WholeNumber(serializers.IntegerField):
    """An integer parameter of a route's own (a query's `limit`), held to
    `whole_number_problem`; an action's are held to it before its serializer
    runs (plugins/declared.py), whatever field class they use."""

    def to_internal_value(self, data: Any) -> int:
        problem = whole_number_problem(data)
        if problem:
            raise serializers.ValidationError(problem, code="invalid")
        return super().to_internal_value(data)


class Seconds(serializers.Field):
    """Seconds more than 0 and at most `most`, held to `seconds`: a JSON
    number, or a string of plain decimal. Anything else answers `message`
    (the route's own sentence). Its OpenAPI shape (core/schema.py,
    `SecondsShape`) states the bounds: the waker imports no drf-spectacular."""

    def __init__(self, *, most: float, message: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.most = most
        self.message = message

    def to_internal_value(self, data: Any) -> float:
        value = seconds(data, most=self.most)
        if value is None:
            raise serializers.ValidationError(self.message, code="invalid")
        return value

    def to_representation(self, value: float) -> float:
        return value


class Moment(serializers.Field):
    """A time, held to `moment`: epoch seconds, or an ISO 8601 time (UTC
    unless it says otherwise)."""

    default_error_messages = {"invalid": "epoch seconds or an ISO 8601 time such as 2026-12-06T08:00."}

    def to_internal_value(self, data: Any) -> float:
        value = moment(data)
        if value is None:
            self.fail("invalid")
        return value

    def to_representation(self, value: float) -> float:
        return value
