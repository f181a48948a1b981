"""A credential as clients send it and see it. The input shape describes
the body in the OpenAPI document; what the values may be is checked by
`credentials.rules.clean`, whose sentences never hold a value sent. No
answer has a field for a secret: only whether each is set."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core.shapes import Success, Text
from credentials import rules

TAKEN_AS_NONE = "null, an empty string or leaving it out: none."


class CredentialInput(serializers.Serializer):
    """The whole credential (PUT replaces it): a field left out is no longer set."""

    url = Text(
        max_length=rules.MAX_URL, pattern=rules.ORIGIN_PATTERN,
        help_text=(
            "The site's origin, `http(s)://host[:port]`: no path (but `/`), query, fragment or user-info. Kept as a "
            "browser writes an origin (lower case, the default port left out); flows use the credential on it only."
        ),
    )
    username = Text(
        max_length=rules.MAX_LENGTH["username"], required=False, allow_null=True, allow_blank=True,
        help_text=f"The user name or e-mail, not a secret: reads answer it. {TAKEN_AS_NONE}",
    )
    password = Text(
        max_length=rules.MAX_LENGTH["password"], required=False, allow_null=True, allow_blank=True,
        help_text=f"Sealed; no answer ever holds it. {TAKEN_AS_NONE}",
    )
    totp_secret = Text(
        max_length=rules.MAX_LENGTH["totp_secret"], required=False, allow_null=True, allow_blank=True,
        help_text=(
            "The base32 secret of the site's authenticator setup (A-Z and 2-7, at least 16 characters; spaces, "
            f"lower case and `=` padding are taken). Sealed; flows get its current code. {TAKEN_AS_NONE}"
        ),
    )
    notes = Text(
        max_length=rules.MAX_LENGTH["notes"], required=False, allow_null=True, allow_blank=True,
        help_text=f"Anything else a flow may need (recovery codes, answers). Sealed. {TAKEN_AS_NONE}",
    )


class CredentialSecrets(serializers.Serializer):
    password = serializers.BooleanField()
    totp = serializers.BooleanField()
    notes = serializers.BooleanField()


class CredentialView(serializers.Serializer):
    """A credential as a read shows it: to a read key, `name` and `url` only."""

    name = serializers.RegexField(rules.NAME_PATTERN)
    url = serializers.CharField(help_text="The site's origin.")
    username = serializers.CharField(required=False, allow_blank=True, help_text="Empty when none. Not to a read key.")
    secrets = CredentialSecrets(required=False, help_text="Which secrets are set; never one of them. Not to a read key.")
    changed_at = serializers.FloatField(required=False, help_text="Epoch seconds of its last PUT. Not to a read key.")
    used_at = serializers.FloatField(
        required=False, allow_null=True,
        help_text="Epoch seconds when a flow last used it, null if none has. Not to a read key.",
    )

    def to_representation(self, view: dict[str, Any]) -> dict[str, Any]:
        return dict(view)  # the store's public or reader view, as built (credentials/models.py)


class CredentialAnswer(Success, CredentialView):
    def to_representation(self, view: dict[str, Any]) -> dict[str, Any]:
        return {"success": True, "page_id": None, **view}


class CredentialList(Success):
    credentials = CredentialView(many=True, help_text="By name.")


class CredentialDeleted(Success):
    deleted = serializers.RegexField(rules.NAME_PATTERN, help_text="The name of the credential deleted.")
