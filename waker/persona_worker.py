"""One persona's worker, as the waker holds it: its process, its state
(stopped, starting, running, stopping) and the policy that starts, stops and
recycles it: started on demand, stopped when idle (`sleepy`) or recycled
(`always`), never under work, restarted after a crash (`always`).

Everything here runs on the waker's one event loop, so a state change with no
`await` between its check and its write cannot interleave with another. The
waker knows a worker only through its process and its HTTP API. Each start,
stop and recycle is counted for the waker's metrics (waker/metrics.py) where
it is decided.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings

from core.awake import read_next_wake, wake_due
from waker import metrics, readings
from waker import process as processes
from waker.personas import ALWAYS, SLEEPY, Persona
from waker.policy import Activity, retry_delay, stop_due
from waker.process import Child, StartFailed
from waker.readings import ActivityUnreadable
from waker.template import WorkerTemplate
from waker.watch import Watch

log = logging.getLogger("penelope.waker")

STOPPED, STARTING, RUNNING, STOPPING = "stopped", "starting", "running", "stopping"


class WorkInFlight(Exception):
    """A stop refused: the worker has work in flight."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class PersonaWorker:
    """The waker's side of one persona: its worker process, its state, and the policy."""

    def __init__(self, persona: Persona, http: httpx.AsyncClient, forks: WorkerTemplate | None = None):
        self.persona = persona
        self.http = http
        self.forks = forks  # the template its worker is forked from, if any
        self.state = STOPPED
        self.child: Child | None = None
        self.started_at: float | None = None  # epoch seconds, when it became healthy
        self.running_since = 0.0  # monotonic, when it became healthy
        self.activity: Activity | None = None
        self.activity_error: str | None = None
        self.last_exit: dict[str, Any] | None = None
        self.unexpected_exits = 0
        # Requests the waker is passing to the worker now, and when the last one
        # began: the guard against stopping a worker between its activity read
        # and the SIGTERM.
        self.forwards_in_flight = 0
        self.last_forward_started = 0.0  # monotonic
        # An operator stopped it: an `always` worker stays stopped until started.
        self.stay_stopped = False
        self.closing = False
        self._transition = asyncio.Lock()
        self._start_attempt: asyncio.Future[None] | None = None
        self._failed_starts = 0
        self._retry_at = 0.0  # monotonic
        self.watch = Watch()  # for the console

    @property
    def log_path(self) -> Path:
        return self.persona.store / "worker.log"

    def snapshot(self) -> dict[str, Any]:
        """The persona as the waker's API shows it."""
        persona, activity = self.persona, self.activity
        return {
            "name": persona.name,
            "mode": persona.mode,
            "state": self.state,
            "pid": self.child.process.pid if self.child else None,
            "base_url": persona.api_url,
            "store": str(persona.store),
            "idle_timeout_s": persona.idle_timeout_s,
            "recycle_s": persona.recycle_s,
            "started_at": round(self.started_at, 3) if self.started_at else None,
            "idle_seconds": activity.idle_seconds if activity else None,
            "requests_in_flight": activity.requests_in_flight if activity else None,
            "jobs_in_flight": activity.jobs_in_flight if activity else None,
            "webhooks_pending": activity.webhooks_pending if activity else None,
            "activity_read_at": round(activity.read_at, 3) if activity else None,
            "activity_error": self.activity_error,
            "forwards_in_flight": self.forwards_in_flight,
            "last_exit": self.last_exit,
            "unexpected_exits": self.unexpected_exits,
        }

    # --- starting ------------------------------------------------------------------

    async def ensure_running(self) -> None:
        """Start the worker unless it runs; answer once it is healthy. Callers
        that arrive during a start (or a stop) wait for it and share its outcome."""
        self.stay_stopped = False
        while self.state != RUNNING:
            await self._join_start_attempt()

    async def _join_start_attempt(self) -> None:
        if self.closing:
            raise StartFailed("The waker is stopping.")
        if self._start_attempt is None:
            attempt = asyncio.ensure_future(self._start_once())
            self._start_attempt = attempt
            attempt.add_done_callback(self._forget_attempt)
        # Shielded: a client that goes away does not abort a start others wait for.
        await asyncio.shield(self._start_attempt)

    def _forget_attempt(self, attempt: asyncio.Future[None]) -> None:
        if self._start_attempt is attempt:
            self._start_attempt = None
        if not attempt.cancelled():
            attempt.exception()  # retrieved here, so a start nobody awaited any more is not reported twice

    async def _start_once(self) -> None:
        async with self._transition:
            if self.state != RUNNING:
                await self._launch()

    async def _launch(self) -> None:
        """Start the process and wait until it is healthy. The caller holds the transition lock."""
        persona = self.persona
        self.state = STARTING
        child: Child | None = None
        began = time.monotonic()
        try:
            process = await processes.spawn(persona, self.log_path, self.forks)
            child = self.child = Child(process)
            child.watcher = asyncio.ensure_future(self._watch(child))
            await self._until_healthy(child)
            if self.closing:
                raise StartFailed("The waker is stopping.")
        except BaseException as error:
            self.watch.start_failed(error)
            metrics.wake_failed(persona.name)
            if child is not None:
                await self._terminate(child)
            self._mark_stopped()
            raise
        metrics.woke(persona.name, time.monotonic() - began)
        self.state = RUNNING
        self.started_at = time.time()
        self.running_since = time.monotonic()
        self.activity = None
        self._failed_starts = 0
        self.watch.started()
        log.info("persona %s: worker %d running on %s", persona.name, child.process.pid, persona.api_url)

    async def _until_healthy(self, child: Child) -> None:
        await readings.until_healthy(self.http, self.persona, child, self.log_path, lambda: self.closing)

    # --- stopping ------------------------------------------------------------------

    async def stop(self, *, force: bool) -> None:
        """Stop the worker, at the operator's request. Unless forced, refuse
        (WorkInFlight) while it has work in flight. An `always` worker then
        stays stopped until it is started again."""
        if not force and self._start_attempt is not None:
            with contextlib.suppress(StartFailed):
                await asyncio.shield(self._start_attempt)
        read_started = time.monotonic()
        if not force and self.state == RUNNING:
            activity = await self.read_activity()
            if activity is None:
                raise WorkInFlight(
                    f"Persona {self.persona.name}'s activity cannot be read ({self.activity_error}); "
                    'send {"force": true} to stop it anyway.'
                )
            if activity.in_flight:
                raise WorkInFlight(
                    f"Persona {self.persona.name} has work in flight ({activity.describe()}); "
                    'send {"force": true} to stop it anyway.'
                )
        async with self._transition:
            if not force and self.state == RUNNING and not self._quiet_since(read_started):
                raise WorkInFlight(
                    f"Persona {self.persona.name} has requests in flight through the waker; "
                    'send {"force": true} to stop it anyway.'
                )
            self.stay_stopped = True
            if self.child is not None:
                log.info(
                    "persona %s: stopping worker %d (asked%s)",
                    self.persona.name,
                    self.child.process.pid,
                    ", forced" if force else "",
                )
                metrics.stopped(self.persona.name, "asked")
                await self._terminate(self.child)

    async def _terminate(self, child: Child) -> None:
        self.state = STOPPING
        await processes.terminate(child, self.persona.name)
        self._on_exit(child)
        self._mark_stopped()

    def _mark_stopped(self) -> None:
        self.state = STOPPED
        self.child = None
        self.started_at = None
        self.activity = None
        self.activity_error = None

    async def _watch(self, child: Child) -> None:
        await child.process.wait()
        self._on_exit(child)

    def _on_exit(self, child: Child) -> None:
        """Record a worker's end once, and handle an end nobody asked for."""
        if child.exited:
            return
        child.exited = True
        returncode = child.process.returncode
        self.last_exit = {
            "at": round(time.time(), 3),
            "pid": child.process.pid,
            "returncode": returncode,
            "expected": child.stop_requested,
        }
        if child.stop_requested or self.child is not child or self.state != RUNNING:
            return  # a stop in hand, or a start that reports its own failure
        self.unexpected_exits += 1
        then = "it is started again" if self.persona.mode == ALWAYS else "it is marked stopped"
        log.warning(
            "persona %s: worker %d exited unexpectedly with code %s; %s",
            self.persona.name,
            child.process.pid,
            returncode,
            then,
        )
        self._mark_stopped()

    async def close(self) -> None:
        """At the waker's stop: stop the worker whatever it is doing. A start
        in progress sees `closing` and stops its own worker."""
        self.closing = True
        if self._start_attempt is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._start_attempt)
        if self.child is not None:
            log.info("persona %s: stopping worker %d (the waker stops)", self.persona.name, self.child.process.pid)
            metrics.stopped(self.persona.name, "waker")
            await self._terminate(self.child)

    # --- the policy ----------------------------------------------------------------

    async def run_policy(self) -> None:
        """Every WAKER_POLL_S: start a stopped `always` worker, read a running
        worker's activity, and stop (`sleepy`) or recycle (`always`) it when due."""
        while True:
            try:
                await self.policy_step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("persona %s: the policy step failed; it goes on", self.persona.name)
            await asyncio.sleep(settings.WAKER_POLL_S)

    async def policy_step(self) -> None:
        if self.state == STOPPED:
            if self.stay_stopped or time.monotonic() < self._retry_at:
                return
            if self.persona.mode == ALWAYS:
                await self._start_always()
            elif (at := read_next_wake(self.persona.store)) is not None and wake_due(at - time.time(), settings.WAKE_LEAD_S):
                log.info("persona %s: starting the worker for its schedule's fire at %.3f", self.persona.name, at)
                metrics.woken_for_schedule(self.persona.name)
                await self._start_always()
            return
        if self.state != RUNNING:
            return
        read_started, child = time.monotonic(), self.child
        await self.watch.sample_memory(child.process.pid)
        activity = await self.read_activity()
        if activity is not None and activity.browser_failed:
            await self._restart_failed(child)
            return
        due = stop_due(
            mode=self.persona.mode,
            activity=activity,
            quiet=self._quiet_since(read_started),
            running_for=time.monotonic() - self.running_since,
            idle_timeout_s=self.persona.idle_timeout_s,
            recycle_s=self.persona.recycle_s,
            wake_lead_s=settings.WAKE_LEAD_S,
        )
        if not due:
            return
        async with self._transition:
            # Re-checked with no await before the SIGTERM: a request the waker
            # began forwarding since the read keeps the worker up, and a worker
            # started since is not the one that was read.
            if self.state != RUNNING or self.child is not child or not self._quiet_since(read_started):
                return
            if self.persona.mode == SLEEPY:
                log.info(
                    "persona %s: idle %.1f s, stopping worker %d",
                    self.persona.name,
                    activity.idle_seconds,
                    self.child.process.pid,
                )
                metrics.stopped(self.persona.name, "idle")
            else:
                log.info(
                    "persona %s: recycling worker %d after %.0f s",
                    self.persona.name,
                    self.child.process.pid,
                    time.monotonic() - self.running_since,
                )
                metrics.recycled(self.persona.name)
            await self._terminate(self.child)
        if self.persona.mode == ALWAYS:
            await self._start_always()

    async def _restart_failed(self, child: Child) -> None:
        """The worker's browser could not be launched again: the worker exits
        by itself, and is stopped here if it has not yet; an `always` one is
        started again, a `sleepy` one at the next request."""
        async with self._transition:
            if self.state != RUNNING or self.child is not child:
                return
            log.warning(
                "persona %s: worker %d says its browser failed; stopping it to start it again",
                self.persona.name,
                child.process.pid,
            )
            metrics.stopped(self.persona.name, "browser_failed")
            await self._terminate(child)
        if self.persona.mode == ALWAYS:
            await self._start_always()

    async def _start_always(self) -> None:
        """Start the worker from the policy (an `always` one, or a `sleepy`
        one due for a fire); a failed start is tried again after a back-off."""
        try:
            await self._join_start_attempt()
        except StartFailed as error:
            self._failed_starts += 1
            delay = retry_delay(self._failed_starts)
            self._retry_at = time.monotonic() + delay
            log.warning(
                "persona %s: the worker did not start (%s); trying again in %g s",
                self.persona.name,
                error.message,
                delay,
            )

    def _quiet_since(self, moment: float) -> bool:
        """No request through the waker in flight, and none begun since `moment`."""
        return self.forwards_in_flight == 0 and self.last_forward_started < moment

    async def read_activity(self) -> Activity | None:
        """Read the worker's activity; None (and `activity_error`) when it cannot be read."""
        try:
            activity = await readings.read_activity(self.http, self.persona)
        except ActivityUnreadable as unreadable:
            reason = str(unreadable)
            if self.activity_error is None:
                log.warning("persona %s: cannot read the worker's activity: %s", self.persona.name, reason)
            self.activity_error = reason
            return None
        if self.state == RUNNING:  # a read that raced a stop leaves nothing behind
            self.activity, self.activity_error = activity, None
            self.watch.read(activity)
        return activity

    def auth_headers(self) -> dict[str, str]:
        return readings.auth_headers(self.persona)

    @contextlib.contextmanager
    def forwarding(self) -> Iterator[None]:
        """Count a request the waker passes to the worker, for as long as it is in flight."""
        self.forwards_in_flight += 1
        self.last_forward_started = time.monotonic()
        try:
            yield
        finally:
            self.forwards_in_flight -= 1
