"""The fleet as a console on Kubernetes reads it: each persona through its
worker's Service, with a read key (`manage.py console`, docs/guides/SCALING.md).

Where KEDA replaces the waker there is no store file to open and no process
to watch: everything comes from the worker's `GET /api/v1/overview` (its
store's readings and its live figures, activity/overview.py), its
`/api/v1/overview/jobs` for the search and its `/api/v1/metrics`. Those
reads are not client activity, and the Service is not the add-on's
interceptor, so reading a persona never wakes it nor keeps it awake.

What that costs:

- a persona at zero replicas does not answer. A refused connection (a
  Service without endpoints) shows it `asleep`, with the figures last read
  and their age; any other failure shows it `failing` with the reason;
- the console knows only what it read while it ran: each persona's last
  reading and the memory of each read (waker/watch.py's minute peaks), in
  memory, from its own start;
- a read key acts on nothing: no start or stop, no pause, cancel or live view
  (`can_act` is False), and no /w/{persona}/ link (no waker proxies them).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from dataclasses import dataclass
from typing import Any

import httpx

from console import persona_store
from console.fleet import ASLEEP, AWAKE, FAILING, Detail, Row, memory_by
from console.fleet_file import ServicePersona
from console.persona_store import JobSearch
from console.present import ago
from core.wrong_keys import WrongKeys
from waker.watch import Watch

log = logging.getLogger("penelope.console")

ASLEEP_REASON = "no replica answers (KEDA scaled it to zero, or it is down)"
# What a refused read says, by the worker's status.
REFUSED = {
    401: "its read key is refused (401): is it one of the worker's PENELOPE_READ_KEYS?",
    404: "it has no /api/v1/overview (404): is the URL a worker's, of this version?",
}


@dataclass
class Reading:
    """A persona's last overview (`row`, `overview`, `live`), and when it was read."""

    body: dict[str, Any]
    read_at: float


@dataclass(frozen=True)
class Outcome:
    """One read of a persona: its state, why, and whether it answered."""

    state: str
    reason: str | None = None
    answered: bool = False


def refused(error: BaseException) -> bool:
    """Whether nothing listened: the connection was refused (a Service with
    no endpoints refuses it; a name that does not resolve is no refusal)."""
    pending, seen = [error], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError) or getattr(current, "errno", None) == errno.ECONNREFUSED:
            return True
        pending += [cause for cause in (current.__cause__, current.__context__) if cause is not None]
        pending += list(getattr(current, "exceptions", ()))  # the connection attempts, as a group
    return False


def described(error: BaseException) -> str:
    """The innermost cause's sentence (`[Errno -2] Name or service not known`), or the error's kind."""
    innermost = error
    while innermost.__cause__ is not None:
        innermost = innermost.__cause__
    return str(innermost) or str(error) or error.__class__.__name__


def refusal(answer: httpx.Response) -> str:
    if answer.status_code in REFUSED:
        return REFUSED[answer.status_code]
    try:
        sentence = str(answer.json().get("error") or "")
    except (ValueError, AttributeError):
        sentence = answer.text
    return f"it answered {answer.status_code}" + (f": {sentence[:200]}" if sentence else "")


