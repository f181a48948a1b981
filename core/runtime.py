"""The worker's runtime as the apps reach it: through a request, through
its tasks, and through its tracker.

`serve` builds one runtime (worker/runtime.py: the pages, the job runner,
the request log, the live links…) and the ASGI application
(penelope_site/asgi.py) puts it in the scope of every request and socket it
serves. A view reads the part it needs through `runtime_of`; no app imports
the runtime's class, which sits above them all.

`WorkerRuntime` is what the apps take from the runtime, typed: `runtime_of`
answers one. The runtime's class sits on the top floor and core on the
bottom, so core names neither it nor the classes of its parts that live in
the apps above core (the pages, the job runner…): those parts are `Any`
here, and typed by the accessor of the app that owns each (`pages_of`,
`runner_of`, `codes_of`). tests/test_runtime_type.py checks that a real
runtime has every part named, and that the apps use no part unnamed.

`Tasks.spawn` runs background tasks on the worker's event loop, none of
which dies silently. It keeps each task referenced until it ends (the loop
itself holds only weak references) and logs its exception, naming what the
task was about (a job, a page, a webhook attempt): a task that fails where
nobody awaits it otherwise leaves only asyncio's "Task exception was never
retrieved", long after, with nothing to say what was lost. The runtime owns
one `Tasks` and hands it to what spawns; an object built on its own (a
test's, a command's) makes its own.

`Tracker` holds in-memory counters the waker reads: requests in flight and
the last client activity. The runtime owns one too; the jobs app calls its
`touch()` when a job stops counting (a polling job ends, a webhook job is
delivered or given up), so the idle clock starts then; its counts reach the
activity route through the URL configuration (`ActivityView.job_counts`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from django.conf import settings

from core.awake import must_stay_awake, read_next_wake, write_next_wake
from core.errors import Refusal
from core.wrong_keys import WrongKeys

SCOPE_KEY = "penelope.runtime"

log = logging.getLogger("penelope.tasks")


class NoRuntime(LookupError):
    """A request that came in through no worker's application (a test's bare request)."""


@runtime_checkable
class WorkerRuntime(Protocol):
    """The parts of the worker's runtime (worker/runtime.py) the apps use.
    A part whose class core may not import is `Any`, its class named: the
    apps' classes sit above core (docs/design/LAYOUT.md), and a protocol of
    each here would copy its methods, to drift from them."""

    tasks: Tasks
    tracker: Tracker
    wrong_keys: WrongKeys
    downloading: set[str]  # one-shot media links being downloaded now (media_store/views.py)
    # core.events.Bus: core/events.py imports this module (for Tasks), and
    # loads the event log's models, which this module, imported before
    # Django's apps are ready (through the plugins), must not.
    bus: Any
    pages: Any  # browser.registry.PageRegistry, typed by browser.registry.pages_of
    links: Any  # live.links.Links
    casts: Any  # live.screencast.Casts
    questions: Any  # live.human.Questions
    demo_codes: Any  # demo_site.sign_in.SignInCodes, typed by demo_site.sign_in.codes_of
    request_log: Any  # activity.log.RequestLog
    cdp: Any  # cdp.hub.CdpHub
    jobs: Any  # jobs.runner.JobRunner, typed by jobs.starting.runner_of
    schedules: Any  # schedules.firing.ScheduleFirer


def runtime_of(holder: Any) -> WorkerRuntime:
    """The runtime of a request (Django's or DRF's) or of a socket's consumer:
    whatever carries the ASGI scope it came in with, or the scope itself. A WSGI request (Django's
    test client, in the admin's tests) carries it in its environ."""
    scope = holder if isinstance(holder, dict) else getattr(holder, "scope", None)
    if scope is None:
        scope = getattr(holder, "META", {})
    try:
        return scope[SCOPE_KEY]
    except KeyError:
        raise NoRuntime("This request came through no worker's application: it has no runtime.") from None


def with_runtime(application: Any, runtime: WorkerRuntime) -> Any:
    """`application`, with `runtime` in the scope of everything it serves."""

    async def serve(scope: dict, receive: Any, send: Any) -> None:
        scope[SCOPE_KEY] = runtime  # the server's own scope for this connection; no copy
        await application(scope, receive, send)

    return serve


class Tasks:
    def __init__(self) -> None:
        self.running: set[asyncio.Task] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], *, about: str) -> asyncio.Task:
        """Run `coro` as a task of its own; `about` names what it concerns ("job 5b1d…")."""
        task = asyncio.get_running_loop().create_task(coro, name=about)
        self.running.add(task)
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task) -> None:
        self.running.discard(task)
        if task.cancelled():
            return
        error = task.exception()  # retrieved here, so asyncio never reports it unread
        if error is None or isinstance(error, Refusal):
            return  # an answer (a refusal is one), for whoever awaits it
        log.error("background task for %s failed", task.get_name(), exc_info=error)


@dataclass
class Tracker:
    requests_in_flight: int = 0
    last_activity_at: float = 0.0  # epoch seconds; 0 until the first request
    started_at: float = field(default_factory=time.time)
    # Epoch seconds of the next instant the worker has work of its own to
    # start (a schedule's fire), None when it has none: set by the schedules.
    next_wake_at: float | None = None

    def touch(self) -> None:
        self.last_activity_at = time.time()

    def idle_seconds(self, now: float | None = None) -> float:
        now = now or time.time()
        return max(0.0, now - (self.last_activity_at or self.started_at or now))

    def idle_now(self, *, jobs_in_flight: int, webhooks_pending: int, now: float) -> float:
        """The activity route's `idle_seconds`: 0 while work is in flight,
        however long ago it began, else to the millisecond."""
        if self.requests_in_flight or jobs_in_flight or webhooks_pending:
            return 0.0
        return round(self.idle_seconds(now), 3)

    def stays_awake(self, *, jobs_in_flight: int, webhooks_pending: int, idle_timeout_s: float, now: float) -> bool:
        """The worker's stay-awake signal (the activity route's `stay_awake`,
        the metrics' `penelope_stay_awake`): core/awake.py's rule, the waker's,
        on the idle time the activity route shows."""
        return must_stay_awake(
            requests_in_flight=self.requests_in_flight,
            jobs_in_flight=jobs_in_flight,
            webhooks_pending=webhooks_pending,
            idle_seconds=self.idle_now(jobs_in_flight=jobs_in_flight, webhooks_pending=webhooks_pending, now=now),
            idle_timeout_s=idle_timeout_s,
            next_wake_in_s=self.next_wake_at - now if self.next_wake_at is not None else None,
            wake_lead_s=settings.WAKE_LEAD_S,
        )

    def wake_at(self, at: float | None) -> None:
        """The worker's next wake changed: shown by the activity route and
        kept in the store, where its supervisor reads it while it sleeps."""
        self.next_wake_at = at
        # Compared with the store's copy, not with memory: a fresh worker, or
        # `manage.py schedules` beside it, may have left another instant there.
        at = round(at, 3) if at is not None else None
        if read_next_wake(settings.STORE_DIR) != at:
            write_next_wake(settings.STORE_DIR, at)
