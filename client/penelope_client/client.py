"""`Penelope`: one worker's API, synchronous. `AsyncPenelope` (aio.py) is its twin."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from penelope_client import _shared as shared
from penelope_client._credentials import CredentialCalls
from penelope_client._shared import Answer
from penelope_client.errors import Leased, NotFound, PenelopeError, Unavailable
from penelope_client.events import EventStream


class Penelope(CredentialCalls):
    """A client of one worker: `Penelope("http://127.0.0.1:5000", key)`.

    Every method answers the worker's answer (a dict), or raises the
    PenelopeError its status stands for. A network failure is httpx's own
    error (httpx.TransportError)."""

    def __init__(self, base_url: str, key: str | None = None, *, timeout: float | None = shared.DEFAULT_TIMEOUT_S):
        self.base_url = shared.api_root(base_url)
        self.key = key
        self.http = httpx.Client(
            base_url=self.base_url + shared.API,
            headers=shared.authorization(key),
            timeout=shared.http_timeout(timeout),
        )

    def request(self, method: str, path: str, **options: Any) -> Answer:
        """Any route under /api/v1 (`options` as httpx takes them): its answer, or its error."""
        return shared.answer_of(self.http.request(method, path, **options))

    def health(self) -> Answer:
        return self.request("GET", "/health")

    def pages(self) -> Answer:
        return self.request("GET", "/pages")

    def pressure(self) -> Answer:
        """How loaded the worker is: pages, jobs running and queued, refusals."""
        return self.request("GET", "/pressure")

    def open_page(self, page_id: str) -> Answer:
        return self.request("POST", "/pages", json={"page_id": page_id})

    def close_page(self, page_id: str) -> Answer:
        return self.request("DELETE", f"/{shared.segment(page_id)}")

    def call(self, page: str, route: str, /, **params: Any) -> Answer:
        """Run a plugin action ("family/action") on a page and answer its answer."""
        return self.request("POST", shared.plugin_path(page, route), json=params)

    def upload_file(self, path: str | Path, *, content_type: str | None = None, filename: str | None = None) -> Answer:
        """Store a file on the worker (POST /api/v1/media), sent in pieces:
        its `media` link (for `upload()`), `filename` and `sha256`."""
        path = Path(path)

        def pieces() -> Iterator[bytes]:
            with open(path, "rb") as file:
                while piece := file.read(shared.PIECE):
                    yield piece

        return self.request("POST", "/media", content=pieces(), headers=shared.upload_headers(path, content_type, filename))

    def upload(self, page: str, selector: str, files: list[str | Answer], *, lease: str | None = None, **params: Any) -> Answer:
        """Set media files (links, or the `media` dicts `upload_file` answers) on
        the page's file input `selector` (web/upload)."""
        links = [file["url"] if isinstance(file, dict) else file for file in files]
        body = {"selector": selector, "files": links, **params}
        return self.request("POST", shared.plugin_path(page, "web/upload"), json=body, headers=shared.lease_header(lease))

    def download(
        self, page: str, *, url: str | None = None, selector: str | None = None, to: str | Path | None = None,
        lease: str | None = None, timeout_ms: int | None = None,
    ) -> bytes | Path:
        """Take the file `url` answers with, or that a click on `selector`
        starts (web/download), and fetch it: its bytes, or with `to` the path
        it was written to (in pieces)."""
        params = shared.transfer_params(url, selector, timeout_ms=timeout_ms)
        answer = self.request("POST", shared.plugin_path(page, "web/download"), json=params, headers=shared.lease_header(lease))
        return self.media(answer["media"], to=to)

    def media(self, link: str | Answer, *, to: str | Path | None = None) -> bytes | Path:
        """A media file's bytes, or with `to` the path it was written to. A plain
        call's link is used up by the first whole download."""
        with self.http.stream("GET", shared.media_path(link)) as response:
            if not response.is_success:
                response.read()
                shared.answer_of(response)
            if to is None:
                return response.read()
            target = Path(to)
            with open(target, "wb") as file:
                for piece in response.iter_bytes():
                    file.write(piece)
            return target

    def lease(self, page: str, ttl: float) -> Lease:
        """`with client.lease("main", ttl=60) as lease: lease.call(...)`: see Lease."""
        return Lease(self, page, ttl)

    def start_job(
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
    ) -> Job:
        """Start a plugin action as a job: held `ttl` seconds after it ends for
        polling, or POSTed to `callback` when it ends (one of the two)."""
        headers = {
            **shared.job_headers(
                ttl, callback, idempotency_key, queue_timeout, priority, retry, retry_backoff, notify_url
            ),
            **shared.lease_header(lease),
        }
        started = self.request("POST", shared.plugin_path(page, route), json=params or {}, headers=headers)
        return Job(self, started["job_id"], started)

    def create_schedule(self, name: str, *, cron: str, plugin: str, page_id: str = "main", **fields: Any) -> Answer:
        """Store a schedule: `fields` as POST /api/v1/schedules takes them
        (`params`, `timezone`, `result_ttl` or `callback_url`, `overlap`, `retry`, ...).
        Answers it, with its `schedule_id`, `next_fire_at` and counters (`refused`,
        `last_error`, `last_refused_at`...). Busy (409) when the name is taken or
        SCHEDULES_MAX schedules are stored."""
        body = {"name": name, "cron": cron, "plugin": plugin, "page_id": page_id, **fields}
        return self.request("POST", "/schedules", json=body)

    def schedules(self) -> list[Answer]:
        return (self.request("GET", "/schedules"))["schedules"]

    def schedule(self, schedule_id: str) -> Answer:
        return self.request("GET", f"/schedules/{shared.segment(schedule_id)}")

    def update_schedule(self, schedule_id: str, **fields: Any) -> Answer:
        """Change some of a schedule's fields (`paused=True` pauses it); answers it as changed."""
        return self.request("PATCH", f"/schedules/{shared.segment(schedule_id)}", json=fields)

    def delete_schedule(self, schedule_id: str) -> None:
        """Delete a schedule; the jobs it started stay."""
        self.request("DELETE", f"/schedules/{shared.segment(schedule_id)}")

    def trigger_schedule(self, schedule_id: str) -> Job:
        """Fire a schedule now (with its overlap): the job it started."""
        started = self.request("POST", f"/schedules/{shared.segment(schedule_id)}/trigger")
        return Job(self, started["job_id"], started)

    def live_link(
        self, page: str, *, ttl: float = 900, control: bool = False, lease: str | None = None
    ) -> Answer:
        """A link to watch the page live (with `control`, to drive it too),
        for `ttl` seconds: its `url` (absolute: give it to a person),
        `expires_at` and `control`. A control link on a leased page needs the lease."""
        answer = self.request(
            "POST", shared.live_path(page), json={"ttl": ttl, "control": control}, headers=shared.lease_header(lease)
        )
        return shared.absolute_live(self.base_url, answer)

    def revoke_live_links(self, page: str) -> int:
        """Revoke every live link of the page now; how many there were."""
        return (self.request("DELETE", shared.live_path(page)))["revoked"]

    def job(self, job_id: str) -> Job:
        """A job known by its id (started earlier, or by another client)."""
        return Job(self, job_id)

    def jobs(
        self,
        *,
        state: str | None = None,
        page_id: str | None = None,
        plugin: str | None = None,
        limit: int | None = None,
        schedule: str | None = None,
    ) -> Iterator[Answer]:
        """Every job held, newest first, as the job list shows them (no `result`),
        fetched `limit` (1 to 200, the worker's default 50) at a time."""
        params = shared.job_list_params(state, page_id, plugin, limit, schedule)
        while True:
            answer = self.request("GET", "/jobs", params=params)
            yield from answer["jobs"]
            if not answer["next"]:
                return
            params["cursor"] = answer["next"]

    def events(self, *, job: str | None = None, page: str | None = None, since: int | None = None) -> EventStream:
        """The live event stream, only one job's events or one page's if asked:
        `with client.events(page="main") as events: for event in events: ...`.
        With `since` (the `id` of the last event handled), the events kept
        after it come first."""
        return EventStream(shared.events_url(self.base_url, job, page, since), shared.authorization(self.key))

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Penelope:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


