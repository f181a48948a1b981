"""Shapes every route shares: the envelope, success, `true`/`false` fields
and a TTL. They render answers (`core.rest.answer`) and describe them in the
OpenAPI document; each route's own shapes live beside its view."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

JOB_ID_PATTERN = "^[0-9a-f]{16}$"
LEASE_ID_PATTERN = "^[0-9a-f]{32}$"
# What X-Result-Ttl and a lease's ttl accept, as the parsers check it: plain
# decimal seconds (no exponent, no sign, no `_`, ASCII digits only).
PLAIN_DECIMAL = r"(?:\d+(?:\.\d*)?|\.\d+)"


@extend_schema_field({"type": "boolean", "enum": [True]})
class TrueField(serializers.BooleanField):
    """`"success": true`."""


@extend_schema_field({"type": "boolean", "enum": [False]})
class FalseField(serializers.BooleanField):
    """`"success": false`."""


def ttl_schema() -> dict[str, Any]:
    return {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": settings.MAX_TTL_S}


@extend_schema_field(ttl_schema())
class TtlField(serializers.FloatField):
    """Seconds, more than 0 and at most MAX_TTL_S: a lease's ttl."""


class ErrorEnvelope(serializers.Serializer):
    """Every failure: its status says what happened, `error` says it to a person."""

    success = FalseField()
    error = serializers.CharField(help_text="One sentence for a person; branch on the status, not on it.")
    page_id = serializers.CharField(allow_null=True, help_text="The page the request concerns, or null.")


class Success(serializers.Serializer):
    success = TrueField()
    page_id = serializers.CharField(allow_null=True, help_text="The page the answer concerns, or null.")


class PageSuccess(Success):
    page_id = serializers.CharField(help_text="The page the answer concerns.")
