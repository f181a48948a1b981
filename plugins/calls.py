"""Running an action on a claimed page: the one place that answers a plugin call.

A plain call and a job both come here; the job only decides who waits for
the outcome and where it goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings

from browser.pages import Claim, ManagedPage
from browser.registry import PageRegistry
from core.errors import DomainError, NavigationRefused, TabLost
from core.routes import ANY
from plugins.debug import Recorder
from plugins.framework import Action, Context
from plugins.running import Outcome, run_action


async def run_claimed(
    pages: PageRegistry, claim: Claim, action: Action, params: dict[str, Any], ctx: Context | None = None
) -> Outcome:
    """Run the action on the claimed page and release the page, whatever happens.

    The page's tab is ready first (a browser relaunch waited for up to
    PAGE_WAIT_S, a crashed tab replaced). A tab lost under the action (its
    renderer crashed, the browser stopped) ends the action at once, at its
    next await, and answers 502 naming the loss, whatever the action made of
    the errors it met: never the client's fault.
    """
    page = claim.page
    ctx = ctx or Context(page_id=page.name)
    ran = False
    recorder: Recorder | None = None
    try:
        try:
            tab = await pages.ensure_tab(page, settings.PAGE_WAIT_S)
        except DomainError as error:  # the browser is down, or no tab opens
            return refused(error, page.name, time.time(), 0.0)
        generation = page.tab_generation  # no await since the tab was checked
        page.on_tab_lost = ctx.end_now
        page.refused = None
        ran = True
        if ctx.debug:
            recorder = Recorder(ctx.debug, tab, f"{action.route} on page {page.name}", pages.tracing, pages.tasks)
            recorder.start()
            await recorder.start_trace()
        try:
            outcome = await run_action(action, tab, params, ctx)
        finally:
            if page.on_tab_lost == ctx.end_now:  # a cancelled job's plugin may end after the page moved on
                page.on_tab_lost = None
        if page.tab_generation != generation:
            outcome = refused(TabLost(page.fault), page.name, outcome.started_at, outcome.duration_s)
        elif page.refused is not None:  # BROWSER_REFUSE_PRIVATE: whatever the action made of the 403 page
            outcome = refused(NavigationRefused(page.refused), page.name, outcome.started_at, outcome.duration_s)
        if recorder is not None:  # the page as the action left it, before anyone else may use it
            await recorder.finish(outcome.status, outcome.body, ctx.put_media, ctx.revealed)
        return outcome
    finally:
        if recorder is not None and not recorder.done:  # cancelled: the trace is stopped, nothing kept
            dropping = pages.tasks.spawn(recorder.discard(), about=f"dropping {action.route}'s debug recording on page {page.name}")
            with contextlib.suppress(BaseException):  # a second cancel leaves it to finish alone
                await asyncio.shield(dropping)
        pages.broker.release(claim)
        if ran:  # a call the browser ran counts toward a recycle, and its cookies are read
            pages.call_ended()


def refused(error: DomainError, page_id: str, started_at: float, duration_s: float) -> Outcome:
    """The outcome of a call the domain refused: its status, the envelope, and whether it may pass."""
    return Outcome.refused(error, page_id, started_at, duration_s)


async def run_plain(
    pages: PageRegistry, page: ManagedPage, action: Action, params: dict[str, Any], lease_id: str | None,
    debug: str | None = None, on_credential_use: Callable[[dict[str, Any]], None] | None = None,
) -> Outcome:
    """A plain call: wait in line for the page (up to PAGE_WAIT_S; a client
    that goes away leaves the line), then run the action to its end even if
    the client goes away meanwhile (its answer is then lost), so the page is
    never left half-driven."""
    # A browser being launched again is waited for first, so the calls queued
    # behind the page answer 503 after PAGE_WAIT_S if it does not come back
    # (or at once if it failed), as a call arriving during a relaunch should.
    deadline = time.monotonic() + settings.PAGE_WAIT_S
    await pages.wait_for_browser(page.name, settings.PAGE_WAIT_S)
    claim = await pages.broker.acquire(page.name, wait_s=max(0.0, deadline - time.monotonic()), lease_id=lease_id)
    ctx = Context(page_id=page.name, debug=debug, on_credential_use=on_credential_use)
    return await asyncio.shield(pages.tasks.spawn(run_claimed(pages, claim, action, params, ctx), about=f"{action.route} on page {page.name}"))


async def run_anywhere(
    pages: PageRegistry, action: Action, params: dict[str, Any], debug: str | None = None,
    on_credential_use: Callable[[dict[str, Any]], None] | None = None,
) -> Outcome:
    """A plain call on `any`: on the first free page (or a pool page opened
    for it), else on the first page that frees within PAGE_WAIT_S, then 409.
    The answer's `page_id` names the page that ran it."""
    await pages.wait_for_browser(ANY, settings.PAGE_WAIT_S)
    claim = await pages.broker.acquire(ANY, wait_s=settings.PAGE_WAIT_S)
    page = claim.page
    ctx = Context(page_id=page.name, debug=debug, on_credential_use=on_credential_use)
    return await asyncio.shield(pages.tasks.spawn(run_claimed(pages, claim, action, params, ctx), about=f"{action.route} on page {page.name} (any)"))