class Lease:
    """A lease on one page, taken as the `with` block starts, renewed in the
    background while it runs (a third of `ttl` after each renewal) and released
    when it ends, even on an error. Calls made through it carry `X-Lease`."""

    def __init__(self, client: Penelope, page: str, ttl: float) -> None:
        self.client = client
        self.page_id = page
        self.ttl = ttl
        self.id: str | None = None
        # The error that ended the renewals (the lease was lost), or None.
        self.lost: PenelopeError | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    @property
    def _path(self) -> str:
        return f"/{shared.segment(self.page_id)}/lease"

    def take(self) -> Answer:
        """Take the lease, or renew it when it is held already (the same id)."""
        answer = self.client.request("POST", self._path, json={"ttl": self.ttl}, headers=shared.lease_header(self.id))
        self.id = answer["lease"]
        return answer

    def renew(self, ttl: float | None = None) -> Answer:
        """Renew now, for `ttl` seconds from now (the same ttl again if not given)."""
        if ttl is not None:
            self.ttl = ttl
        return self.take()

    def release(self) -> Answer:
        return self.client.request("DELETE", self._path, headers=shared.lease_header(self.id))

    def call(self, route: str, /, **params: Any) -> Answer:
        path = shared.plugin_path(self.page_id, route)
        return self.client.request("POST", path, json=params, headers=shared.lease_header(self.id))

    def start_job(
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
    ) -> Job:
        return self.client.start_job(
            self.page_id, route, params, ttl=ttl, callback=callback, idempotency_key=idempotency_key, lease=self.id,
            queue_timeout=queue_timeout, priority=priority, retry=retry, retry_backoff=retry_backoff,
            notify_url=notify_url,
        )

    def live_link(self, *, ttl: float = 900, control: bool = False) -> Answer:
        """A live link to the lease's page, made under the lease (a control
        link on a leased page needs it): see `Penelope.live_link`."""
        return self.client.live_link(self.page_id, ttl=ttl, control=control, lease=self.id)

    def cdp_url(self, ttl: float | None = None) -> str:
        """A one-connection WebSocket URL (`ws://…/cdp/<token>`) for your own
        Playwright or Puppeteer to drive the lease's page:
        `chromium.connect_over_cdp(lease.cdp_url())`. The token works once,
        for `ttl` seconds (at most, and by default, what the lease has left
        now: renewals do not extend it); its connection closes then, or when
        the lease ends."""
        answer = self.client.request(
            "POST", shared.cdp_path(self.page_id), json=shared.cdp_body(ttl), headers=shared.lease_header(self.id)
        )
        return shared.cdp_url(self.client.base_url, answer)

    def _renew_until_stopped(self) -> None:
        while not self._stop.wait(self.ttl * shared.RENEW_FRACTION):
            try:
                self.renew()
            except PenelopeError as error:  # gone (expired, broken, the worker restarted): calls will say 423
                self.lost = error
                return
            except httpx.TransportError:  # a network blip: the next turn tries again
                continue

    def __enter__(self) -> Lease:
        self.take()
        self._renewer = threading.Thread(target=self._renew_until_stopped, name=f"lease {self.page_id}", daemon=True)
        self._renewer.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        try:
            self.release()
        except (Leased, NotFound):  # expired, broken, or its page closed: released either way
            pass


