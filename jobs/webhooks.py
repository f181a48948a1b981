"""What every webhook the worker sends shares, a job's delivery
(jobs/delivery.py) and a question's notification (jobs/notify.py) alike:
its signatures, and the guard that keeps it out of the host's own networks.

Signatures, both kinds on every attempt:

- The guide's: `X-Penelope-Signature: sha256=<hex HMAC-SHA256 of the body>`,
  keyed with PENELOPE_KEY.
- Standard Webhooks' (standardwebhooks.com): `webhook-id` (the job id, the
  same on every attempt), `webhook-timestamp` (Unix seconds of the attempt)
  and `webhook-signature` (`v1,<base64 HMAC-SHA256 of id.timestamp.body>`),
  keyed with WEBHOOK_SECRET, so a receiver checks deliveries without the API
  key, and refuses a replayed one by its timestamp. During a rotation
  WEBHOOK_SECRET holds two secrets and the header carries both signatures,
  separated by a space.

The guard: opt-in refusal of webhook callbacks that point into the host's
own networks (WEBHOOK_REFUSE_PRIVATE=1).

By default a client with the key may point a webhook anywhere the host
reaches, as the jobs guide says. With the guard on, the callback's host is
resolved and refused when any address is loopback, private, link-local,
shared, reserved, multicast or a cloud metadata address — at submit (400)
and again at every attempt, which then connects to the very address it
checked, so a name that changes its answer in between gains nothing.
Redirects are never followed either way.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import hashlib
import hmac
import secrets
import socket
from datetime import UTC, datetime
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from standardwebhooks import Webhook

from core.addresses import refused_address

__all__ = [
    "BadSecret", "CallbackRefused", "CallbackUnresolved", "new_secret", "pinned_request", "refused_address",
    "resolve_allowed", "sign", "signers", "standard_headers", "submit_refusal",
]

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


class CallbackRefused(Exception):
    """The callback points into the host's own networks: never sent."""


class CallbackUnresolved(Exception):
    """The callback's host has no address now (perhaps only for now)."""



async def submit_refusal(url: str, header: str = "X-Callback-Url") -> str | None:
    """Why a job start (or a schedule) with this callback is refused at
    submit under WEBHOOK_REFUSE_PRIVATE, in one sentence; None when it is
    allowed, or the guard is off."""
    if not settings.WEBHOOK_REFUSE_PRIVATE:
        return None
    try:
        await resolve_allowed(url)
    except (CallbackRefused, CallbackUnresolved) as refused:
        return f"{header} is refused: {refused} (WEBHOOK_REFUSE_PRIVATE)."
    return None


async def resolve_allowed(url: str) -> str:
    """The address to connect to for `url`; CallbackRefused or CallbackUnresolved."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        raise CallbackUnresolved(f"the callback's host {host} does not resolve") from None
    addresses = [info[4][0] for info in infos]
    if not addresses or any(refused_address(address) for address in addresses):
        raise CallbackRefused(
            f"the callback's host {host} resolves to a loopback, private, link-local or metadata address"
        )
    return addresses[0]


async def pinned_request(url: str) -> tuple[str, dict[str, str], dict[str, str]]:
    """(URL on the checked address, extra headers, httpx extensions): the
    request keeps its Host header and TLS name but cannot be re-resolved."""
    parts = urlsplit(url)
    address = await resolve_allowed(url)
    host_in_url = f"[{address}]" if ":" in address else address
    netloc = host_in_url + (f":{parts.port}" if parts.port else "")
    pinned = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
    host_header = parts.hostname + (f":{parts.port}" if parts.port else "")
    extensions = {"sni_hostname": parts.hostname} if parts.scheme == "https" else {}
    return pinned, {"Host": host_header}, extensions
