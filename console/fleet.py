"""The fleet as the console shows it: one row a persona, a persona's page,
and a search of every persona's jobs.

On the waker (`WakerFleet`), a persona's state and the live figures (pages,
memory) are the waker's own (waker/persona_worker.py, waker/watch.py), read
every WAKER_POLL_S by its policy anyway; the jobs, failures, schedules and
workload come from the persona's store (console/persona_store.py), awake or
asleep, so drawing the console never wakes a worker and never counts as a
worker's activity. A sleeping persona's live figures are the last ones read,
with their time. On Kubernetes the same shapes come from each worker's
Service instead (console/fleet_http.py).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import httpx

from console import persona_store
from console.persona_store import JobSearch
from core.wrong_keys import WrongKeys
from waker import supervisor as supervision
from waker.persona_worker import RUNNING, STARTING, STOPPING, PersonaWorker
from waker.personas import ALWAYS
from waker.readings import ACTIVITY_TIMEOUT_S
from waker.supervisor import Supervisor

ASLEEP, AWAKE, FAILING = "asleep", "awake", "failing"
STATES = (ASLEEP, STARTING, AWAKE, STOPPING, FAILING)


@dataclass
class Row:
    """One persona on the fleet page. Live figures (pages, memory) carry the
    time they were read: for a sleeping persona, its last reading."""

    name: str
    mode: str
    state: str
    reason: str | None
    jobs_running: int
    jobs_queued: int
    failed_hour: int
    failed_day: int
    next_fire_at: float | None
    requests_by_hour: list[int]
    pages_busy: int | None = None
    pages_open: int | None = None
    pages_read_at: float | None = None
    memory_bytes: int | None = None
    memory_read_at: float | None = None
    last_woke_at: float | None = None
    uptime_s: float | None = None
    read_at: float = field(default_factory=time.time)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Detail:
    """A persona's page: its row, what its store says, its pages and memory."""

    row: Row
    overview: dict[str, Any]
    memory: dict[str, list[int | None]]  # per scale, aligned with the overview's series
    pages_open: list[str]
    pages_busy: list[str]
    can_act: bool
    # Whether /w/{name}/... reaches the persona (the waker's proxy); on Kubernetes nothing answers there.
    waker_links: bool = True


class Fleet(Protocol):
    key_guard: WrongKeys
    can_act: bool

    def names(self) -> list[str]: ...

    async def rows(self) -> list[Row]: ...

    async def detail(self, name: str) -> Detail | None: ...

    async def search(self, search: JobSearch, personas: list[str]) -> tuple[list[dict[str, Any]], dict[str, str]]: ...

    async def metrics(self, name: str) -> str | None: ...


# The console's fleet when it runs apart from a waker (`manage.py console`,
# on Kubernetes: console/fleet_http.py); else it is the waker's.
standalone: Fleet | None = None


def current_fleet() -> Fleet:
    return standalone or WakerFleet(supervision.current())


def state_of(worker: PersonaWorker) -> tuple[str, str | None]:
    """The persona's state for an operator, and the reason when it is failing
    (or an `always` persona is asleep because someone stopped it)."""
    if worker.state == RUNNING:
        if worker.activity_error:
            return FAILING, f"its activity cannot be read: {worker.activity_error}"
        activity = worker.activity
        if activity is not None and activity.browser_state != "up":
            return FAILING, f"its browser is {activity.browser_state}"
        return AWAKE, None
    if worker.state in (STARTING, STOPPING):
        return worker.state, None
    if worker.watch.start_error:
        return FAILING, f"it did not start: {worker.watch.start_error}"
    last_exit = worker.last_exit
    if last_exit and not last_exit["expected"]:
        return FAILING, f"its worker exited unexpectedly with code {last_exit['returncode']}"
    if worker.persona.mode == ALWAYS and worker.stay_stopped:
        return ASLEEP, "stopped by an operator"
    return ASLEEP, None


