"""Webhook signatures, both kinds on every attempt.

- The guide's: `X-Penelope-Signature: sha256=<hex HMAC-SHA256 of the body>`,
  keyed with PENELOPE_KEY.
- Standard Webhooks' (standardwebhooks.com): `webhook-id` (the job id, the
  same on every attempt), `webhook-timestamp` (Unix seconds of the attempt)
  and `webhook-signature` (`v1,<base64 HMAC-SHA256 of id.timestamp.body>`),
  keyed with WEBHOOK_SECRET, so a receiver checks deliveries without the API
  key, and refuses a replayed one by its timestamp. During a rotation
  WEBHOOK_SECRET holds two secrets and the header carries both signatures,
  separated by a space.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import secrets
from datetime import UTC, datetime

from standardwebhooks import Webhook

SECRET_PREFIX = "whsec_"
MIN_SECRET_BYTES = 24


class BadSecret(ValueError):
    pass


def sign(body: bytes, key: str) -> str:
    """The guide's X-Penelope-Signature."""
    return "sha256=" + hmac.new(key.encode(), body, hashlib.sha256).hexdigest()


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


@functools.cache
def signers(secret_setting: str) -> tuple[Webhook, ...]:
    """One signer per secret in WEBHOOK_SECRET; BadSecret names what is wrong."""
    parts = secret_setting.split()
    if not 1 <= len(parts) <= 2:
        raise BadSecret("WEBHOOK_SECRET holds one secret, or two separated by a space during a rotation.")
    for part in parts:
        try:
            raw = base64.b64decode(part.removeprefix(SECRET_PREFIX), validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if not part.startswith(SECRET_PREFIX) or len(raw) < MIN_SECRET_BYTES:
            raise BadSecret(
                f"WEBHOOK_SECRET must be {SECRET_PREFIX} followed by the base64 of at least "
                f"{MIN_SECRET_BYTES} random bytes."
            )
    return tuple(Webhook(part) for part in parts)


def standard_headers(job_id: str, body: bytes, secret_setting: str, at: float) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt made at `at` (epoch seconds)."""
    timestamp = datetime.fromtimestamp(int(at), tz=UTC)
    data = body.decode()
    return {
        "webhook-id": job_id,
        "webhook-timestamp": str(int(at)),
        "webhook-signature": " ".join(signer.sign(job_id, timestamp, data) for signer in signers(secret_setting)),
    }
