"""`Waker`: the waker's own API (its personas, start, stop) and a client of
each persona's worker through it (`/w/{name}/api/v1/...`), sync and async."""

from __future__ import annotations

from datetime import datetime
from types import TracebackType
from typing import Any

import httpx

from penelope_client import _shared as shared
from penelope_client._shared import Answer
from penelope_client.aio import AsyncPenelope
from penelope_client.client import Penelope

# A start answers once the worker is healthy: WAKER_START_TIMEOUT_S (90 s) at most.
WAKER_TIMEOUT_S = 120.0


def _persona_root(waker_root: str, name: str) -> str:
    return f"{waker_root}/w/{shared.segment(name)}"


def _moment(value: float | datetime | None) -> str | None:
    if isinstance(value, datetime):
        return value.isoformat()
    return None if value is None else repr(float(value))


def fleet_jobs_params(
    job_id: str | None, plugin: str | None, state: str | None, since: float | datetime | None,
    until: float | datetime | None, personas: list[str] | None, limit: int | None,
) -> dict[str, str]:
    """The query of GET /api/v1/fleet/jobs, without what is not given."""
    given = {
        "job_id": job_id, "plugin": plugin, "state": state, "since": _moment(since), "until": _moment(until),
        "persona": ",".join(personas) if personas else None, "limit": None if limit is None else str(limit),
    }
    return {name: value for name, value in given.items() if value is not None}


class Waker:
    """`Waker("http://127.0.0.1:5100", WAKER_KEY)`."""

    def __init__(self, base_url: str, key: str | None = None, *, timeout: float | None = WAKER_TIMEOUT_S):
        self.base_url = shared.api_root(base_url)
        self.http = httpx.Client(
            base_url=self.base_url + shared.API, headers=shared.authorization(key), timeout=shared.http_timeout(timeout)
        )

    def request(self, method: str, path: str, **options: Any) -> Answer:
        return shared.answer_of(self.http.request(method, path, **options))

    def health(self) -> Answer:
        return self.request("GET", "/health")

    def personas(self) -> Answer:
        """Every persona with its state (`personas`: a list)."""
        return self.request("GET", "/personas")

    def start(self, name: str) -> Answer:
        """Start the persona's worker (if it is stopped); answers once it is healthy."""
        return self.request("POST", f"/personas/{shared.segment(name)}/start")

    def stop(self, name: str, *, force: bool = False) -> Answer:
        """Stop it; Busy while work is in flight, unless `force`."""
        return self.request("POST", f"/personas/{shared.segment(name)}/stop", json={"force": force})

    def fleet_jobs(
        self, *, job_id: str | None = None, plugin: str | None = None, state: str | None = None,
        since: float | datetime | None = None, until: float | datetime | None = None,
        personas: list[str] | None = None, limit: int | None = None,
    ) -> Answer:
        """Jobs across every persona, newest first (`jobs`, each with its
        `persona`), read from their stores: no persona is woken for it.
        `since` and `until` bound the acceptance time (epoch seconds or a datetime)."""
        params = fleet_jobs_params(job_id, plugin, state, since, until, personas, limit)
        return self.request("GET", "/fleet/jobs", params=params)

    def persona(self, name: str, key: str | None, *, timeout: float | None = shared.DEFAULT_TIMEOUT_S) -> Penelope:
        """A client of the persona's worker through the waker, which starts the
        worker when a call needs it. `key` is the persona's key, not the waker's.
        Its events and live links go through the waker too."""
        return Penelope(_persona_root(self.base_url, name), key, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Waker:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


class AsyncWaker:
    """`Waker` for asyncio; `persona()` gives an AsyncPenelope."""

    def __init__(self, base_url: str, key: str | None = None, *, timeout: float | None = WAKER_TIMEOUT_S):
        self.base_url = shared.api_root(base_url)
        self.http = httpx.AsyncClient(
            base_url=self.base_url + shared.API, headers=shared.authorization(key), timeout=shared.http_timeout(timeout)
        )

    async def request(self, method: str, path: str, **options: Any) -> Answer:
        return shared.answer_of(await self.http.request(method, path, **options))

    async def health(self) -> Answer:
        return await self.request("GET", "/health")

    async def personas(self) -> Answer:
        return await self.request("GET", "/personas")

    async def start(self, name: str) -> Answer:
        return await self.request("POST", f"/personas/{shared.segment(name)}/start")

    async def stop(self, name: str, *, force: bool = False) -> Answer:
        return await self.request("POST", f"/personas/{shared.segment(name)}/stop", json={"force": force})

    async def fleet_jobs(
        self, *, job_id: str | None = None, plugin: str | None = None, state: str | None = None,
        since: float | datetime | None = None, until: float | datetime | None = None,
        personas: list[str] | None = None, limit: int | None = None,
    ) -> Answer:
        params = fleet_jobs_params(job_id, plugin, state, since, until, personas, limit)
        return await self.request("GET", "/fleet/jobs", params=params)

    def persona(self, name: str, key: str | None, *, timeout: float | None = shared.DEFAULT_TIMEOUT_S) -> AsyncPenelope:
        return AsyncPenelope(_persona_root(self.base_url, name), key, timeout=timeout)

    async def close(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncWaker:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()
