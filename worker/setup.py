"""Wires the worker's pieces into one runtime: the only module that knows them all."""

from __future__ import annotations

import asyncio
from functools import partial

from django.conf import settings

from activity.log import BROWSER_EVENTS, sweep_request_log_batch
from browser.pool import close_idle
from browser.processes import charged_bytes
from browser.purge import purge_loop_step
from browser.registry import PageRegistry
from core import event_log
from core.db_thread import VACUUM_PAGES, adrain, on_db_thread, release_free_pages
from jobs.delivery import Deliverer
from jobs.services import arecover, asweep
from media_store import store as media_store
from media_store.store import drop_orphans
from plugins.framework import families
from worker.runtime import Loop, Runtime


async def load_plugins() -> None:
    """Import every family in PENELOPE_PLUGINS now, so a typo fails the start."""
    families()


async def recover_jobs() -> None:
    """Before the port opens: jobs caught running become interrupted."""
    await arecover()


async def sweep_jobs() -> None:
    await asweep()


async def sweep_store() -> None:
    """Media files without a row and rows without a file; old request-log
    rows; then the pages the sweeps freed go back to the disk."""
    await on_db_thread(drop_orphans)()
    await adrain(sweep_request_log_batch)
    await adrain(release_free_pages, full=VACUUM_PAGES)


async def check_browser_memory(pages: PageRegistry) -> None:
    """BROWSER_MAX_MB: read the browser's charged memory (off the loop) and
    let the browser recycle itself when it passed the bound."""
    browser = pages.browser
    if browser is not None:
        browser.memory_checked(await asyncio.to_thread(charged_bytes))


def build_runtime() -> Runtime:
    runtime = Runtime()
    runtime.startup_steps.append(load_plugins)
    runtime.startup_steps.append(recover_jobs)
    # The event log goes on from the last run's ids (a crash leaves a `missed`
    # event), then writes what the bus publishes every FLUSH_S; the job sweep
    # bounds it.
    runtime.startup_steps.append(runtime.bus.log.open)
    runtime.loops.append(Loop("event log", runtime.bus.log.flush, event_log.FLUSH_S))
    deliverer = Deliverer(tracker=runtime.tracker, bus=runtime.bus, tasks=runtime.tasks)
    runtime.long_running.append(deliverer.run_forever)
    # The deliverer wakes when the bus says a webhook job ended.
    runtime.listeners.append((deliverer.HEARS, deliverer.on_event))
    # Jobs a restart left queued wait for their pages again, once the browser is up.
    runtime.long_running.append(runtime.jobs.resume_queued)
    # Schedules: the fires missed while stopped first, then each at its instant.
    runtime.long_running.append(runtime.schedules.run)
    runtime.loops.append(Loop("job sweep", sweep_jobs, settings.SWEEP_S))
    runtime.shutdown_steps.append(runtime.jobs.stop)
    # The request log, media orphans, the memory purge.
    runtime.startup_steps.append(media_store.adrop_orphans_at_start)
    request_log, pages = runtime.request_log, runtime.pages
    runtime.loops.append(Loop("request log", request_log.aflush, settings.REQUEST_LOG_FLUSH_S))
    # The browser's relaunches and the pages' crashes, into the request log.
    runtime.listeners.append((BROWSER_EVENTS, request_log.record_browser_event))
    runtime.browser.on_refused = request_log.record_refusal
    runtime.loops.append(Loop("store sweep", sweep_store, settings.SWEEP_S))
    runtime.loops.append(Loop("memory purge", partial(purge_loop_step, pages), settings.PURGE_S))
    # POOL_PAGE_IDLE_S: the pages `any` opened and nobody used since.
    runtime.loops.append(Loop("pool pages", partial(close_idle, pages), min(settings.POOL_PAGE_IDLE_S, 30)))
    if settings.BROWSER_MAX_MB:
        runtime.loops.append(Loop("browser memory", partial(check_browser_memory, pages), settings.BROWSER_CHECK_S))
    # After the jobs are cancelled, so their rows are written too.
    runtime.shutdown_steps.append(request_log.aflush)
    return runtime
