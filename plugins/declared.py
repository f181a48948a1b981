"""What a call sends to an action, held against what the action declares.

DRF's serializers drop a key they do not declare without a word, and their
`IntegerField` takes `1e2`, `100.0`, `"1_000"` and full-width digits. For
an action that is a silent wrong answer: `web/text` with a `url` reads
whatever page is open, and `limit: 1e2` passes for a number the client never
wrote. So before the serializer runs, `refusal` walks the sent parameters
beside the declared fields (nested serializers, and lists and maps of them,
included) and names:

- every key no field declares, unless the action takes extras (a family or
  an action made with `extra_params=True`): then its top level is open, and
  its nested objects are left to its serializer;
- an integer field's value that is not a whole number as JSON or a query
  string writes one (`core.numbers.whole_number_problem`), and a number
  field's that is not a finite number in plain decimal (`core.numbers.decimal`).

Paths are written as `core.rest.describe_errors` writes them
(`wait_for.timeout_ms`, `cookies.0.name`, `fields.title.selector`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rest_framework import serializers

from core.numbers import NOT_A_NUMBER, decimal, whole_number_problem
from core.shapes import declared_fields, unknown_parameters


def refusal(shape: type[serializers.Serializer] | None, data: dict[str, Any], *, route: str, extra: bool = False) -> str | None:
    """Why `data` is not what the serializer `shape` (None: no parameters)
    declares for the action at `route`, as one sentence; None when nothing is
    wrong with it here (the serializer checks the rest)."""
    walk = Walk()
    walk.object(declared_fields(shape) if shape is not None else {}, data, "", open_=extra)
    if walk.unknown:
        first, declared = walk.unknown[0]
        names = [name for name, _ in walk.unknown]
        return unknown_parameters(names, where=route, offer=list(declared), owner=first.rpartition(".")[0])
    return walk.problem


@dataclass
class Walk:
    """One pass over sent parameters: the unknown keys found (each with the
    names its object declares), and the first bad integer."""

    unknown: list[tuple[str, list[str]]] = field(default_factory=list)
    problem: str | None = None

    def object(self, fields: Any, data: dict[str, Any], path: str, *, open_: bool = False) -> None:
        for name, value in data.items():
            at = f"{path}.{name}" if path else str(name)
            if name in fields:
                self.value(fields[name], value, at)
            elif not open_:
                self.unknown.append((at, list(fields)))

    def value(self, declared: serializers.Field, value: Any, path: str) -> None:
        if isinstance(declared, serializers.ListSerializer):  # `many=True`: a list of one serializer's objects
            declared = serializers.ListField(child=declared.child)
        if isinstance(declared, serializers.Serializer):
            if isinstance(value, dict):  # else the serializer says what it wants
                self.object(declared.fields, value, path)
        elif isinstance(declared, serializers.ListField) and isinstance(value, list):
            for index, item in enumerate(value):
                self.value(declared.child, item, f"{path}.{index}")
        elif isinstance(declared, serializers.DictField) and isinstance(value, dict):
            for key, item in value.items():
                self.value(declared.child, item, f"{path}.{key}")
        elif isinstance(declared, serializers.IntegerField) and self.problem is None:
            problem = whole_number_problem(value)
            if problem:
                self.problem = f"Invalid parameter '{path[:200]}': {problem}"
        elif isinstance(declared, serializers.FloatField) and self.problem is None and value is not None:
            # DRF's FloatField takes `true`, "１０", "1e1", " 10 " and "nan".
            if decimal(value) is None:
                self.problem = f"Invalid parameter '{path[:200]}': {NOT_A_NUMBER}"
