"""Whole numbers as the API takes them, in a query string or a JSON body:
one rule for the worker's routes and actions and for the console's search,
which also runs on the waker (no worker settings: this module reads none)."""

from __future__ import annotations

import re
from typing import Any

from rest_framework import serializers

# A whole number as a query string (or a JSON string) writes one: ASCII
# digits, a minus sign at most. DRF's IntegerField also takes "1_000",
# "100.0", " 7" and full-width digits ("１００"): Python's int() reads them.
WHOLE_NUMBER = re.compile(r"-?[0-9]+", re.ASCII)
MAX_WHOLE_NUMBER_DIGITS = 50


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
    return None


class WholeNumber(serializers.IntegerField):
    """An integer parameter of a route's own (a query's `limit`), held to
    `whole_number_problem`; an action's are held to it before its serializer
    runs (plugins/declared.py), whatever field class they use."""

    def to_internal_value(self, data: Any) -> int:
        problem = whole_number_problem(data)
        if problem:
            raise serializers.ValidationError(problem, code="invalid")
        return super().to_internal_value(data)
