"""What the waker reads of a running worker, over its HTTP API: its health
while it starts, and its activity."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from django.conf import settings

from waker.personas import Persona
from waker.policy import Activity
from waker.process import Child, StartFailed, log_tail

HEALTH_POLL_S = 0.05
# One activity read; a worker that cannot answer in this time is not stopped.
ACTIVITY_TIMEOUT_S = 5.0


class ActivityUnreadable(Exception):
    """The activity could not be read; the sentence says why."""


def auth_headers(persona: Persona) -> dict[str, str]:
    return {"Authorization": f"Bearer {persona.reading_key}"}


async def until_healthy(
    http: httpx.AsyncClient, persona: Persona, child: Child, log_path: Path, closing: Callable[[], bool]
) -> None:
    """Wait until the worker answers its health check; StartFailed if it
    exits first or takes longer than WAKER_START_TIMEOUT_S."""
    timeout_s = settings.WAKER_START_TIMEOUT_S
    deadline = time.monotonic() + timeout_s
    health_url = persona.api_url + "/health"
    while not closing():
        if child.process.returncode is not None:
            raise StartFailed(f"The worker exited with code {child.process.returncode} as it started: {log_tail(log_path)}")
        try:
            if (await http.get(health_url, timeout=1.0)).status_code == 200:
                return
        except httpx.HTTPError:
            pass  # not listening yet
        if time.monotonic() > deadline:
            raise StartFailed(f"The worker was not healthy within {timeout_s:g} s (WAKER_START_TIMEOUT_S).")
        await asyncio.sleep(HEALTH_POLL_S)


async def read_activity(http: httpx.AsyncClient, persona: Persona) -> Activity:
    """One read of `GET /api/v1/activity`; ActivityUnreadable when it fails."""
    try:
        response = await http.get(persona.api_url + "/activity", headers=auth_headers(persona), timeout=ACTIVITY_TIMEOUT_S)
        if response.status_code != 200:
            raise ValueError(f"it answered HTTP {response.status_code}")
        body = response.json()
        return Activity(
            requests_in_flight=int(body["requests_in_flight"]),
            jobs_in_flight=int(body["jobs_in_flight"]),
            webhooks_pending=int(body["webhooks_pending"]),
            idle_seconds=float(body["idle_seconds"]),
            read_at=time.time(),
            browser_state=str(body.get("browser_state", "up")),
            next_wake_at=float(body["next_wake_at"]) if body.get("next_wake_at") is not None else None,
            busy_pages=tuple(map(str, body.get("busy_pages", ()))),
            open_pages=tuple(map(str, body.get("open_pages", ()))),
        )
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as error:
        raise ActivityUnreadable(str(error) or error.__class__.__name__) from None