class Job:
    """A job on the worker: `poll()` and `wait()` answer it as a poll shows it
    (`state`, `status`, `result`, ...); `started` is the answer that started it."""

    def __init__(self, client: Penelope, job_id: str, started: Answer | None = None) -> None:
        self.client = client
        self.id = job_id
        self.started: Answer = started or {}

    def __repr__(self) -> str:
        return f"<Job {self.id}>"

    @property
    def _path(self) -> str:
        return f"/jobs/{shared.segment(self.id)}"

    def poll(self) -> Answer:
        return self.client.request("GET", self._path)

    def wait(self, timeout: float | None = None) -> Answer:
        """The job once it has ended, or as it is when `timeout` seconds have
        passed (`state` still `running`); None waits as long as it runs. Each
        request is a long-poll of at most 60 s, which the worker answers the
        moment the job ends."""
        deadline = None if timeout is None else time.monotonic() + timeout
        backoff, most = shared.POLL_BACKOFF_S
        while True:
            left = shared.LONG_POLL_S if deadline is None else deadline - time.monotonic()
            wait = shared.wait_value(left)
            if wait is None:
                return self.poll()
            asked = time.monotonic()
            try:
                job = self.client.request(
                    "GET", self._path, params={"wait": wait}, timeout=shared.long_poll_timeout(wait)
                )
            except Unavailable:  # MAX_WAITERS long-polls wait already
                job = None
            if job is not None and job["state"] != "running":
                return job
            if shared.answered_early(asked, wait):  # no place for a long-poll (or none offered): back off
                time.sleep(min(backoff, max(left, 0)))
                backoff = min(backoff * 2, most)

    def human(self) -> Answer | None:
        """What its plugin asks a person, while it waits for one: `reason`,
        `live_url` (absolute: a control link made for the question),
        `asked_at`, `expires_at`; None when it asks nothing now."""
        return shared.human_of(self.client.base_url, self.poll())

    def rerun(self) -> Job:
        """Start this ended job's request again (its route, page, parameters
        and job headers): the new job, whose answers name this one (`rerun_of`)."""
        started = self.client.request("POST", self._path + "/rerun")
        return Job(self.client, started["job_id"], started)

    def cancel(self) -> Answer:
        """Stop it; answers the job, `cancelled`, once its plugin has stopped."""
        return self.client.request("POST", self._path + "/cancel")

    def forget(self) -> None:
        """Delete an ended job and its files now, rather than at its ttl."""
        self.client.request("DELETE", self._path)