class ServiceFleet:
    """The personas of a fleet file, read through their Services."""

    can_act = False

    def __init__(
        self, personas: list[ServicePersona], *, timeout_s: float = 5.0, http: httpx.AsyncClient | None = None
    ) -> None:
        self.personas = {persona.name: persona for persona in personas}
        self.key_guard = WrongKeys()
        self.http = http or httpx.AsyncClient(timeout=timeout_s)
        self.last: dict[str, Reading] = {}
        self.watches = {name: Watch() for name in self.personas}
        self.reader: asyncio.Task | None = None

    def names(self) -> list[str]:
        return list(self.personas)

    @staticmethod
    def headers(persona: ServicePersona) -> dict[str, str]:
        return {"Authorization": f"Bearer {persona.read_key}"}

    async def read(self, persona: ServicePersona) -> Outcome:
        """Read the persona's overview; keep it, and its memory, when it answers."""
        try:
            answer = await self.http.get(persona.api_url + "/overview", headers=self.headers(persona))
        except httpx.HTTPError as error:
            if refused(error):
                return Outcome(ASLEEP, ASLEEP_REASON)
            return Outcome(FAILING, f"unreachable: {described(error)}")
        if answer.status_code != 200:
            return Outcome(FAILING, refusal(answer))
        try:
            body = answer.json()
            live = body["live"]
            memory, browser = int(live["memory_bytes"]), str(live["browser_state"])
            shaped = isinstance(body["row"]["jobs"], dict) and isinstance(body["overview"]["series"], dict)
        except (ValueError, KeyError, TypeError):
            shaped = False
        if not shaped:
            return Outcome(FAILING, "its answer is not a worker's overview")
        now = time.time()
        self.last[persona.name] = Reading(body, now)
        self.watches[persona.name].note_memory(memory, now)
        if browser != "up":
            return Outcome(FAILING, f"its browser is {browser}", answered=True)
        return Outcome(AWAKE, answered=True)

    def row(self, persona: ServicePersona, outcome: Outcome, now: float) -> Row:
        last = self.last.get(persona.name)
        reason = outcome.reason
        if not outcome.answered:
            reason = f"{reason}; figures as last read, {ago(last.read_at, now)}" if last else f"{reason}; never read"
        stored = last.body["row"] if last else None
        live = last.body["live"] if last else None
        jobs = stored["jobs"] if stored else persona_store.empty_overview(now)["jobs"]
        watch = self.watches[persona.name]
        return Row(
            name=persona.name,
            mode=persona.mode,
            state=outcome.state,
            reason=reason,
            jobs_running=jobs["running"],
            jobs_queued=jobs["queued"],
            failed_hour=jobs["failed_hour"],
            failed_day=jobs["failed_day"],
            next_fire_at=stored["next_fire_at"] if stored else None,
            requests_by_hour=stored["requests_by_hour"] if stored else [0] * persona_store.SCALES["hour"][1],
            pages_busy=len(live["busy_pages"]) if live else None,
            pages_open=len(live["open_pages"]) if live else None,
            pages_read_at=last.read_at if last else None,
            memory_bytes=watch.memory_now,
            memory_read_at=watch.memory_read_at,
            last_woke_at=live["started_at"] if live else None,  # the replica's start: its last wake
            uptime_s=now - live["started_at"] if live and outcome.answered else None,
            read_at=now,
        )

    async def rows(self) -> list[Row]:
        personas = list(self.personas.values())
        outcomes = await asyncio.gather(*(self.read(persona) for persona in personas))
        now = time.time()
        return [self.row(persona, outcome, now) for persona, outcome in zip(personas, outcomes, strict=True)]

    async def detail(self, name: str) -> Detail | None:
        persona = self.personas.get(name)
        if persona is None:
            return None
        outcome = await self.read(persona)
        now = time.time()
        last = self.last.get(name)
        overview = last.body["overview"] if last else persona_store.empty_overview(now)
        points = [(point.minute, point.peak) for point in self.watches[name].memory]
        memory = {
            scale: memory_by(points, shaped["start"], shaped["step"], len(shaped["calls_ok"]))
            for scale, shaped in overview["series"].items()
        }
        live = last.body["live"] if last else {"open_pages": [], "busy_pages": []}
        return Detail(
            row=self.row(persona, outcome, now),
            overview=overview,
            memory=memory,
            pages_open=list(live["open_pages"]),
            pages_busy=list(live["busy_pages"]),
            can_act=False,
            waker_links=False,
        )

    async def search_one(self, persona: ServicePersona, search: JobSearch) -> tuple[list[dict[str, Any]], str]:
        """The persona's matching jobs, and where they came from (or why none did)."""
        try:
            answer = await self.http.get(
                persona.api_url + "/overview/jobs", params=search.as_query(), headers=self.headers(persona)
            )
        except httpx.HTTPError as error:
            return [], "not read: " + (ASLEEP_REASON if refused(error) else f"unreachable: {described(error)}")
        if answer.status_code != 200:
            return [], f"not read: {refusal(answer)}"
        return answer.json()["jobs"], "service"

    async def search(self, search: JobSearch, personas: list[str]) -> tuple[list[dict[str, Any]], dict[str, str]]:
        """Every chosen persona's matching jobs, newest first, at most
        `search.limit` in all; and per persona where they were read from."""
        chosen = [self.personas[name] for name in personas]
        found = await asyncio.gather(*(self.search_one(persona, search) for persona in chosen))
        hits = [{"persona": persona.name, **job} for persona, (jobs, _) in zip(chosen, found, strict=True) for job in jobs]
        hits.sort(key=lambda job: (job["accepted_at"], job["id"]), reverse=True)
        sources = {persona.name: source for persona, (_, source) in zip(chosen, found, strict=True)}
        return hits[: search.limit], sources

    async def metrics(self, name: str) -> str | None:
        """The worker's metrics text, or None when it does not answer (never woken for it)."""
        persona = self.personas[name]
        try:
            answer = await self.http.get(persona.api_url + "/metrics", headers=self.headers(persona))
        except httpx.HTTPError:
            return None
        return answer.text if answer.status_code == 200 else None

    # --- reading in the background -----------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop, every_s: float) -> None:
        """Read every persona every `every_s` seconds (0: only when a page asks),
        so the memory chart and the last readings go on while nobody looks."""
        if every_s > 0:
            self.reader = loop.create_task(self.keep_reading(every_s))

    async def keep_reading(self, every_s: float) -> None:
        while True:
            try:
                await self.rows()
            except Exception:  # a loop logs each failure and keeps going
                log.exception("reading the fleet failed")
            await asyncio.sleep(every_s)

    async def close(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
            await asyncio.gather(self.reader, return_exceptions=True)
        await self.http.aclose()