def memory_by(points: list[tuple[float, int]], start: float, step: float, count: int) -> list[int | None]:
    """The most charged in each of `count` buckets of `step` seconds from `start`."""
    peaks: list[int | None] = [None] * count
    for minute, peak in points:
        bucket = int((minute - start) // step)
        if 0 <= bucket < count:
            peaks[bucket] = max(peaks[bucket] or 0, peak)
    return peaks


class WakerFleet:
    """The fleet of the waker this process runs."""

    can_act = True

    def __init__(self, supervisor: Supervisor):
        self.supervisor = supervisor
        self.key_guard = supervisor.key_guard

    def names(self) -> list[str]:
        return list(self.supervisor.workers)

    def worker(self, name: str) -> PersonaWorker | None:
        return self.supervisor.get(name)

    async def rows(self) -> list[Row]:
        now = time.time()
        workers = list(self.supervisor.workers.values())
        stored = await asyncio.gather(
            *(asyncio.to_thread(persona_store.row_reading, worker.persona.store, now) for worker in workers)
        )
        return [self.row(worker, reading, now) for worker, reading in zip(workers, stored, strict=True)]

    def row(self, worker: PersonaWorker, reading: dict[str, Any], now: float) -> Row:
        state, reason = state_of(worker)
        watch, jobs = worker.watch, reading["jobs"]
        activity = watch.last_activity
        return Row(
            name=worker.persona.name,
            mode=worker.persona.mode,
            state=state,
            reason=reason,
            jobs_running=jobs["running"],
            jobs_queued=jobs["queued"],
            failed_hour=jobs["failed_hour"],
            failed_day=jobs["failed_day"],
            next_fire_at=reading["next_fire_at"],
            requests_by_hour=reading["requests_by_hour"],
            pages_busy=len(activity.busy_pages) if activity else None,
            pages_open=len(activity.open_pages) if activity else None,
            pages_read_at=activity.read_at if activity else None,
            memory_bytes=watch.memory_now,
            memory_read_at=watch.memory_read_at,
            last_woke_at=watch.last_woke_at,
            uptime_s=now - worker.started_at if worker.started_at else None,
            read_at=now,
        )

    async def detail(self, name: str) -> Detail | None:
        worker = self.worker(name)
        if worker is None:
            return None
        now = time.time()
        store = worker.persona.store
        reading, overview = await asyncio.gather(
            asyncio.to_thread(persona_store.row_reading, store, now),
            asyncio.to_thread(persona_store.overview, store, now),
        )
        points = [(point.minute, point.peak) for point in worker.watch.memory]
        memory = {
            scale: memory_by(points, shaped["start"], shaped["step"], len(shaped["calls_ok"]))
            for scale, shaped in overview["series"].items()
        }
        activity = worker.watch.last_activity
        return Detail(
            row=self.row(worker, reading, now),
            overview=overview,
            memory=memory,
            pages_open=list(activity.open_pages) if activity else [],
            pages_busy=list(activity.busy_pages) if activity else [],
            can_act=True,
        )

    async def search(self, search: JobSearch, personas: list[str]) -> tuple[list[dict[str, Any]], dict[str, str]]:
        """Every chosen persona's matching jobs, newest first, at most
        `search.limit` in all; and per persona where they were read from."""
        workers = [self.supervisor.workers[name] for name in personas]
        found = await asyncio.gather(
            *(asyncio.to_thread(persona_store.search_jobs, worker.persona.store, search) for worker in workers)
        )
        hits = [
            {"persona": worker.persona.name, **job} for worker, jobs in zip(workers, found, strict=True) for job in jobs
        ]
        hits.sort(key=lambda job: (job["accepted_at"], job["id"]), reverse=True)
        sources = {worker.persona.name: f"store ({state_of(worker)[0]})" for worker in workers}
        return hits[: search.limit], sources

    async def metrics(self, name: str) -> str | None:
        """The worker's metrics text, or None while it is not running (never woken for it)."""
        worker = self.supervisor.workers[name]
        if worker.state != RUNNING:
            return None
        try:
            answer = await self.supervisor.http.get(
                worker.persona.api_url + "/metrics", headers=worker.auth_headers(), timeout=ACTIVITY_TIMEOUT_S
            )
        except httpx.HTTPError:
            return None
        return answer.text if answer.status_code == 200 else None
