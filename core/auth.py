"""The bearer key: one constant-time check, used by the DRF authentication
class that refuses a request and by the activity gate that decides whether a
request counts as a client's."""

from __future__ import annotations

import hmac
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission

REALM = 'Bearer realm="penelope"'
KEY_REQUIRED = "A valid key is required: send Authorization: Bearer <PENELOPE_KEY>."


def key_matches(request: HttpRequest) -> bool:
    """Whether the request carries `Authorization: Bearer <PENELOPE_KEY>`,
    compared in constant time. A worker without a key accepts none."""
    return authorization_matches(request.headers.get("Authorization", ""))


def authorization_matches(authorization: str) -> bool:
    """`key_matches` for an Authorization header's value (an event socket's handshake)."""
    key = settings.PENELOPE_KEY
    scheme, _, given = authorization.partition(" ")
    if not key or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(errors="replace"), key.encode())


class KeyHolder:
    """Whoever holds the worker's key: the persona's one client. It stands
    where DRF expects a user; there are no accounts on the API."""

    is_authenticated = True

    def __repr__(self) -> str:
        return "KeyHolder()"


KEY_HOLDER = KeyHolder()


class BearerKey(BaseAuthentication):
    """The worker's key in `Authorization: Bearer`. Without it the request
    is not authenticated (None), and `HasKey` answers 401 with `REALM`."""

    def authenticate(self, request: Any) -> tuple[KeyHolder, str] | None:
        if key_matches(request._request):
            return KEY_HOLDER, "bearer"
        return None

    def authenticate_header(self, request: Any) -> str:
        return REALM


class HasKey(BasePermission):
    message = KEY_REQUIRED

    def has_permission(self, request: Any, view: Any) -> bool:
        return request.auth is not None
