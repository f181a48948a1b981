"""What every webhook the worker sends shares, a job's delivery
(jobs/delivery.py) and a question's notification (jobs/notify.py) alike:
its signatures, the guard that keeps it out of the host's own networks, and
the POST itself (`send`), whose answer is sorted by what to do next:
delivered (2xx), worth another attempt (network error, timeout, 429, 5xx)
or final (anything else, redirects included: a redirect is not a delivery).

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
import logging
import secrets
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit, urlunsplit

import httpx
from django.conf import settings
from standardwebhooks import Webhook

from core.addresses import bracketed, refused_address
from core.auth import signing_key, url_for_log
from jobs.models import DeliveryAttempt

__all__ = [
    "BadSecret", "CallbackToPrivateAddress", "CallbackUnresolved", "Sent", "classify", "new_secret", "pinned_request",
    "refused_address", "resolve_allowed", "send", "sign", "signers", "standard_headers", "submit_refusal",
    "webhook_client",
]

log = logging.getLogger("penelope.webhooks")

USER_AGENT = "Penelope-Webhook/1"
MAX_ANSWER_READ = 64 * 1024

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


class CallbackToPrivateAddress(Exception):
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
    except (CallbackToPrivateAddress, CallbackUnresolved) as refused:
        return f"{header} is refused: {refused} (WEBHOOK_REFUSE_PRIVATE)."
    return None


async def resolve_allowed(url: str) -> str:
    """The address to connect to for `url`; CallbackToPrivateAddress or CallbackUnresolved."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        raise CallbackUnresolved(f"the callback's host {host} does not resolve") from None
    addresses = [info[4][0] for info in infos]
    if not addresses or any(refused_address(address) for address in addresses):
        raise CallbackToPrivateAddress(
            f"the callback's host {host} resolves to a loopback, private, link-local or metadata address"
        )
    return addresses[0]


async def pinned_request(url: str) -> tuple[str, dict[str, str], dict[str, str]]:
    """(URL on the checked address, extra headers, httpx extensions): the
    request keeps its Host header and TLS name but cannot be re-resolved."""
    parts = urlsplit(url)
    address = await resolve_allowed(url)
    netloc = bracketed(address) + (f":{parts.port}" if parts.port else "")
    pinned = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
    host_header = parts.hostname + (f":{parts.port}" if parts.port else "")
    extensions = {"sni_hostname": parts.hostname} if parts.scheme == "https" else {}
    return pinned, {"Host": host_header}, extensions


@dataclass(frozen=True)
class Sent:
    """How one POST ended: its outcome (a `DeliveryAttempt.Outcome`), the
    receiver's status if it answered, what went wrong if anything did, and
    when it started (Unix seconds) and how long it took."""

    outcome: str
    status_code: int | None
    error: str | None
    started_at: float
    duration_ms: float


def classify(status: int) -> str:
    if 200 <= status < 300:
        return DeliveryAttempt.Outcome.DELIVERED
    if status == 429 or status >= 500:
        return DeliveryAttempt.Outcome.RETRY
    return DeliveryAttempt.Outcome.GAVE_UP


def webhook_client() -> httpx.AsyncClient:
    # trust_env=False: the POST leaves from the host itself, never through a
    # proxy from the environment (and never through the browser's).
    return httpx.AsyncClient(
        trust_env=False,
        follow_redirects=False,
        timeout=settings.WEBHOOK_TIMEOUT_S,
        limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
    )


async def send(
    client: httpx.AsyncClient, url: str, body: bytes, *, job_id: str, message_id: str, headers: dict[str, str]
) -> Sent:
    """POST `body` to `url`, signed both ways (`message_id` is Standard
    Webhooks' id), within WEBHOOK_TIMEOUT_S and through the guard when it is
    on; `headers` are added to the usual ones. Never raises for the
    receiver's sake: every way it can end is an outcome."""
    started_at = time.time()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Penelope-Job": job_id,
        **headers,
        "X-Penelope-Signature": sign(body, signing_key()),
        **standard_headers(message_id, body, settings.WEBHOOK_SECRET, started_at),
    }
    began = time.monotonic()
    status_code: int | None = None
    error: str | None = None
    target, extensions = url, {}
    try:
        async with asyncio.timeout(settings.WEBHOOK_TIMEOUT_S):
            if settings.WEBHOOK_REFUSE_PRIVATE:
                target, host_header, extensions = await pinned_request(url)
                headers.update(host_header)
            async with client.stream("POST", target, content=body, headers=headers, extensions=extensions) as response:
                status_code = response.status_code
                # The answer must arrive whole (a connection dropped mid-answer
                # is a network error), but a huge one is not read to its end.
                answer_bytes = 0
                async for chunk in response.aiter_raw():
                    answer_bytes += len(chunk)
                    if answer_bytes >= MAX_ANSWER_READ:
                        break
        outcome = classify(status_code)
        if outcome != DeliveryAttempt.Outcome.DELIVERED:
            error = f"the receiver answered HTTP {status_code}"
    except CallbackToPrivateAddress as refused:
        outcome, error = DeliveryAttempt.Outcome.GAVE_UP, str(refused)
    except CallbackUnresolved as unresolved:
        outcome, error = DeliveryAttempt.Outcome.RETRY, f"network error: {unresolved}"
    except TimeoutError:
        outcome, error = DeliveryAttempt.Outcome.RETRY, f"no answer within {settings.WEBHOOK_TIMEOUT_S:g} s"
    except httpx.HTTPError as failure:
        outcome, error = DeliveryAttempt.Outcome.RETRY, f"network error: {type(failure).__name__}"
    except Exception as failure:  # e.g. a URL httpx cannot send to: no later attempt would do better
        log.warning("a webhook of job %s cannot be sent to %s: %r", job_id, url_for_log(url), failure)
        outcome, error = DeliveryAttempt.Outcome.GAVE_UP, f"the callback cannot be sent: {type(failure).__name__}"
    return Sent(outcome, status_code, error, started_at, (time.monotonic() - began) * 1000)
