"""Checking a webhook delivery's signatures (and a `job.needs_human`
notification's, signed the same way), standard library only.

Every delivery carries two: the guide's `X-Penelope-Signature` (the hex
HMAC-SHA256 of the body keyed with the API key) and Standard Webhooks'
`webhook-id`, `webhook-timestamp` and `webhook-signature` (the base64
HMAC-SHA256 of `<id>.<timestamp>.<body>` keyed with WEBHOOK_SECRET, which
also dates the delivery, so a captured one cannot be replayed later).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

from penelope_client.errors import InvalidSignature

# Standard Webhooks' tolerance: a delivery dated further from now is refused.
TOLERANCE_S = 300


def verify_webhook(
    body: bytes | str,
    headers: Mapping[str, str],
    *,
    key: str | None = None,
    secret: str | Iterable[str] | None = None,
    tolerance_s: float = TOLERANCE_S,
) -> Any:
    """The delivered job, parsed, once its signatures check out; else InvalidSignature.

    `body` is the raw body as received (before any parsing); `headers` any
    mapping of the request's headers, names in any case. With `key` (the
    worker's PENELOPE_KEY) it checks X-Penelope-Signature; with `secret` (its
    WEBHOOK_SECRET: one, several separated by spaces as during a rotation, or
    a list) it checks the Standard Webhooks headers; with both, both. A
    `job.needs_human` notification, signed the same way, is refused here
    (`verify_notification` reads it), so one cannot pass for a job's end.
    """
    job = _verified(body, headers, key=key, secret=secret, tolerance_s=tolerance_s)
    if isinstance(job, dict) and job.get("type") == "job.needs_human":
        raise InvalidSignature("This is a job.needs_human notification, not a job's end: verify_notification reads it.")
    return job


def _verified(
    body: bytes | str, headers: Mapping[str, str], *, key: str | None, secret: str | Iterable[str] | None,
    tolerance_s: float,
) -> Any:
    """The body, parsed, once the signatures asked for check out."""
    if key is None and secret is None:
        raise TypeError("verify_webhook needs key= (X-Penelope-Signature), secret= (Standard Webhooks), or both.")
    raw = body.encode() if isinstance(body, str) else bytes(body)
    found = {name.lower(): value for name, value in headers.items()}
    if key is not None:
        _check_penelope_signature(raw, found, key)
    if secret is not None:
        secrets = secret.split() if isinstance(secret, str) else list(secret)
        _check_standard_signature(raw, found, secrets, tolerance_s)
    return json.loads(raw)



def verify_notification(
    body: bytes | str,
    headers: Mapping[str, str],
    *,
    key: str | None = None,
    secret: str | Iterable[str] | None = None,
    tolerance_s: float = TOLERANCE_S,
) -> Any:
    """The job of a `job.needs_human` notification (X-Notify-Url), as its poll
    showed it with its `human`, once the signatures check out (as
    `verify_webhook` checks them); InvalidSignature otherwise, and for a
    signed message of another type."""
    message = _verified(body, headers, key=key, secret=secret, tolerance_s=tolerance_s)
    if not isinstance(message, dict) or message.get("type") != "job.needs_human" or not isinstance(message.get("data"), dict):
        raise InvalidSignature("This is no job.needs_human notification.")
    return message["data"]


def _check_penelope_signature(raw: bytes, headers: dict[str, str], key: str) -> None:
    expected = "sha256=" + hmac.new(key.encode(), raw, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), headers.get("x-penelope-signature", "").encode()):
        raise InvalidSignature("X-Penelope-Signature does not match the body and the key.")


def _check_standard_signature(raw: bytes, headers: dict[str, str], secrets: list[str], tolerance_s: float) -> None:
    msg_id, timestamp = headers.get("webhook-id"), headers.get("webhook-timestamp")
    signatures = headers.get("webhook-signature")
    if not (msg_id and timestamp and signatures):
        raise InvalidSignature("A Standard Webhooks delivery has webhook-id, webhook-timestamp and webhook-signature.")
    try:
        sent_at = int(timestamp)
    except ValueError:
        raise InvalidSignature("webhook-timestamp is not a whole number of seconds.") from None
    if abs(time.time() - sent_at) > tolerance_s:
        raise InvalidSignature(f"webhook-timestamp is more than {tolerance_s:g} s off: a replay, or a wrong clock.")
    signed = f"{msg_id}.{timestamp}.".encode() + raw
    expected = [base64.b64encode(hmac.new(_secret_bytes(s), signed, hashlib.sha256).digest()) for s in secrets]
    # "v1,<base64>" each, separated by spaces: one per secret during a rotation.
    given = [part[3:].encode() for part in signatures.split() if part.startswith("v1,")]
    if not any(hmac.compare_digest(mine, theirs) for mine in expected for theirs in given):
        raise InvalidSignature("No webhook-signature matches the body and the secret.")


def _secret_bytes(secret: str) -> bytes:
    try:
        return base64.b64decode(secret.removeprefix("whsec_"), validate=True)
    except binascii.Error:
        raise ValueError("A webhook secret is 'whsec_' and base64, as WEBHOOK_SECRET is.") from None
