"""`AsyncPenelope`: the twin of `Penelope` (client.py) for asyncio, method for method."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from penelope_client import _shared as shared
from penelope_client._credentials import AsyncCredentialCalls
from penelope_client._shared import Answer
from penelope_client.errors import Leased, NotFound, PenelopeError, Unavailable
from penelope_client.events import AsyncEventStream


class AsyncPenelope(AsyncCredentialCalls):
    """`Penelope` with every call awaited: `await client.call("main", "web/state")`."""

    def __init__(self, base_url: str, key: str | None = None, *, timeout: float | None = shared.DEFAULT_TIMEOUT_S):
        self.base_url = shared.api_root(base_url)
        self.key = key
        self.http = httpx.AsyncClient(
            base_url=self.base_url + shared.API,
            headers=shared.authorization(key),
            timeout=shared.http_timeout(timeout),
        )

    async def request(self, method: str, path: str, **options: Any) -> Answer:
        return shared.answer_of(await self.http.request(method, path, **options))

    async def health(self) -> Answer:
        return await self.request("GET", "/health")

    async def pages(self) -> Answer:
        return await self.request("GET", "/pages")

    async def pressure(self) -> Answer:
        """How loaded the worker is: pages, jobs running and queued, refusals."""
        return await self.request("GET", "/pressure")

    async def open_page(self, page_id: str) -> Answer:
        return await self.request("POST", "/pages", json={"page_id": page_id})

    async def close_page(self, page_id: str) -> Answer:
        return await self.request("DELETE", f"/{shared.segment(page_id)}")

    async def call(self, page: str, route: str, /, **params: Any) -> Answer:
        return await self.request("POST", shared.plugin_path(page, route), json=params)

    async def upload_file(
        self, path: str | Path, *, content_type: str | None = None, filename: str | None = None
    ) -> Answer:
        path = Path(path)

        async def pieces() -> AsyncIterator[bytes]:
            with open(path, "rb") as file:
                while piece := await asyncio.to_thread(file.read, shared.PIECE):
                    yield piece

        headers = shared.upload_headers(path, content_type, filename)
        return await self.request("POST", "/media", content=pieces(), headers=headers)

    async def upload(
        self, page: str, selector: str, files: list[str | Answer], *, lease: str | None = None, **params: Any
    ) -> Answer:
        links = [file["url"] if isinstance(file, dict) else file for file in files]
        body = {"selector": selector, "files": links, **params}
        return await self.request("POST", shared.plugin_path(page, "web/upload"), json=body, headers=shared.lease_header(lease))

    async def download(
        self, page: str, *, url: str | None = None, selector: str | None = None, to: str | Path | None = None,
        lease: str | None = None, timeout_ms: int | None = None,
    ) -> bytes | Path:
        params = shared.transfer_params(url, selector, timeout_ms=timeout_ms)
        path = shared.plugin_path(page, "web/download")
        answer = await self.request("POST", path, json=params, headers=shared.lease_header(lease))
        return await self.media(answer["media"], to=to)

    async def media(self, link: str | Answer, *, to: str | Path | None = None) -> bytes | Path:
        async with self.http.stream("GET", shared.media_path(link)) as response:
            if not response.is_success:
                await response.aread()
                shared.answer_of(response)
            if to is None:
                return await response.aread()
            target = Path(to)
            with open(target, "wb") as file:
                async for piece in response.aiter_bytes():
                    await asyncio.to_thread(file.write, piece)
            return target

    def lease(self, page: str, ttl: float) -> AsyncLease:
        """`async with client.lease("main", ttl=60) as lease: await lease.call(...)`."""
        return AsyncLease(self, page, ttl)

    async def start_job(
        self,
        page: str,
        route: str,
        params: dict[str, Any] | None = None,
        *,
        ttl: float | None = None,
        callback: str | None = None,
        idempotency_key: str | None = None,
        lease: str | None = None,
        queue_timeout: float | None = None,
        priority: int | None = None,
        retry: int | None = None,
        retry_backoff: float | None = None,
        notify_url: str | None = None,
    ) -> AsyncJob:
        headers = {
            **shared.job_headers(
                ttl, callback, idempotency_key, queue_timeout, priority, retry, retry_backoff, notify_url
            ),
            **shared.lease_header(lease),
        }
        started = await self.request("POST", shared.plugin_path(page, route), json=params or {}, headers=headers)
        return AsyncJob(self, started["job_id"], started)

    async def create_schedule(self, name: str, *, cron: str, plugin: str, page_id: str = "main", **fields: Any) -> Answer:
        """Store a schedule: `fields` as POST /api/v1/schedules takes them
        (`params`, `timezone`, `result_ttl` or `callback_url`, `overlap`, `retry`, ...).
        Answers it, with its `schedule_id`, `next_fire_at` and counters (`refused`,
        `last_error`, `last_refused_at`...). Busy (409) when the name is taken or
        SCHEDULES_MAX schedules are stored."""
        body = {"name": name, "cron": cron, "plugin": plugin, "page_id": page_id, **fields}
        return await self.request("POST", "/schedules", json=body)

    async def schedules(self) -> list[Answer]:
        return (await self.request("GET", "/schedules"))["schedules"]

    async def schedule(self, schedule_id: str) -> Answer:
        return await self.request("GET", f"/schedules/{shared.segment(schedule_id)}")

    async def update_schedule(self, schedule_id: str, **fields: Any) -> Answer:
        """Change some of a schedule's fields (`paused=True` pauses it); answers it as changed."""
        return await self.request("PATCH", f"/schedules/{shared.segment(schedule_id)}", json=fields)

    async def delete_schedule(self, schedule_id: str) -> None:
        """Delete a schedule; the jobs it started stay."""
        await self.request("DELETE", f"/schedules/{shared.segment(schedule_id)}")

    async def trigger_schedule(self, schedule_id: str) -> AsyncJob:
        """Fire a schedule now (with its overlap): the job it started."""
        started = await self.request("POST", f"/schedules/{shared.segment(schedule_id)}/trigger")
        return AsyncJob(self, started["job_id"], started)

    async def live_link(
        self, page: str, *, ttl: float = 900, control: bool = False, lease: str | None = None
    ) -> Answer:
        """A link to watch the page live (with `control`, to drive it too),
        for `ttl` seconds: its `url` (absolute: give it to a person),
        `expires_at` and `control`. A control link on a leased page needs the lease."""
        answer = await self.request(
            "POST", shared.live_path(page), json={"ttl": ttl, "control": control}, headers=shared.lease_header(lease)
        )
        return shared.absolute_live(self.base_url, answer)

    async def revoke_live_links(self, page: str) -> int:
        """Revoke every live link of the page now; how many there were."""
        return (await self.request("DELETE", shared.live_path(page)))["revoked"]

    def job(self, job_id: str) -> AsyncJob:
        return AsyncJob(self, job_id)

    async def jobs(
        self,
        *,
        state: str | None = None,
        page_id: str | None = None,
        plugin: str | None = None,
        limit: int | None = None,
        schedule: str | None = None,
    ) -> AsyncIterator[Answer]:
        params = shared.job_list_params(state, page_id, plugin, limit, schedule)
        while True:
            answer = await self.request("GET", "/jobs", params=params)
            for job in answer["jobs"]:
                yield job
            if not answer["next"]:
                return
            params["cursor"] = answer["next"]

    def events(self, *, job: str | None = None, page: str | None = None, since: int | None = None) -> AsyncEventStream:
        """`async with client.events(job=...) as events: async for event in events: ...`;
        `since` as the sync client's."""
        return AsyncEventStream(shared.events_url(self.base_url, job, page, since), shared.authorization(self.key))

    async def close(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncPenelope:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()


class AsyncLease:
    """`Lease` for asyncio: renewed by a task while the `async with` block runs."""

    def __init__(self, client: AsyncPenelope, page: str, ttl: float) -> None:
        self.client = client
        self.page_id = page
        self.ttl = ttl
        self.id: str | None = None
        self.lost: PenelopeError | None = None
        self._renewer: asyncio.Task[None] | None = None

    @property
    def _path(self) -> str:
        return f"/{shared.segment(self.page_id)}/lease"

    async def take(self) -> Answer:
        answer = await self.client.request(
            "POST", self._path, json={"ttl": self.ttl}, headers=shared.lease_header(self.id)
        )
        self.id = answer["lease"]
        return answer

    async def renew(self, ttl: float | None = None) -> Answer:
        if ttl is not None:
            self.ttl = ttl
        return await self.take()

    async def release(self) -> Answer:
        return await self.client.request("DELETE", self._path, headers=shared.lease_header(self.id))

    async def call(self, route: str, /, **params: Any) -> Answer:
        path = shared.plugin_path(self.page_id, route)
        return await self.client.request("POST", path, json=params, headers=shared.lease_header(self.id))

    async def start_job(
        self,
        route: str,
        params: dict[str, Any] | None = None,
        *,
        ttl: float | None = None,
        callback: str | None = None,
        idempotency_key: str | None = None,
        queue_timeout: float | None = None,
        priority: int | None = None,
        retry: int | None = None,
        retry_backoff: float | None = None,
        notify_url: str | None = None,
    ) -> AsyncJob:
        return await self.client.start_job(
            self.page_id, route, params, ttl=ttl, callback=callback, idempotency_key=idempotency_key, lease=self.id,
            queue_timeout=queue_timeout, priority=priority, retry=retry, retry_backoff=retry_backoff,
            notify_url=notify_url,
        )

    async def live_link(self, *, ttl: float = 900, control: bool = False) -> Answer:
        return await self.client.live_link(self.page_id, ttl=ttl, control=control, lease=self.id)

    async def cdp_url(self, ttl: float | None = None) -> str:
        """`Lease.cdp_url`: `await playwright.chromium.connect_over_cdp(await lease.cdp_url())`."""
        answer = await self.client.request(
            "POST", shared.cdp_path(self.page_id), json=shared.cdp_body(ttl), headers=shared.lease_header(self.id)
        )
        return shared.cdp_url(self.client.base_url, answer)

    async def _renew_until_stopped(self) -> None:
        while True:
            await asyncio.sleep(self.ttl * shared.RENEW_FRACTION)
            try:
                await self.renew()
            except PenelopeError as error:
                self.lost = error
                return
            except httpx.TransportError:
                continue

    async def __aenter__(self) -> AsyncLease:
        await self.take()
        self._renewer = asyncio.create_task(self._renew_until_stopped())
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            await asyncio.gather(self._renewer, return_exceptions=True)
        try:
            await self.release()
        except (Leased, NotFound):
            pass


class AsyncJob:
    """`Job` for asyncio."""

    def __init__(self, client: AsyncPenelope, job_id: str, started: Answer | None = None) -> None:
        self.client = client
        self.id = job_id
        self.started: Answer = started or {}

    def __repr__(self) -> str:
        return f"<AsyncJob {self.id}>"

    @property
    def _path(self) -> str:
        return f"/jobs/{shared.segment(self.id)}"

    async def poll(self) -> Answer:
        return await self.client.request("GET", self._path)

    async def wait(self, timeout: float | None = None) -> Answer:
        deadline = None if timeout is None else time.monotonic() + timeout
        backoff, most = shared.POLL_BACKOFF_S
        while True:
            left = shared.LONG_POLL_S if deadline is None else deadline - time.monotonic()
            wait = shared.wait_value(left)
            if wait is None:
                return await self.poll()
            asked = time.monotonic()
            try:
                job = await self.client.request(
                    "GET", self._path, params={"wait": wait}, timeout=shared.long_poll_timeout(wait)
                )
            except Unavailable:  # MAX_WAITERS long-polls wait already
                job = None
            if job is not None and job["state"] != "running":
                return job
            if shared.answered_early(asked, wait):  # no place for a long-poll (or none offered): back off
                await asyncio.sleep(min(backoff, max(left, 0)))
                backoff = min(backoff * 2, most)

    async def human(self) -> Answer | None:
        """What its plugin asks a person, while it waits for one: `reason`,
        `live_url` (absolute: a control link made for the question),
        `asked_at`, `expires_at`; None when it asks nothing now."""
        return shared.human_of(self.client.base_url, await self.poll())

    async def rerun(self) -> AsyncJob:
        """Start this ended job's request again (its route, page, parameters
        and job headers): the new job, whose answers name this one (`rerun_of`)."""
        started = await self.client.request("POST", self._path + "/rerun")
        return AsyncJob(self.client, started["job_id"], started)

    async def cancel(self) -> Answer:
        return await self.client.request("POST", self._path + "/cancel")

    async def forget(self) -> None:
        await self.client.request("DELETE", self._path)
